"""One checker per language, run side by side (`PARALLEL_TOOLS` at once) into one Report."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from mcpkit.coding.diagnostics.go import check_go
from mcpkit.coding.diagnostics.plan import GO, JSTS, PYTHON, RUST, SHELL, Plan
from mcpkit.coding.diagnostics.python import check_python
from mcpkit.coding.diagnostics.report import Report
from mcpkit.coding.diagnostics.rust import check_rust
from mcpkit.coding.diagnostics.shell import check_shell
from mcpkit.coding.diagnostics.typescript import check_jsts

PARALLEL_TOOLS = 4
"""Languages checked at once."""

CHECKERS: dict[str, Callable[[Plan, Report], Awaitable[None]]] = {
    PYTHON: check_python, JSTS: check_jsts, GO: check_go, RUST: check_rust,
    SHELL: check_shell,
}


async def run_checks(plan: Plan) -> Report:
    report = Report(plan)
    limiter = anyio.CapacityLimiter(PARALLEL_TOOLS)

    async def one(language: str) -> None:
        async with limiter:
            await CHECKERS[language](plan, report)

    async with anyio.create_task_group() as tg:
        for language in CHECKERS:
            if plan.files.get(language):
                tg.start_soon(one, language)
    return report
