"""The `grep` tool: file contents searched with a regex, answered as paths (newest first),
matching lines with context, or counts per file.

The search itself runs in a child process (`grep_engines.py`: ripgrep, else the Python
worker), killed at its time limit or on cancellation; this module checks the request and
renders what the engine found, capped by `limit` lines or files and `MAX_OUTPUT_CHARS`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from mcpkit.coding.env import CodingEnv
from mcpkit.coding.search import grep_engines as engines
from mcpkit.coding.search.common import (
    MAX_LIMIT,
    READ_ONLY,
    SearchError,
    clamp,
    error,
    root_of,
    text_result,
)
from mcpkit.coding.search.globmatch import PatternError, compile_glob
from mcpkit.coding.search.grep_engines import GrepFailed, GrepQuery
from mcpkit.coding.search.rg_json import FileHits, GrepOutcome
from mcpkit.coding.workspace import Workspace, WorkspaceError
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

GREP_LIMIT = 200
"""Files (or matching lines in content mode) `grep` shows by default."""
MAX_CONTEXT = 20
"""Most context lines around a match."""
MAX_OUTPUT_CHARS = 512 * 1024
"""Characters of `grep` content output (the text; the structured lines stop at the same
point); past it the output stops with a note."""

GREP_OUTPUT = {
    "type": "object",
    "properties": {
        "mode": {"type": "string", "enum": ["files_with_matches", "content", "count"]},
        "engine": {"type": "string", "enum": ["ripgrep", "python"]},
        "files": {"type": "array", "items": {"type": "string"},
                  "description": "files shown (files_with_matches: newest first)"},
        "total_files": {"type": "integer", "description": "files with a match"},
        "total_matches": {"type": "integer",
                          "description": "matching lines (content and count modes)"},
        "lines": {
            "type": "array",
            "description": "content mode: the lines shown, in order - each matching line "
                           "(match: true) and its context lines (match: false)",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "line": {"type": "integer"},
                               "text": {"type": "string"}, "match": {"type": "boolean"}},
                "required": ["path", "line", "text", "match"],
            },
        },
        "counts": {
            "type": "array",
            "description": "count mode: matching lines per file shown",
            "items": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["path", "count"],
            },
        },
        "truncated": {"type": "boolean"},
        "timed_out": {"type": "boolean"},
    },
    "required": ["mode", "engine", "files", "total_files", "truncated"],
}

OutputMode = Literal["files_with_matches", "content", "count"]


def is_binary_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(1 << 20)
    except OSError:
        return False


# --- rendering -------------------------------------------------------------------------------


def content_lines(query: GrepQuery, files: list[FileHits], limit: int
                  ) -> tuple[list[str], list[dict[str, Any]], list[str], int]:
    """Content mode: the text lines, the same lines structured ({path, line, text, match};
    `match` false for a context line), the files shown and the matching lines shown - up to
    `limit` matching lines and `MAX_OUTPUT_CHARS` characters of text."""
    text: list[str] = []
    structured: list[dict[str, Any]] = []
    shown: list[str] = []
    emitted = size = 0
    for hits in sorted(files, key=lambda f: f.path):
        if emitted >= limit or size > MAX_OUTPUT_CHARS:
            break
        if not hits.lines:
            continue
        shown.append(hits.path)
        if text and query.context:
            text.append("--")
        previous = None
        for number, line, is_match in hits.lines:
            if emitted >= limit or size > MAX_OUTPUT_CHARS:
                break
            if query.context and previous is not None and number != previous + 1:
                text.append("--")
            mark = ":" if is_match else "-"
            text.append(f"{hits.path}{mark}{number}{mark}{line}")
            structured.append({"path": hits.path, "line": number, "text": line,
                               "match": is_match})
            size += len(text[-1]) + 1
            previous = number
            if is_match:
                emitted += 1
    return text, structured, shown, emitted


class _Rendered:
    """The text lines, the files shown and the structured result one mode builds."""

    def __init__(self, query: GrepQuery, outcome: GrepOutcome) -> None:
        self.lines: list[str] = []
        self.shown: list[str] = []
        self.truncated = False
        self.structured: dict[str, Any] = {"mode": query.mode, "engine": outcome.engine}
        self.total_files = len(outcome.files) + outcome.files_dropped
        self.total_matches = sum(f.matches for f in outcome.files) + outcome.matches_dropped


def _files_with_matches(out: _Rendered, files: list[FileHits], limit: int) -> None:
    def mtime(hits: FileHits) -> float:
        try:
            return os.stat(hits.abs_path).st_mtime
        except OSError:
            return 0.0

    ordered = sorted(((mtime(f), f.path) for f in files), key=lambda t: (-t[0], t[1]))
    out.shown = [p for _, p in ordered[:limit]]
    out.lines = list(out.shown)
    if out.total_files > limit:
        out.truncated = True
        out.lines.append(f"({out.total_files - limit} more files not shown; narrow the search "
                         f"or raise limit)")


def _counts(out: _Rendered, files: list[FileHits], limit: int) -> None:
    files.sort(key=lambda f: f.path)
    for hits in files[:limit]:
        out.shown.append(hits.path)
        out.lines.append(f"{hits.path}:{hits.matches}")
    if out.total_files > limit:
        out.truncated = True
        out.lines.append(f"({out.total_files - limit} more files not shown)")
    if files:
        out.lines.append(f"{out.total_matches} matching lines in {out.total_files} files")
    out.structured["total_matches"] = out.total_matches
    out.structured["counts"] = [{"path": h.path, "count": h.matches} for h in files[:limit]]


def _content(out: _Rendered, query: GrepQuery, files: list[FileHits], limit: int) -> None:
    out.lines, out.structured["lines"], out.shown, emitted = content_lines(query, files, limit)
    if out.total_matches > emitted:
        out.truncated = True
        out.lines.append(f"({out.total_matches - emitted} more matching lines not shown; "
                         f"narrow the search or raise limit)")
    out.structured["total_matches"] = out.total_matches


def grep_text(query: GrepQuery, outcome: GrepOutcome, limit: int) -> ToolResult:
    files = outcome.files
    out = _Rendered(query, outcome)
    if query.mode == "files_with_matches":
        _files_with_matches(out, files, limit)
    elif query.mode == "count":
        _counts(out, files, limit)
    else:
        _content(out, query, files, limit)
    if outcome.files_dropped:
        out.truncated = True
        out.lines.append(f"({outcome.files_dropped} more files with matches were only "
                         f"counted, past {outcome.max_files}; narrow the search)")
    if not files:
        out.lines.append(f"No matches for {query.pattern!r}.")
    if outcome.timed_out:
        out.lines.append(f"(the search stopped after {engines.GREP_TIMEOUT_S:g} s; results "
                         f"are incomplete)")
    out.structured.update(files=out.shown, total_files=out.total_files,
                          truncated=out.truncated, timed_out=outcome.timed_out)
    return text_result("\n".join(out.lines), out.structured)


# --- the tool --------------------------------------------------------------------------------


def grep_query(workspace: Workspace, pattern: str, path: str | None, include: str | None,
               output_mode: OutputMode, context: int, case_insensitive: bool) -> GrepQuery:
    """The search asked for; `SearchError`, `PatternError` or `WorkspaceError` when refused."""
    if include:
        compile_glob(include)  # refused here when too long or expanding too far
    target = workspace.resolve(path)
    if not target.exists():
        raise SearchError(f"{path} does not exist")
    if target.is_file() and is_binary_file(target):
        raise SearchError(f"{path} is a binary file; grep skips binary files")
    return GrepQuery(
        pattern=pattern, target=target, walk_root=root_of(workspace, target),
        mode=output_mode, context=clamp(context, 0, 0, MAX_CONTEXT),
        case_insensitive=case_insensitive, include=include or None,
    )


def register(server: Server, env: CodingEnv) -> None:
    workspace = env.workspace

    async def grep(
        pattern: Annotated[str, "Regular expression to search for (ripgrep syntax, like "
                                "Python's: `def \\w+`, `TODO|FIXME`)"],
        path: Annotated[str | None, "File or directory to search (default: the workspace "
                                    "root)"] = None,
        include: Annotated[str | None, "Only files matching this glob, e.g. `*.py` or "
                                       "`*.{ts,tsx}`"] = None,
        output_mode: Annotated[OutputMode, "`files_with_matches` (default): paths, newest "
                                           "first; `content`: matching lines as "
                                           "path:line:text; `count`: path:N"
                               ] = "files_with_matches",
        context: Annotated[int, "Lines of context around each match (content mode)"] = 0,
        case_insensitive: Annotated[bool, "Ignore case"] = False,
        limit: Annotated[int, "Most files (or matching lines in content mode) to show"
                         ] = GREP_LIMIT,
    ) -> ToolResult:
        if not pattern:
            return error("pattern is empty")
        if len(pattern) > engines.MAX_REGEX_CHARS:
            return error(f"pattern is {len(pattern)} characters long; the limit is "
                         f"{engines.MAX_REGEX_CHARS}")
        try:
            query = grep_query(workspace, pattern, path, include, output_mode, context,
                               case_insensitive)
            outcome = await engines.run_grep(workspace, query)
        except (WorkspaceError, SearchError, PatternError, GrepFailed) as exc:
            return error(str(exc))
        except OSError as exc:
            return error(f"grep failed: {exc.strerror or exc}")
        return grep_text(query, outcome, clamp(limit, GREP_LIMIT, 1, MAX_LIMIT))

    server.add_tool(
        grep, name="grep", title="Search file contents",
        description=(
            "Search file contents with a regular expression (Python/ripgrep syntax). "
            "Honours .gitignore, skips .git, binary files and symlinks. `output_mode`: "
            "`files_with_matches` (default, newest first), `content` (path:line:text, "
            "`context` lines around, long lines cut) or `count`. Output is capped by `limit` "
            "with the number left out said."),
        output_schema=GREP_OUTPUT, annotations=READ_ONLY,
    )
