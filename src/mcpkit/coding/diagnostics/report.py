"""What the checkers found, in one form: `Diagnostic`s (paths shown relative to the
workspace), which tools ran, which are missing, and notes for the header."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import msgspec

from mcpkit.coding.diagnostics import run as runner  # its limits, read when used
from mcpkit.coding.diagnostics.plan import Plan
from mcpkit.coding.diagnostics.run import ToolRun

MAX_MESSAGE = 500
"""Characters of one message kept (the rest is cut with " …")."""


class Diagnostic(msgspec.Struct, frozen=True, order=True):
    path: str
    line: int
    column: int
    severity: str
    message: str
    source: str


def one_line(text: str) -> str:
    text = " ".join(text.split())
    if len(text) > MAX_MESSAGE:
        text = text[:MAX_MESSAGE] + " …"
    return text


FILE_LINE_COL = re.compile(r"^(?P<path>[^:\n]+?):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
                           r"(?P<rest>.*)$")


@dataclass
class Report:
    plan: Plan
    diagnostics: list[Diagnostic] = field(default_factory=list)
    ran: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    covered: set[str] = field(default_factory=set)
    installed: set[str] = field(default_factory=set)
    """Languages with at least one of their tools installed."""
    notes: list[str] = field(default_factory=list)
    elsewhere: int = 0
    """Findings of project-wide tools in other files than the one asked about."""

    def shown_path(self, raw: str, base: Path) -> str:
        path = Path(os.path.normpath(raw if os.path.isabs(raw) else base / raw))
        return self.plan.workspace.display(path)

    def add(self, raw_path: str, base: Path, line: int, column: int, severity: str,
            message: str, source: str) -> None:
        path = self.shown_path(raw_path, base)
        if self.plan.single is not None and path != self.plan.workspace.display(
                self.plan.single):
            self.elsewhere += 1
            return
        self.diagnostics.append(Diagnostic(path, max(line, 0), max(column, 0), severity,
                                           one_line(message), source))

    def tool(self, name: str, language: str | None = None) -> str | None:
        """The executable of tool `name` (`run.find_tool`); a missing one is listed as
        missing, a found one marks `language` (when given) as installed."""
        found = runner.find_tool(name, self.plan.workspace)
        if found is None:
            self.missing.append(name)
        elif language is not None:
            self.installed.add(language)
        return found

    def ran_tool(self, name: str, language: str, run: ToolRun | None = None) -> None:
        if name not in self.ran:
            self.ran.append(name)
        self.covered.add(language)
        self.installed.add(language)
        if run is not None and run.timed_out:
            self.notes.append(f"{name} stopped after {runner.TOOL_TIMEOUT_S:g} s; its results are "
                              "incomplete.")
        if run is not None and run.cut:
            self.notes.append(f"{name} printed more than {runner.MAX_OUTPUT >> 20} MB; the "
                              "rest was dropped.")

    def failed(self, name: str, run: ToolRun) -> None:
        if run.timed_out:
            return
        lines = [line.strip() for line in (run.stderr or run.stdout).splitlines()
                 if line.strip()]
        why = lines[-1] if lines else "no output"
        self.notes.append(f"{name} failed (exit {run.code}): {one_line(why)[:300]}")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
