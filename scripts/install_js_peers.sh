#!/usr/bin/env bash
# Install the test-only JS peers (tests/js: the official TypeScript SDK, server-everything,
# server-filesystem, the MCP Inspector, oidc-provider for the OAuth tests, and the Node 22
# they run on) exactly as pinned in tests/js/package-lock.json, with `npm ci`.
#
# Idempotent and quick: after a successful install it writes a stamp (hash of package.json,
# package-lock.json and the npm/node versions) into tests/js/node_modules; when the stamp
# matches, nothing is done. Transient npm failures are retried.
#
# Usage: scripts/install_js_peers.sh [--force]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
JS="$ROOT/tests/js"
STAMP="$JS/node_modules/.mcpkit-install-stamp"

log() { echo "[js-peers] $*" >&2; }

command -v npm >/dev/null || { log "npm not found on PATH (install Node.js >= 18 with npm)"; exit 2; }

want="$(cat "$JS/package.json" "$JS/package-lock.json" | sha256sum | cut -c1-16) node=$(node --version) npm=$(npm --version 2>/dev/null)"
if [ "${1:-}" != "--force" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
  log "up to date ($JS/node_modules)"
  exit 0
fi

t0=$(date +%s)
NPM_LOG="$(mktemp -t mcpkit-npm-ci-XXXXXX.log)"
delay=5
for attempt in 1 2 3 4; do
  if (cd "$JS" && npm ci --no-audit --no-fund --ignore-scripts \
        --fetch-retries=4 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=30000 \
        </dev/null >"$NPM_LOG" 2>&1); then
    echo "$want" >"$STAMP"
    rm -f "$NPM_LOG"
    log "installed in $(($(date +%s) - t0))s ($JS/node_modules)"
    exit 0
  fi
  log "npm ci failed (attempt $attempt/4); last lines of its log:"
  tail -n 15 "$NPM_LOG" >&2 || true
  [ "$attempt" = 4 ] && break
  log "retrying in ${delay}s"
  sleep "$delay"
  delay=$((delay * 2))
done
log "giving up: npm ci failed 4 times (full log: $NPM_LOG)"
exit 1
