"""The shell checker (.sh, .bash, or a shell shebang): `bash -n` per file, `PARALLEL_FILES`
at once, and `shellcheck -f gcc`."""

from __future__ import annotations

import re
from pathlib import Path

import anyio

from mcpkit.coding.diagnostics import run
from mcpkit.coding.diagnostics.plan import SHELL, Plan
from mcpkit.coding.diagnostics.report import FILE_LINE_COL, Report
from mcpkit.coding.diagnostics.run import ToolRun

PARALLEL_FILES = 8
"""`bash -n` runs at once (it checks one file per process)."""

BASH_LINE = re.compile(r"^(?P<path>.+?): line (?P<line>\d+): (?P<msg>.*)$")


def add_bash_errors(plan: Plan, report: Report, stderr: str) -> None:
    for line in stderr.splitlines():
        match = BASH_LINE.match(line)
        if match is None:
            continue
        message = match["msg"]
        if message.startswith("`") and message.endswith("'"):
            continue  # bash echoing the offending line after the message
        report.add(match["path"], plan.root, int(match["line"]), 0, "error", message,
                   "bash -n")


async def check_bash(plan: Plan, report: Report, files: list[Path]) -> None:
    bash = report.tool("bash")
    if bash is None:
        return
    limiter = anyio.CapacityLimiter(PARALLEL_FILES)
    runs: list[ToolRun] = []

    async def one(path: Path) -> None:
        async with limiter:
            tool_run = await run.run_tool([bash, "-n", "--", plan.rel(path)], plan.root)
        runs.append(tool_run)
        add_bash_errors(plan, report, tool_run.stderr)

    async with anyio.create_task_group() as tg:
        for path in files:
            tg.start_soon(one, path)
    report.ran_tool("bash -n", SHELL)
    if any(tool_run.timed_out for tool_run in runs):
        report.notes.append(f"bash -n stopped after {run.TOOL_TIMEOUT_S:g} s on some files.")


async def check_shellcheck(plan: Plan, report: Report, files: list[Path]) -> None:
    shellcheck = report.tool("shellcheck")
    if shellcheck is None:
        return
    if not files:
        return
    for tool_run in await run.run_batched([shellcheck, "-f", "gcc", "--"],
                                          [plan.rel(f) for f in files], plan.root):
        report.ran_tool("shellcheck", SHELL, tool_run)
        count = 0
        for line in tool_run.stdout.splitlines():
            match = FILE_LINE_COL.match(line)
            if match is None:
                continue
            severity, _, message = match["rest"].partition(": ")
            if severity not in ("error", "warning", "note"):
                continue
            count += 1
            report.add(match["path"], plan.root, int(match["line"]), int(match["col"] or 0),
                       "info" if severity == "note" else severity, message, "shellcheck")
        if tool_run.code not in (0, 1, None) or (tool_run.code and not count):
            report.failed("shellcheck", tool_run)


async def check_shell(plan: Plan, report: Report) -> None:
    files = plan.files.get(SHELL, [])
    await check_bash(plan, report, files)
    await check_shellcheck(plan, report, files)
