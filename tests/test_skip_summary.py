"""The closing skip summary (tests/skip_summary.py) that scripts/test.sh repeats at its end."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_skips_are_grouped_by_reason_with_counts(tmp_path: Path) -> None:
    (tmp_path / "test_some.py").write_text(textwrap.dedent("""
        import pytest

        @pytest.mark.parametrize("n", [1, 2])
        def test_needs_postgres(n):
            pytest.skip("no initdb: run scripts/install_services.sh")

        def test_needs_node():
            pytest.skip("tests/js/node_modules is missing: run scripts/install_js_peers.sh")

        @pytest.mark.xfail(reason="known")
        def test_known():
            assert False

        def test_runs():
            assert True
    """), "utf-8")
    summary = tmp_path / "skips.txt"
    env = {**os.environ, "MCPKIT_SKIP_SUMMARY": str(summary),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.skip_summary", "-p",
         "no:cacheprovider", "test_some.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert summary.read_text("utf-8").splitlines() == [
        "    2  no initdb: run scripts/install_services.sh",
        "    1  tests/js/node_modules is missing: run scripts/install_js_peers.sh",
    ]  # the xfail is not a skip
    assert "skipped, by reason (each says what brings it in)" in done.stdout
