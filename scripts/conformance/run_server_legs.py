#!/usr/bin/env python3
"""Run the official MCP conformance harness's server legs against mcpkit's fixture server.

For each leg: start `PYTHON -m mcpkit.testing.conformance_server --port N` in its own process
group, wait until http://localhost:N/mcp answers (any HTTP status; at most --startup-timeout
seconds, failing with the server's log if it exits), run

    harness.sh server --url http://localhost:N/mcp <leg args> \
        --expected-failures scripts/conformance/expected-failures/<leg>.yml -o out/conformance/<leg>

stop the server's process group (SIGTERM, SIGKILL after 5 s) and print a per-scenario summary.
Legs: 2025-11-25 (--suite all --spec-version 2025-11-25), 2026-07-28 (--suite all
--spec-version 2026-07-28), all (bare --suite all: adds the pending/extension scenarios such as
tasks-*). Exits 1 if any leg fails (unexpected failure, stale expected-failure entry, server
that does not start or dies, harness error or timeout), 2 on bad usage.

Stdlib only. Results: out/conformance/<leg>/ (harness results, harness.log, server.log).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import common
from common import LEGS, LegResult, log

MODULE = "mcpkit.testing.conformance_server"


def run_leg(leg: str, port: int, a: argparse.Namespace) -> LegResult:
    t0 = time.monotonic()
    ef, expected, result = common.prepare_leg(leg, "server", a.out, a.expected_dir)
    harness_log = result.out_dir / "harness.log"
    if result.error:
        result.seconds = time.monotonic() - t0
        return result
    url = f"http://localhost:{port}{a.path}"
    log(f"\n== server leg {leg}: {url} -> {result.out_dir}")
    if common.port_in_use(port):
        result.error = f"port {port} is already in use: refusing to test a stale server"
        result.seconds = time.monotonic() - t0
        return result
    argv = common.server_argv(a.server_cmd, a.python, MODULE, port)
    server = common.Server(argv, result.out_dir / "server.log")
    try:
        try:
            status = server.wait_ready(url, a.startup_timeout)
        except common.ServerError as exc:
            result.error = str(exc)
            return result
        waited = time.monotonic() - t0
        log(f"  server ready (HTTP {status} on GET after {waited:.1f}s); running the harness")
        args = [
            "server",
            "--url",
            url,
            *LEGS[leg],
            "--expected-failures",
            str(ef),
            "-o",
            str(result.out_dir),
        ]
        if a.timeout:
            args += ["--timeout", str(a.timeout)]
        rc, timed_out = common.run_harness(args, harness_log, a.leg_timeout, a.verbose)
        result.harness_rc = rc
        if timed_out:
            result.error = f"the leg exceeded --leg-timeout {a.leg_timeout:.0f}s; harness stopped"
        elif not server.alive():
            result.error = (
                f"the server died during the run (exit code {server.proc.returncode}); "
                f"log {server.log_path}:\n" + common.indent(common.tail(server.log_path, 40))
            )
    finally:
        server.stop()
        common.finish_leg(result, expected, harness_log)
        result.seconds = time.monotonic() - t0
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Run the MCP conformance server legs against mcpkit's fixture server.",
        epilog="Example: scripts/conformance/run_server_legs.py --leg 2026-07-28 --details",
    )
    ap.add_argument(
        "--leg",
        action="append",
        choices=list(LEGS),
        dest="legs",
        help="leg to run (repeatable; default: all three)",
    )
    ap.add_argument(
        "--port",
        type=int,
        default=None,
        help="base port: leg i uses PORT+i (default: free ports picked per leg)",
    )
    ap.add_argument(
        "--timeout",
        type=int,
        default=None,
        metavar="MS",
        help="per-scenario harness timeout in ms (harness default: 30000)",
    )
    ap.add_argument(
        "--leg-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="wall-clock limit per leg in seconds (default 600)",
    )
    ap.add_argument(
        "--startup-timeout",
        type=float,
        default=30.0,
        metavar="S",
        help="how long to wait for the server to answer HTTP (default 30)",
    )
    ap.add_argument(
        "--python",
        default=None,
        help="Python that runs the fixture (default: this one, sys.executable)",
    )
    ap.add_argument(
        "--server-cmd",
        default=None,
        metavar="TEMPLATE",
        help="run another server instead of the fixture; {port} and {python} are "
        "substituted, e.g. 'node peer.js --port {port}'",
    )
    ap.add_argument("--path", default="/mcp", help="MCP endpoint path (default /mcp)")
    ap.add_argument(
        "--out",
        type=Path,
        default=common.DEFAULT_OUT,
        help="results root (default out/conformance); leg results in OUT/<leg>/",
    )
    ap.add_argument(
        "--expected-dir",
        type=Path,
        default=common.EXPECTED_DIR,
        metavar="DIR",
        help="where the <leg>.yml expected-failures files are "
        "(default scripts/conformance/expected-failures)",
    )
    ap.add_argument(
        "--details",
        action="store_true",
        help="print every failing/warning check's message, also for expected failures",
    )
    ap.add_argument("--verbose", action="store_true", help="echo the harness's output live")
    a = ap.parse_args(argv)
    a.python = common.default_python(a.python)
    a.out = a.out.resolve()
    a.expected_dir = a.expected_dir.resolve()
    legs = a.legs or list(LEGS)
    legs = list(dict.fromkeys(legs))

    common.install_signal_handlers()
    try:
        common.ensure_harness()
        ports = common.pick_ports(len(legs), a.port)
        results = []
        for leg, port in zip(legs, ports, strict=True):
            r = run_leg(leg, port, a)
            common.print_leg(r, r.out_dir / "harness.log", a.details)
            results.append(r)
    except common.Interrupted as exc:
        log(f"conformance: interrupted ({exc}); servers stopped")
        return 130
    return common.print_overall(results, "server", a.expected_dir)


if __name__ == "__main__":
    sys.exit(main())
