"""The `glob` tool: files whose path matches a shell glob, newest first, honouring .gitignore.

Globs are matched in linear time without regexes (`globmatch.py`); the walk runs in a worker
thread that stops at `WALK_TIMEOUT_S`, and only the `limit` newest files are kept in memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Annotated

from mcpkit.coding.deadline import Deadline, in_thread
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.ignore import Walker, _WalkStopped
from mcpkit.coding.search.common import (
    MAX_LIMIT,
    READ_ONLY,
    WALK_TIMEOUT_S,
    SearchError,
    clamp,
    error,
    root_of,
    shown_path,
    text_result,
)
from mcpkit.coding.search.globmatch import (
    PatternError,
    compile_glob,
    glob_depth,
    split_literal_prefix,
)
from mcpkit.coding.workspace import WorkspaceError
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

GLOB_LIMIT = 200
"""Files `glob` lists by default (the rest are counted)."""

GLOB_OUTPUT = {
    "type": "object",
    "properties": {
        "files": {"type": "array", "items": {"type": "string"},
                  "description": "matching files shown, newest first"},
        "total": {"type": "integer", "description": "all matching files"},
        "truncated": {"type": "boolean"},
    },
    "required": ["files", "total", "truncated"],
}


@dataclass(slots=True)
class Newest:
    """The `keep` newest files seen (ties: by path) and how many were seen: memory stays
    O(keep) however many files match."""

    keep: int
    items: list[tuple[float, str]] = field(default_factory=list)  # (mtime, path)
    total: int = 0

    def add(self, mtime: float, path: str) -> None:
        self.total += 1
        self.items.append((mtime, path))
        if len(self.items) >= 2 * self.keep + 64:  # amortised: one sort per `keep` adds
            self.items = self.ordered()

    def ordered(self) -> list[tuple[float, str]]:
        return sorted(self.items, key=lambda f: (-f[0], f[1]))[:self.keep]


@dataclass(slots=True)
class GlobOutcome:
    files: Newest
    timed_out: bool


def run_glob(env: CodingEnv, pattern: str, path: str | None, deadline: Deadline,
             keep: int = GLOB_LIMIT) -> GlobOutcome:
    workspace = env.workspace
    prefix, rest = split_literal_prefix(pattern)
    base = workspace.resolve(path)
    if not base.is_dir():
        if not base.exists():
            raise SearchError(f"{path} does not exist")
        raise SearchError(f"{path} is not a directory")
    if prefix:
        if os.path.isabs(prefix):
            base = workspace.resolve(prefix)
        else:
            base = workspace.resolve(str(base / prefix))
        if not base.is_dir():
            return GlobOutcome(Newest(keep), False)
    walk_root = root_of(workspace, base)
    base_rel = base.relative_to(walk_root).as_posix()
    skip = 0 if base_rel == "." else len(base_rel) + 1
    matcher = compile_glob(rest)
    walker = Walker(walk_root, workspace.contains, stop=deadline)
    found = Newest(keep)
    try:
        for entry in walker.files(base, max_depth=glob_depth(rest)):
            if deadline():  # per file too: a directory can hold very many
                raise _WalkStopped
            if not matcher.match(entry.rel[skip:]):
                continue
            try:
                mtime = entry.entry.stat().st_mtime
            except OSError:
                continue
            found.add(mtime, shown_path(workspace.root, walk_root, entry.rel))
    except _WalkStopped:
        if not deadline.timed_out:
            raise
        return GlobOutcome(found, True)
    return GlobOutcome(found, False)


def glob_text(pattern: str, outcome: GlobOutcome, limit: int) -> ToolResult:
    shown = [p for _, p in outcome.files.ordered()[:limit]]
    total = outcome.files.total
    lines = list(shown)
    if not shown:
        hint = ""
        if "/" not in pattern and not pattern.startswith("**"):
            hint = f" (it matches in the directory itself; `**/{pattern}` searches below it)"
        lines.append(f"No files match {pattern}{hint}.")
    if total > limit:
        lines.append(f"({total - limit} more files not shown; narrow the pattern or path)")
    if outcome.timed_out:
        lines.append(f"(the search stopped after {WALK_TIMEOUT_S:g} s; results are incomplete)")
    return text_result("\n".join(lines),
                       {"files": shown, "total": total, "truncated": total > limit})


def register(server: Server, env: CodingEnv) -> None:
    async def glob(
        pattern: Annotated[str, "Glob like `**/*.py`, `src/**/*.{ts,tsx}` or `*.md` (`*` "
                                "stays in one directory; `**` crosses directories)"],
        path: Annotated[str | None, "Directory to search (default: the workspace root)"] = None,
        limit: Annotated[int, "Most files to list"] = GLOB_LIMIT,
    ) -> ToolResult:
        if not pattern.strip():
            return error("pattern is empty")
        if ".." in pattern.split("/"):
            return error(f"'..' is not allowed in patterns: {pattern}")
        deadline = Deadline(WALK_TIMEOUT_S)
        shown = clamp(limit, GLOB_LIMIT, 1, MAX_LIMIT)
        try:
            outcome = await in_thread(lambda: run_glob(env, pattern, path, deadline, shown),
                                      deadline)
        except (WorkspaceError, SearchError, PatternError) as exc:
            return error(str(exc))
        except OSError as exc:
            return error(f"glob failed: {exc.strerror or exc}")
        return glob_text(pattern, outcome, shown)

    server.add_tool(
        glob, name="glob", title="Find files by name",
        description=(
            "Find files whose path matches a glob pattern, newest first. Honours .gitignore "
            "(nested files and negations) and skips .git. Paths in the result are relative to "
            f"the workspace root. At most `limit` (default {GLOB_LIMIT}) are listed; the "
            "rest are counted."),
        output_schema=GLOB_OUTPUT, annotations=READ_ONLY,
    )
