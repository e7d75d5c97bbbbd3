#!/usr/bin/env bash
# Install the database servers that the hub's tests run for real: PostgreSQL (initdb, postgres,
# psql) and redis-server, from the Debian packages `postgresql` and `redis-server`.
#
# The tests never use a system service: mcpkit.testing.services starts throwaway servers on
# 127.0.0.1 in temp dirs. So this script only puts the binaries (and the `postgres` system user,
# which PostgreSQL needs when the tests run as root) on the machine, and makes sure installing
# them starts nothing: a temporary /usr/sbin/policy-rc.d that exits 101 ("action forbidden")
# keeps the packages' postinst scripts from starting the default cluster or redis (invoke-rc.d
# and deb-systemd-invoke both honour it); it is removed at exit. The `main` cluster that
# postgresql's postinst creates stays, stopped. As a safety net, a system postgres/redis process
# that appeared during the install (new PID, system config) is stopped by its PID.
#
# Idempotent: when everything is present it only prints the versions. Installing needs root (CI
# runs as root); without root and with something missing it says what to run and exits 1.
# apt-get update runs once; both apt steps retry 3 times with backoff (transient mirror errors).
#
# Usage: scripts/install_services.sh
set -euo pipefail

log() { echo "[services] $*" >&2; }

# The newest /usr/lib/postgresql/<version>/bin/NAME, else NAME from PATH (what
# mcpkit.testing.services.find_postgres_bin also accepts); prints nothing when there is none.
pg_bin() {
  local name="$1" dir
  while read -r dir; do
    if [ -x "$dir/$name" ]; then echo "$dir/$name"; return 0; fi
  done < <(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r)
  command -v "$name" 2>/dev/null || true
}

missing_packages() { # prints the packages to install, one a line
  local name pg_missing=0
  for name in initdb postgres psql; do
    [ -n "$(pg_bin "$name")" ] || pg_missing=1
  done
  # As root the servers run as the `postgres` user, which postgresql-common creates.
  if [ "$EUID" -eq 0 ] && ! id -u postgres >/dev/null 2>&1; then pg_missing=1; fi
  [ "$pg_missing" -eq 0 ] || echo postgresql
  command -v redis-server >/dev/null 2>&1 || echo redis-server
}

print_versions() {
  log "postgres:     $("$(pg_bin postgres)" --version) ($(pg_bin postgres))"
  log "initdb:       $("$(pg_bin initdb)" --version)"
  log "psql:         $("$(pg_bin psql)" --version)"
  log "redis-server: $(redis-server --version) ($(command -v redis-server))"
}

. "$(dirname "${BASH_SOURCE[0]}")/lib/retry.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

# System servers: postgres started with a config under /etc/postgresql (a Debian cluster),
# redis-server running as the `redis` user (the Debian service); our throwaway servers are
# neither, so they are never touched here.
system_server_pids() {
  local pid args user
  for pid in $(pgrep -x postgres 2>/dev/null || true); do
    args="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)"
    case "$args" in *config_file=/etc/postgresql/*) echo "$pid" ;; esac
  done
  for pid in $(pgrep -x redis-server 2>/dev/null || true); do
    user="$(ps -o user= -p "$pid" 2>/dev/null || true)"
    [ "${user// /}" = redis ] && echo "$pid"
  done
  return 0
}

# Stop the system servers that started while we installed (PIDs not in $1), by PID:
# SIGINT is postgres's fast shutdown, SIGTERM redis's; each wait is bounded.
stop_new_system_servers() {
  local before="$1" pid comm i
  for pid in $(system_server_pids); do
    case " $before " in *" $pid "*) continue ;; esac
    comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
    log "package install started a system $comm (PID $pid); stopping it"
    if [ "$comm" = postgres ]; then kill -INT "$pid" 2>/dev/null || true
    else kill -TERM "$pid" 2>/dev/null || true; fi
    for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && { log "PID $pid still running after 30s; SIGKILL"; kill -KILL "$pid" || true; }
  done
  return 0
}

mapfile -t PACKAGES < <(missing_packages)
if [ "${#PACKAGES[@]}" -eq 0 ]; then
  log "already installed"
  print_versions
  exit 0
fi

if [ "$EUID" -ne 0 ]; then
  log "missing packages: ${PACKAGES[*]} (for initdb, postgres, psql, redis-server)"
  log "Installing them needs root: sudo bash scripts/install_services.sh"
  log "(or: sudo apt-get install --no-install-recommends postgresql redis-server)"
  exit 1
fi
command -v apt-get >/dev/null || { log "missing ${PACKAGES[*]} and no apt-get (not Debian?)"; exit 1; }

POLICY=/usr/sbin/policy-rc.d
CREATED_POLICY=0
cleanup() { if [ "$CREATED_POLICY" -eq 1 ]; then rm -f "$POLICY"; fi; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
if [ -e "$POLICY" ]; then
  log "keeping the existing $POLICY"
else
  printf '#!/bin/sh\n# scripts/install_services.sh (mcpkit): start no service while installing\nexit 101\n' >"$POLICY"
  chmod 755 "$POLICY"
  CREATED_POLICY=1
fi

BEFORE="$(system_server_pids | tr '\n' ' ')"
t0=$(date +%s)
log "installing: ${PACKAGES[*]}"
apt_get_install "${PACKAGES[@]}"
stop_new_system_servers "$BEFORE"
log "installed in $(($(date +%s) - t0))s"

left="$(missing_packages | tr '\n' ' ')"
if [ -n "$left" ]; then log "still missing after the install: $left"; exit 1; fi
print_versions
