#!/usr/bin/env bash
# Install the browser the browser tests drive: Debian's `chromium` package (headless, run by
# Playwright through its executable path - Playwright's own browser downloads are not used).
# The hub's test loads /docs with every non-loopback request refused and checks that Swagger
# UI rendered; tests/auth_e2e logs in at a real OAuth provider through its pages. Without
# chromium they are skipped outside CI and fail in CI (tests/browser.py).
#
# Idempotent: when chromium is present it only prints its version. Installing needs root (CI
# runs as root); without root and without chromium it says what to run and exits 1.
# apt-get update and the install each retry 3 times with backoff (transient mirror errors).
#
# Usage: scripts/install_browser.sh
set -euo pipefail

log() { echo "[browser] $*" >&2; }

chromium_bin() { command -v chromium 2>/dev/null || command -v chromium-browser 2>/dev/null || true; }

. "$(dirname "${BASH_SOURCE[0]}")/lib/retry.sh"
. "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"

if [ -n "$(chromium_bin)" ]; then
  log "already installed: $("$(chromium_bin)" --version 2>/dev/null) ($(chromium_bin))"
  exit 0
fi
if [ "$EUID" -ne 0 ]; then
  log "chromium is missing; installing it needs root: sudo bash scripts/install_browser.sh"
  log "(or: sudo apt-get install chromium)"
  exit 1
fi
command -v apt-get >/dev/null || { log "chromium is missing and there is no apt-get (not Debian?)"; exit 1; }

t0=$(date +%s)
log "installing: chromium"
apt_get_install --with-recommends chromium
[ -n "$(chromium_bin)" ] || { log "chromium still missing after the install"; exit 1; }
log "installed in $(($(date +%s) - t0))s: $("$(chromium_bin)" --version 2>/dev/null)"
