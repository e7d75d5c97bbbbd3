"""A closing summary of what was skipped, grouped by reason, for a run on a fresh machine.

pytest's `-ra` lists skips per location, in the middle of a long output. This prints, last,
one line per distinct reason with how many tests it skipped; the reasons themselves say the
one command that brings the missing piece in (scripts/install_services.sh, install_js_peers.sh,
the spec checkout). With $MCPKIT_SKIP_SUMMARY set to a path, the same lines are written there,
so scripts/test.sh can repeat them after all its steps (appended: it runs pytest twice).
Hooked in by tests/conftest.py.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

SUMMARY_ENV = "MCPKIT_SKIP_SUMMARY"


def skip_reason(report: Any) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(reason).removeprefix("Skipped: ")


def grouped(reports: list[Any]) -> list[str]:
    counts = Counter(skip_reason(r) for r in reports if r.skipped and not hasattr(r, "wasxfail"))
    return [f"{n:5d}  {reason}" for reason, n in sorted(counts.items(), key=lambda kv: -kv[1])]


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # an xdist worker: its controller reports every skip
        return
    lines = grouped(terminalreporter.stats.get("skipped", []))
    target = os.environ.get(SUMMARY_ENV)
    if target:
        with Path(target).open("a", encoding="utf-8") as summary:  # test.sh runs pytest twice
            summary.write("".join(f"{line}\n" for line in lines))
    if lines:
        terminalreporter.section("skipped, by reason (each says what brings it in)", sep="-")
        for line in lines:
            terminalreporter.line(line)
