"""The JavaScript/TypeScript checker: `tsc --noEmit` (the nearest tsconfig.json project, else
the .ts files themselves) and `eslint -f json`, each from the workspace's node_modules/.bin
or PATH."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from mcpkit.coding.diagnostics import run
from mcpkit.coding.diagnostics.plan import JSTS, TS_EXTENSIONS, Plan, projects
from mcpkit.coding.diagnostics.report import Report

TSC_LINE = re.compile(r"^(?P<path>.+?)\((?P<line>\d+),(?P<col>\d+)\): (?P<sev>error|warning|"
                      r"message) (?P<code>TS\d+): (?P<msg>.*)$")


class _EslintMessage(msgspec.Struct, rename="camel"):
    message: str
    rule_id: str | None = None
    severity: int = 2
    line: int = 1
    column: int = 0


class _EslintFile(msgspec.Struct, rename="camel"):
    file_path: str
    messages: list[_EslintMessage] = []


_eslint_decoder = msgspec.json.Decoder(list[_EslintFile])


def tsc_runs(tsc: str, plan: Plan, report: Report, files: list[Path]) -> list[list[str]]:
    """One `tsc` command per tsconfig.json project, and one for the TypeScript files outside
    any (as many as fit one command line)."""
    ts_files = [f for f in files if f.suffix.lower() in TS_EXTENSIONS]
    configs, loose = projects(plan, report.notes, ts_files, "tsconfig.json", "tsc")
    runs = [[tsc, "--noEmit", "--pretty", "false", "-p", plan.rel(config)]
            for config in configs]
    if loose:
        chunks = run.batches([plan.rel(f) for f in loose])
        if len(chunks) > 1:
            report.notes.append(f"tsc checked {len(chunks[0])} of the {len(loose)} "
                                "TypeScript files outside any tsconfig.json project.")
        runs.append([tsc, "--noEmit", "--pretty", "false", *chunks[0]])
    return runs


async def check_tsc(plan: Plan, report: Report, files: list[Path]) -> None:
    tsc = report.tool("tsc", JSTS)
    if tsc is None:
        return
    for args in tsc_runs(tsc, plan, report, files):
        tool_run = await run.run_tool(args, plan.root)
        report.ran_tool("tsc", JSTS, tool_run)
        count = 0
        for line in tool_run.stdout.splitlines():
            match = TSC_LINE.match(line)
            if match is not None:
                count += 1
                severity = {"message": "info"}.get(match["sev"], match["sev"])
                report.add(match["path"], plan.root, int(match["line"]), int(match["col"]),
                           severity, f"{match['code']} {match['msg']}", "tsc")
        if tool_run.code not in (0, 1, 2, None) or (tool_run.code and not count):
            report.failed("tsc", tool_run)


async def check_eslint(plan: Plan, report: Report, files: list[Path]) -> None:
    eslint = report.tool("eslint", JSTS)
    if eslint is None:
        return
    results: list[_EslintFile] = []
    for tool_run in await run.run_batched([eslint, "-f", "json", "--no-color", "--"],
                                          [plan.rel(f) for f in files], plan.root):
        report.ran_tool("eslint", JSTS, tool_run)
        try:
            found = _eslint_decoder.decode(tool_run.stdout) if tool_run.stdout.strip() else []
        except msgspec.DecodeError:
            found = []
        if tool_run.code not in (0, 1, None) or (tool_run.code == 1 and not found):
            report.failed("eslint", tool_run)
        results.extend(found)
    for result in results:
        for message in result.messages:
            if message.rule_id is None and message.message.startswith("File ignored"):
                continue
            text = f"{message.rule_id} {message.message}" if message.rule_id else message.message
            report.add(result.file_path, plan.root, message.line, message.column,
                       "error" if message.severity >= 2 else "warning", text, "eslint")


async def check_jsts(plan: Plan, report: Report) -> None:
    files = plan.files.get(JSTS, [])
    await check_tsc(plan, report, files)
    await check_eslint(plan, report, files)
