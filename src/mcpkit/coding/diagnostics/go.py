"""The Go checker: `go vet` (the package of the file asked about, or every package, of each
module with a go.mod; a lone file outside any module is vetted by itself) and `gofmt -l -e`."""

from __future__ import annotations

from pathlib import Path

from mcpkit.coding.diagnostics import run
from mcpkit.coding.diagnostics.plan import GO, Plan, projects
from mcpkit.coding.diagnostics.report import FILE_LINE_COL, Report, plural


def vet_runs(go: str, plan: Plan, report: Report, files: list[Path]
             ) -> list[tuple[list[str], Path]]:
    """The `go vet` commands and the directory each runs in."""
    modules, loose = projects(plan, report.notes, files, "go.mod", "go vet")
    runs: list[tuple[list[str], Path]] = []
    for module in modules:
        cwd = module.parent
        if plan.single is not None:
            package = plan.single.parent.relative_to(cwd).as_posix()
            runs.append(([go, "vet", "./" + package if package != "." else "."], cwd))
        else:
            runs.append(([go, "vet", "./..."], cwd))
    if loose and plan.single is not None:
        runs.append(([go, "vet", plan.rel(plan.single)], plan.root))
    elif loose:
        report.notes.append(f"go vet skipped {plural(len(loose), 'file')} outside any Go "
                            "module (no go.mod above them).")
    return runs


async def check_vet(plan: Plan, report: Report, files: list[Path]) -> None:
    go = report.tool("go", GO)
    if go is None:
        return
    for args, cwd in vet_runs(go, plan, report, files):
        tool_run = await run.run_tool(args, cwd)
        report.ran_tool("go vet", GO, tool_run)
        count = 0
        for line in tool_run.stderr.splitlines():
            typecheck = line.startswith("vet: ")
            match = FILE_LINE_COL.match(line.removeprefix("vet: "))
            if match is None or not match["path"].endswith(".go"):
                continue
            count += 1
            report.add(match["path"], cwd, int(match["line"]), int(match["col"] or 0),
                       "error" if typecheck else "warning", match["rest"], "go vet")
        if tool_run.code not in (0, 1, None) or (tool_run.code and not count):
            report.failed("go vet", tool_run)


async def check_gofmt(plan: Plan, report: Report, files: list[Path]) -> None:
    gofmt = report.tool("gofmt", GO)
    if gofmt is None:
        return
    for tool_run in await run.run_batched([gofmt, "-l", "-e"], [plan.rel(f) for f in files],
                                          plan.root):
        report.ran_tool("gofmt", GO, tool_run)
        for line in tool_run.stdout.splitlines():
            if line.strip():
                report.add(line.strip(), plan.root, 1, 0, "warning",
                           "not gofmt-formatted (gofmt -w fixes it)", "gofmt")
        for line in tool_run.stderr.splitlines():
            match = FILE_LINE_COL.match(line)
            if match is not None:
                report.add(match["path"], plan.root, int(match["line"]),
                           int(match["col"] or 0), "error", match["rest"], "gofmt")


async def check_go(plan: Plan, report: Report) -> None:
    files = plan.files.get(GO, [])
    await check_vet(plan, report, files)
    await check_gofmt(plan, report, files)
