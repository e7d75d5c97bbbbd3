#!/usr/bin/env bash
# Install the Secret Service the OAuth token store's keyring tests use: Debian's `gnome-keyring`
# (gnome-keyring-daemon) and `dbus-daemon` (the session bus it runs on). Nothing is started
# here: each test starts its own private bus and keyring daemon in a temp HOME, headless, and
# stops them (tests/client/keyring_service.py). Without them those tests skip outside CI and
# fail in CI.
#
# Idempotent: when both are present it only prints their versions. Installing needs root (CI
# runs as root); without root and with something missing it says what to run and exits 1.
# apt-get update and the install each retry 3 times with backoff (transient mirror errors).
#
# Usage: scripts/install_keyring.sh
set -euo pipefail

log() { echo "[keyring] $*" >&2; }

. "$(dirname "${BASH_SOURCE[0]}")/lib/retry.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

missing_packages() { # prints the packages to install, one a line
  command -v gnome-keyring-daemon >/dev/null 2>&1 || echo gnome-keyring
  command -v dbus-daemon >/dev/null 2>&1 || echo dbus-daemon
}

print_versions() {
  log "gnome-keyring: $(gnome-keyring-daemon --version 2>/dev/null | head -1) ($(command -v gnome-keyring-daemon))"
  log "dbus-daemon:   $(dbus-daemon --version 2>/dev/null | head -1) ($(command -v dbus-daemon))"
}

mapfile -t PACKAGES < <(missing_packages)
if [ "${#PACKAGES[@]}" -eq 0 ]; then
  log "already installed"
  print_versions
  exit 0
fi
if [ "$EUID" -ne 0 ]; then
  log "missing packages: ${PACKAGES[*]}; installing them needs root: sudo bash scripts/install_keyring.sh"
  log "(or: sudo apt-get install --no-install-recommends ${PACKAGES[*]})"
  exit 1
fi
command -v apt-get >/dev/null || { log "missing ${PACKAGES[*]} and no apt-get (not Debian?)"; exit 1; }

t0=$(date +%s)
log "installing: ${PACKAGES[*]}"
apt_get_install "${PACKAGES[@]}"
left="$(missing_packages | tr '\n' ' ')"
if [ -n "$left" ]; then log "still missing after the install: $left"; exit 1; fi
log "installed in $(($(date +%s) - t0))s"
print_versions
