#!/usr/bin/env bash
# mcpkit's test command (what CI runs, and what the README tells you to run):
#
#   python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[dev]' && scripts/test.sh
#
# Steps, in order (all of them run; the script fails if any failed):
#   js-peers     scripts/install_js_peers.sh: npm ci of tests/js (no-op when up to date)
#   services     scripts/install_services.sh: PostgreSQL and redis-server binaries for the hub's
#                tests (as root; a no-op when present). Not root and missing: a note, and
#                those tests skip - the closing lines say so and how to bring them in
#   keyring      scripts/install_keyring.sh: gnome-keyring and dbus-daemon for the OAuth token
#                store's keyring tests (same rules as services)
#   ruff         ruff check src tests bench scripts
#   mypy         mypy src
#   pytest       pytest -q -n 2 -m "not serial" [extra args], then pytest -q -m serial [extra
#                args] (exit 5 "no tests collected" of the first run is a failure)
#   conformance  scripts/conformance/run_server_legs.py: the official conformance harness's
#                server legs 2025-11-25, 2026-07-28 and all against the fixture server
#   conformance-client
#                scripts/conformance/run_client_legs.py: the harness's client legs (same three)
#                against the fixture client, python -m mcpkit.testing.conformance_client
#   conformance-as
#                scripts/conformance/hub_authorization.py: the harness's authorization-server
#                scenarios against the hub's issuer (metadata, the code grant)
#
# Assumes the active Python has the project installed with its dev extras: it uses $PYTHON
# if set, else `python` from PATH. Extra arguments are passed to pytest.
# At the end, after the step summary, every test that pytest skipped is listed by reason, each
# reason naming the one command that brings in what it lacked (tests/skip_summary.py).
# Env: MCPKIT_SKIP_CONFORMANCE=1 skips the conformance legs, server and client (local use only:
#      refused when CI is set), MCPKIT_FAIL_FAST=1 stops at the first failing step.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python}"

if ! command -v "$PY" >/dev/null 2>&1; then
  echo "test.sh: no '$PY' on PATH: activate the project's venv (or set PYTHON)" >&2
  exit 2
fi
if ! "$PY" -c 'import mcpkit, pytest, mypy, ruff' 2>/dev/null; then
  echo "test.sh: $("$PY" -c 'import sys; print(sys.executable)') lacks mcpkit or its dev tools;" \
       "run: pip install -e '.[dev]'" >&2
  exit 2
fi

declare -a NAMES=() RESULTS=() TIMES=()
FAILED=0

run_step() { # run_step NAME command...
  local name="$1"; shift
  local t0 t1 rc
  echo
  echo "=== [$name] ${STEP_LABEL:-$*}"
  t0=$(date +%s.%N)
  "$@"
  rc=$?
  t1=$(date +%s.%N)
  local dt
  dt=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')
  NAMES+=("$name"); TIMES+=("$dt")
  if [ "$rc" -eq 0 ]; then
    RESULTS+=("ok")
    echo "=== [$name] ok (${dt}s)"
  else
    RESULTS+=("FAILED (exit $rc)")
    FAILED=1
    echo "=== [$name] FAILED with exit code $rc (${dt}s)"
    if [ -n "${MCPKIT_FAIL_FAST:-}" ]; then summary; skipped_report; exit 1; fi
  fi
  return 0
}

# Two runs: every test not marked `serial` on $MCPKIT_TEST_WORKERS processes (pytest-xdist,
# default 2; a test file stays on one worker, so module fixtures and order within a file hold),
# then the `serial` ones alone (schemathesis' generated cases are not collected in a worker).
pytest_step() {
  "$PY" -m pytest -q -n "${MCPKIT_TEST_WORKERS:-2}" --dist loadfile -m "not serial" "$@"
  local rc=$?
  if [ "$rc" -eq 5 ]; then
    echo "test.sh: pytest collected NO tests (exit 5) - that is a failure here, not a pass:" \
         "check testpaths in pyproject.toml and the test file names" >&2
  fi
  "$PY" -m pytest -q -m serial "$@"
  local serial_rc=$?
  [ "$serial_rc" -eq 5 ] && serial_rc=0  # extra arguments may select no serial test
  [ "$rc" -ne 0 ] && return "$rc"
  return "$serial_rc"
}

summary() {
  echo
  echo "=== test.sh summary"
  local i
  for i in "${!NAMES[@]}"; do
    printf '  %-18s %-18s %8ss\n' "${NAMES[$i]}" "${RESULTS[$i]}" "${TIMES[$i]}"
  done
}

services_step() {
  if [ "$EUID" -eq 0 ]; then
    bash scripts/install_services.sh </dev/null
    return
  fi
  if ! bash scripts/install_services.sh </dev/null; then
    echo "test.sh: PostgreSQL/redis-server are missing and this is not root, so the hub's" \
         "tests against them will skip; bring them in with: sudo scripts/install_services.sh" >&2
  fi
  return 0
}

keyring_step() {
  if [ "$EUID" -eq 0 ]; then
    bash scripts/install_keyring.sh </dev/null
    return
  fi
  if ! bash scripts/install_keyring.sh </dev/null; then
    echo "test.sh: gnome-keyring/dbus-daemon are missing and this is not root, so the token" \
         "store's keyring tests will skip; bring them in with: sudo scripts/install_keyring.sh" >&2
  fi
  return 0
}

skipped_report() {
  if [ -s "$SKIPS" ]; then
    echo
    echo "=== test.sh: $(awk '{n += $1} END {print n}' "$SKIPS") tests were SKIPPED on this" \
         "machine, by reason (each says what brings it in):"
    cat "$SKIPS"
  fi
}

SKIPS="$(mktemp -t mcpkit-skips-XXXXXX)"
trap 'rm -f "$SKIPS"' EXIT
export MCPKIT_SKIP_SUMMARY="$SKIPS"

run_step js-peers bash scripts/install_js_peers.sh
run_step services services_step
run_step keyring keyring_step
run_step ruff "$PY" -m ruff check src tests bench scripts
run_step mypy "$PY" -m mypy src
STEP_LABEL="$PY -m pytest -q -n ${MCPKIT_TEST_WORKERS:-2} -m \"not serial\" $*, then -m serial" run_step pytest pytest_step "$@"
if [ -n "${MCPKIT_SKIP_CONFORMANCE:-}" ]; then
  if [ -n "${CI:-}" ]; then
    echo "test.sh: MCPKIT_SKIP_CONFORMANCE is not allowed in CI" >&2
    run_step conformance false
  else
    echo
    echo "=== [conformance] SKIPPED (MCPKIT_SKIP_CONFORMANCE is set)"
    echo "=== [conformance-client] SKIPPED (MCPKIT_SKIP_CONFORMANCE is set)"
    echo "=== [conformance-as] SKIPPED (MCPKIT_SKIP_CONFORMANCE is set)"
  fi
else
  run_step conformance "$PY" scripts/conformance/run_server_legs.py
  run_step conformance-client "$PY" scripts/conformance/run_client_legs.py
  run_step conformance-as "$PY" scripts/conformance/hub_authorization.py
fi

summary
skipped_report
if [ "$FAILED" -ne 0 ]; then
  echo "test.sh: FAILED"
  exit 1
fi
echo "test.sh: all steps passed"
