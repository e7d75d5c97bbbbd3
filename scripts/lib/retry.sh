# retry N command...: run a registry/mirror step up to N times, 10 s, 20 s, ... apart
# (transient mirror errors). Sourced by the install scripts; uses their `log`.
retry() {
  local n="$1"; shift
  local i
  for ((i = 1; i <= n; i++)); do
    "$@" && return 0
    if [ "$i" -lt "$n" ]; then
      log "attempt $i/$n failed: $*; retrying in $((10 * i))s"
      sleep $((10 * i))
    fi
  done
  log "failed after $n attempts: $*"
  return 1
}
