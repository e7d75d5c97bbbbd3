"""Smoke test of bench/client_bench.py: a tiny run of every client over both transports.

Checks that the benchmark runs end to end and its JSON parses, and that each client made
calls without errors; no timing is asserted (the machine may be busy).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "client_bench.py"

pytestmark = [pytest.mark.interop, pytest.mark.timeout(240)]


def test_client_bench_tiny_run() -> None:
    argv = [sys.executable, str(BENCH), "--duration", "0.3", "--warmup", "0.1", "--repeat", "1",
            "--connects", "2", "--in-flight", "2", "--json", "--quiet"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=230,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    results = json.loads(proc.stdout)

    clients = {"mcpkit", "mcpkit-legacy", "official", "official-auto"}
    cells = {(c["client"], c["transport"]): c for c in results["cells"]}
    assert set(cells) == {(c, t) for c in clients for t in ("stdio", "http")}
    for (client, transport), cell in cells.items():
        assert not cell["failed"], (client, transport, cell["failed"])
        assert cell["calls"] > 0, (client, transport)
        assert cell["errors"] == 0, (client, transport)
        assert cell["calls_per_s"] > 0

    connects = {(c["client"], c["transport"]): c for c in results["connects"]}
    assert set(connects) == set(cells)
    for key, conn in connects.items():
        assert not conn["failed"], (key, conn["failed"])
        assert len(conn["connect_ms_all"]) == 2 and conn["connect_ms"] > 0, key
