"""The tool's answer: a header (what was checked, which tools ran, which are missing, what
was cut), the counts, then at most `MAX_SHOWN` diagnostics as
`path:line:col severity message [source]`, sorted; the same as structured content."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from mcpkit.coding.diagnostics import plan as planning
from mcpkit.coding.diagnostics.plan import LANGUAGE_TOOLS, LANGUAGES, Plan
from mcpkit.coding.diagnostics.report import Diagnostic, Report, plural
from mcpkit.server.results import text_block
from mcpkit.server.tools import ToolResult

MAX_SHOWN = 500
"""Diagnostics listed; the rest are counted."""


@dataclass(slots=True)
class _Summary:
    """What the header says, gathered from the plan and the report."""

    languages: list[str]
    without: list[str]
    """Languages present with none of their tools installed."""
    ran: list[str]
    missing: list[str]
    target: str
    files: int


def summarize(plan: Plan, report: Report) -> _Summary:
    languages = [lang for lang in LANGUAGES if plan.files.get(lang)]
    without = [lang for lang in languages
               if lang not in report.covered and lang not in report.installed]
    order = {"python-compile": 1}
    ran = sorted(report.ran, key=lambda n: (order.get(n, 0), report.ran.index(n)))
    target = (plan.workspace.display(plan.single) if plan.single is not None
              else "the workspace")
    return _Summary(languages, without, ran, list(dict.fromkeys(report.missing)), target,
                    plan.count())


def header(plan: Plan, report: Report, summary: _Summary) -> list[str]:
    lines: list[str] = []
    files = summary.files
    if plan.single is not None and not summary.languages:
        lines.append(f"No diagnostics tools for {summary.target} (its language is not one "
                     f"of {', '.join(LANGUAGES)}).")
    elif not summary.languages:
        lines.append("No source files to check in the workspace.")
    else:
        ran = summary.ran
        lines.append(f"Checked {summary.target}" + ("" if plan.single else
                                                    f" ({plural(files, 'file')})")
                     + f"; ran: {', '.join(ran) if ran else 'nothing'}.")
    if summary.missing:
        lines.append(f"Not installed (skipped): {', '.join(summary.missing)}.")
    if summary.without:
        lines.append("No tool installed for: " + "; ".join(
            f"{lang} ({LANGUAGE_TOOLS[lang]})" for lang in summary.without) + ".")
    if plan.files_cut:
        lines.append(f"Only the first {plural(files, 'source file')} were checked; give "
                     "file_path to check others.")
    if plan.walk_timed_out:
        lines.append(f"The walk stopped after {planning.WALK_TIMEOUT_S:g} s; not every file "
                     "was checked.")
    lines.extend(report.notes)
    if report.elsewhere:
        lines.append(f"({plural(report.elsewhere, 'finding')} in other files of the project "
                     "not shown; run without file_path to see them.)")
    return lines


def counts(diagnostics: list[Diagnostic]) -> str:
    total = len(diagnostics)
    if not total:
        return "No diagnostics."
    errors = sum(1 for d in diagnostics if d.severity == "error")
    warns = sum(1 for d in diagnostics if d.severity == "warning")
    infos = total - errors - warns
    parts = [plural(errors, "error"), plural(warns, "warning")]
    if infos:
        parts.append(f"{infos} info")
    return f"{plural(total, 'diagnostic')}: {', '.join(parts)}."


def render(plan: Plan, report: Report) -> ToolResult:
    diagnostics = sorted(set(report.diagnostics))
    summary = summarize(plan, report)
    lines = header(plan, report, summary)
    total = len(diagnostics)
    if summary.languages:
        lines.append(counts(diagnostics))
    shown = diagnostics[:MAX_SHOWN]
    for d in shown:
        lines.append(f"{d.path}:{d.line}:{d.column} {d.severity} {d.message} [{d.source}]")
    if total > len(shown):
        lines.append(f"({total - len(shown)} more not shown; give file_path to narrow)")
    structured: dict[str, Any] = {
        "diagnostics": [msgspec.structs.asdict(d) for d in shown],
        "tools_run": summary.ran,
        "tools_missing": summary.missing,
        "languages_without_tools": summary.without,
        "total": total,
        "files_checked": summary.files,
        "truncated": total > len(shown) or plan.files_cut or plan.walk_timed_out,
    }
    return ToolResult(content=[text_block("\n".join(lines))], structured_content=structured)
