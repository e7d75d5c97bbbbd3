"""Smoke test of bench/hub_auth_bench.py: a tiny run (echo server and hub processes, a real
OAuth login to the hub) ends cleanly with every target measured and its JSON parses; no
timing is asserted (the machine may be busy)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench" / "hub_auth_bench.py"

pytestmark = pytest.mark.timeout(120)


def test_hub_auth_bench_tiny_run() -> None:
    argv = [sys.executable, str(BENCH), "--calls", "6", "--block", "2", "--warmup", "1",
            "--json"]
    proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=110,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["calls_per_target"] == 6
    assert {"direct", "api-token", "oauth"} <= set(result["targets"])
    for name, row in result["targets"].items():
        assert row["median_ms"] > 0 and row["p95_ms"] >= row["median_ms"], name
    assert set(result["oauth_minus_api_token"]) == {"median_ms", "p95_ms",
                                                    "hub_cpu_us_per_call"}
    # the DPoP row is there exactly when no note says why it is not
    dpop_skipped = any(note.startswith("oauth-dpop skipped") for note in result["notes"])
    assert ("oauth-dpop" in result["targets"]) != dpop_skipped
