"""The Python checker: an in-process `compile()` of each file (syntax errors and
compile-time warnings exactly as this Python sees them; nothing is written), then `ruff check`
(JSON; on PATH or next to the Python running the server), else `pyflakes`. `ruff` runs with
`--no-fix --no-cache`: checking never changes the workspace. A syntax error both compile()
and a linter report is shown once, as compile() says it."""

from __future__ import annotations

import threading
import warnings
from pathlib import Path

import msgspec

from mcpkit.coding.deadline import Deadline, in_thread
from mcpkit.coding.diagnostics import run
from mcpkit.coding.diagnostics.plan import PYTHON, Plan
from mcpkit.coding.diagnostics.report import FILE_LINE_COL, Diagnostic, Report, one_line

MAX_COMPILE_BYTES = 10 * 1024 * 1024
"""Python files larger than this are not compiled in-process."""


_Finding = tuple[str, int, int, str, str, str, bool]
"""A linter finding: (path, line, column, severity, message, source, is a syntax error)."""


_compile_lock = threading.Lock()


def compile_one(path: Path, shown: str) -> list[Diagnostic]:
    try:
        if path.stat().st_size > MAX_COMPILE_BYTES:
            return []
        source = path.read_bytes()
    except OSError:
        return []
    found: list[Diagnostic] = []
    with _compile_lock, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("ignore")
        warnings.simplefilter("always", SyntaxWarning)
        warnings.simplefilter("always", DeprecationWarning)
        try:
            compile(source, shown, "exec", dont_inherit=True)
        except SyntaxError as exc:
            message = f"{type(exc).__name__}: {exc.msg}"
            found.append(Diagnostic(shown, exc.lineno or 1, exc.offset or 0, "error",
                                    one_line(message), "python"))
        except (ValueError, RecursionError, MemoryError) as exc:
            found.append(Diagnostic(shown, 1, 0, "error",
                                    one_line(f"{type(exc).__name__}: {exc}"), "python"))
    for warning in caught:
        if warning.filename == shown and issubclass(warning.category,
                                                    (SyntaxWarning, DeprecationWarning)):
            found.append(Diagnostic(shown, warning.lineno or 1, 0, "warning",
                                    one_line(f"{warning.category.__name__}: "
                                             f"{warning.message}"), "python"))
    return found


async def compile_python(plan: Plan, report: Report, files: list[Path]) -> list[Diagnostic]:
    deadline = Deadline(run.TOOL_TIMEOUT_S)
    display = plan.workspace.display

    def work() -> list[Diagnostic]:
        out: list[Diagnostic] = []
        for path in files:
            if deadline():
                break
            out.extend(compile_one(path, display(path)))
        return out

    found: list[Diagnostic] = await in_thread(work, deadline)
    report.ran_tool("python-compile", PYTHON)
    if deadline.timed_out:
        report.notes.append(f"python-compile stopped after {run.TOOL_TIMEOUT_S:g} s; not every "
                            "file was compiled.")
    return found


class _RuffLocation(msgspec.Struct):
    row: int = 1
    column: int = 0


class _RuffItem(msgspec.Struct):
    filename: str
    message: str
    code: str | None = None
    location: _RuffLocation | None = None


_ruff_decoder = msgspec.json.Decoder(list[_RuffItem])


async def ruff_findings(ruff: str, plan: Plan, report: Report, files: list[Path]
                        ) -> list[_Finding]:
    items: list[_RuffItem] = []
    for tool_run in await run.run_batched(
            [ruff, "check", "--output-format", "json", "--no-fix", "--no-cache",
             "--force-exclude", "--quiet", "--"], [plan.rel(f) for f in files], plan.root):
        report.ran_tool("ruff", PYTHON, tool_run)
        try:
            found = _ruff_decoder.decode(tool_run.stdout) if tool_run.stdout.strip() else []
            decoded = True
        except msgspec.DecodeError:
            found, decoded = [], False
        if not found and (not decoded or tool_run.code not in (0, 1, None)):
            report.failed("ruff", tool_run)
        items.extend(found)
    linted: list[_Finding] = []
    for item in items:
        loc = item.location or _RuffLocation()
        code = item.code or ""
        syntax = code in ("", "invalid-syntax") or code.startswith("E9")
        message = item.message if syntax else f"{code} {item.message}"
        linted.append((item.filename, loc.row, loc.column, "error" if syntax
                       else "warning", message, "ruff", syntax))
    return linted


async def pyflakes_findings(pyflakes: list[str], plan: Plan, report: Report,
                            files: list[Path]) -> list[_Finding]:
    linted: list[_Finding] = []
    for tool_run in await run.run_batched(pyflakes, [plan.rel(f) for f in files], plan.root):
        report.ran_tool("pyflakes", PYTHON, tool_run)
        count = len(linted)
        for stream, syntax in ((tool_run.stdout, False), (tool_run.stderr, True)):
            for line in stream.splitlines():
                match = FILE_LINE_COL.match(line)
                if match is None or not match["path"].strip():
                    continue
                linted.append((match["path"], int(match["line"]), int(match["col"] or 0),
                               "error" if syntax else "warning", match["rest"], "pyflakes",
                               syntax))
        if tool_run.code not in (0, 1, None) and len(linted) == count:
            report.failed("pyflakes", tool_run)
    return linted


async def lint(plan: Plan, report: Report, files: list[Path]) -> list[_Finding]:
    """ruff's findings, else pyflakes', else none (the missing tools named)."""
    ruff = run.find_tool("ruff", plan.workspace)
    if ruff is not None:
        return await ruff_findings(ruff, plan, report, files)
    report.missing.append("ruff")
    pyflakes = run.pyflakes_argv()
    if pyflakes is None:
        report.missing.append("pyflakes")
        return []
    return await pyflakes_findings(pyflakes, plan, report, files)


async def check_python(plan: Plan, report: Report) -> None:
    files = plan.files.get(PYTHON, [])
    compiled = await compile_python(plan, report, files)
    syntax_lines = {(d.path, d.line) for d in compiled if d.severity == "error"}
    report.diagnostics.extend(compiled)
    for path, row, column, severity, message, source, syntax in await lint(plan, report,
                                                                           files):
        # compile() already said where the syntax is wrong; keep the linters' other findings.
        if syntax and (report.shown_path(path, plan.root), row) in syntax_lines:
            continue
        report.add(path, plan.root, row, column, severity, message, source)
