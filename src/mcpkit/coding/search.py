"""The search tools: `glob`, `grep` and `ls` (all read-only).

- `glob` lists files matching a shell glob, newest first, honouring .gitignore.
- `grep` searches file contents with a regex: ripgrep, else a Python search with the same
  output, each in a child process the server kills at its time limit or on cancellation
  (`grep.py`). Both honour .gitignore, skip `.git`, binary files and symlinks.
- `ls` prints a tree with the usual clutter (.git, node_modules, .venv, caches …) left out.

Every path goes through `Workspace.resolve`; walks never follow a symlink out of the
workspace (see `ignore.py`). Failures are `isError` results with one line for the model.

No caller-supplied pattern can stall the server: globs are matched in linear time without
regexes (`globmatch.py`), `{a,b}` expansion is capped (`braces.py`), regexes run in a child
process, walks run in worker threads that stop at `WALK_TIMEOUT_S`, and every other
caller-controlled size (pattern length, result counts, context lines, output characters,
ignore globs, walk depth) has a cap below; hitting one answers with an error naming it.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread

from mcpkit.coding import grep as engines
from mcpkit.coding.braces import MAX_EXPANDED_CHARS, MAX_EXPANSIONS
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.globmatch import (
    GlobSet,
    PatternError,
    compile_glob,
    glob_depth,
    split_literal_prefix,
    union,
)
from mcpkit.coding.grep import FileHits, GrepFailed, GrepOutcome, GrepQuery, shown_path
from mcpkit.coding.ignore import Walker, _WalkStopped
from mcpkit.coding.workspace import Workspace, WorkspaceError
from mcpkit.errors import UsageError
from mcpkit.server.results import text_block
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

GLOB_LIMIT = 200
GREP_LIMIT = 200
MAX_LIMIT = 5000
MAX_CONTEXT = 20
WALK_TIMEOUT_S = 30.0
MAX_OUTPUT_CHARS = 512 * 1024
"""Characters of `grep` content output (the text; the structured lines stop at the same
point); past it the output stops with a note."""
LS_DEPTH = 2
LS_MAX_DEPTH = 5
LS_MAX_ENTRIES = 1000
LS_MAX_IGNORES = 64
"""Most `ignore` globs one `ls` takes."""
LS_DEFAULT_IGNORES = (
    ".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache",
    ".pytest_cache", ".ruff_cache", ".tox", ".nox", ".idea", ".vscode", ".DS_Store", "dist",
    "build", ".next", ".cache", "target", "*.egg-info", ".eggs", "coverage", ".coverage",
    "htmlcov", "Thumbs.db",
)
LS_INLINE_ENTRIES = 1000
"""`ls` first runs on the event loop, allowed to read this many directory entries: a small
tree is listed in less time than handing the call to a worker thread and back costs (about
0.1-0.3 ms, most of a small listing's time), and a thread would spare the loop only the
directory reads (the rest holds the GIL anyway). A bigger tree stops there and starts over
in a worker thread; the work thrown away is bounded by this budget."""
LS_LINK_COST = 20
"""What a symlink counts against `LS_INLINE_ENTRIES`: it is resolved (a `realpath`, a syscall
per path component), which costs many times a plain entry."""

READ_ONLY = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}

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


class SearchError(UsageError):
    """A search the tool refuses or cannot run (the message is meant for the model): a usage
    error - a path that does not exist, a file where a directory is wanted."""


def error(message: str) -> ToolResult:
    return ToolResult(content=[text_block(message)], is_error=True)


def text_result(text: str, structured: Any = None) -> ToolResult:
    return ToolResult(content=[text_block(text)], structured_content=structured)


def clamp(value: int | None, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    return max(low, min(high, value))


def root_of(workspace: Workspace, real: Path) -> Path:
    """The workspace root (the main one or an extra root) that holds `real`."""
    best = workspace.root
    best_len = -1
    for root in workspace.roots:
        if (real == root or root in real.parents) and len(root.parts) > best_len:
            best, best_len = root, len(root.parts)
    return best


def is_binary_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(1 << 20)
    except OSError:
        return False


class Deadline:
    """A stop condition for walks running in a thread: cancelled, or out of time."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.cancelled = threading.Event()
        self.timed_out = False

    def __call__(self) -> bool:
        if self.cancelled.is_set():
            return True
        if time.monotonic() > self.at:
            self.timed_out = True
            return True
        return False


async def in_thread(fn: Callable[[], Any], deadline: Deadline) -> Any:
    """Run a walk in a worker thread; on cancellation tell it to stop and return at once."""
    try:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
    finally:
        deadline.cancelled.set()


# --- glob ------------------------------------------------------------------------------------


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
            found.add(mtime, shown_path(workspace, walk_root, entry.rel))
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


# --- grep ------------------------------------------------------------------------------------


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


def grep_text(query: GrepQuery, outcome: GrepOutcome, limit: int) -> ToolResult:
    files = outcome.files
    total_files = len(files) + outcome.files_dropped
    total_matches = sum(f.matches for f in files) + outcome.matches_dropped
    lines: list[str] = []
    shown: list[str] = []
    truncated = False
    structured: dict[str, Any] = {"mode": query.mode, "engine": outcome.engine}
    if query.mode == "files_with_matches":
        def mtime(hits: FileHits) -> float:
            try:
                return os.stat(hits.abs_path).st_mtime
            except OSError:
                return 0.0

        ordered = sorted(((mtime(f), f.path) for f in files), key=lambda t: (-t[0], t[1]))
        shown = [p for _, p in ordered[:limit]]
        lines = list(shown)
        if total_files > limit:
            truncated = True
            lines.append(f"({total_files - limit} more files not shown; narrow the search "
                         f"or raise limit)")
    elif query.mode == "count":
        files.sort(key=lambda f: f.path)
        for hits in files[:limit]:
            shown.append(hits.path)
            lines.append(f"{hits.path}:{hits.matches}")
        if total_files > limit:
            truncated = True
            lines.append(f"({total_files - limit} more files not shown)")
        if files:
            lines.append(f"{total_matches} matching lines in {total_files} files")
        structured["total_matches"] = total_matches
        structured["counts"] = [{"path": h.path, "count": h.matches} for h in files[:limit]]
    else:
        lines, structured["lines"], shown, emitted = content_lines(query, files, limit)
        if total_matches > emitted:
            truncated = True
            lines.append(f"({total_matches - emitted} more matching lines not shown; narrow "
                         f"the search or raise limit)")
        structured["total_matches"] = total_matches
    if outcome.files_dropped:
        truncated = True
        lines.append(f"({outcome.files_dropped} more files with matches were only counted, "
                     f"past {engines.MAX_FILES_KEPT}; narrow the search)")
    if not files:
        lines.append(f"No matches for {query.pattern!r}.")
    if outcome.timed_out:
        lines.append(f"(the search stopped after {engines.GREP_TIMEOUT_S:g} s; results are "
                     f"incomplete)")
    structured.update(files=shown, total_files=total_files, truncated=truncated,
                      timed_out=outcome.timed_out)
    return text_result("\n".join(lines), structured)


# --- ls --------------------------------------------------------------------------------------


class _ListingTooBig(Exception):
    """An `ls` on the event loop read more directory entries than it may (`max_scanned`)."""


_LS_DEFAULT_NAMES = frozenset(p for p in LS_DEFAULT_IGNORES if not any(c in p for c in "*?["))
_first = operator.itemgetter(0)  # a sort key: the first item of a tuple


@functools.lru_cache(maxsize=64)
def ls_ignore_globs(ignore: tuple[str, ...]) -> GlobSet:
    """The default ignore globs and the `ignore` ones, matched against an entry's name and
    its path below the listed directory. `PatternError` past `LS_MAX_IGNORES` globs, or for
    one too long or expanding to too many."""
    if len(ignore) > LS_MAX_IGNORES:
        raise PatternError(f"{len(ignore)} ignore globs given; the limit is {LS_MAX_IGNORES}")
    given = [compile_glob(p.strip().rstrip("/").lstrip("/")) for p in ignore
             if p.strip().rstrip("/")]
    together = union(given)  # all of them are tried on every entry: capped as one glob
    if len(together.globs) > MAX_EXPANSIONS:
        raise PatternError(f"the ignore globs expand to {len(together.globs)} patterns in all; "
                           f"the limit is {MAX_EXPANSIONS}")
    if sum(len(g.pattern) for g in together.globs) > MAX_EXPANDED_CHARS:
        raise PatternError(f"the ignore globs expand to more than {MAX_EXPANDED_CHARS} "
                           f"characters in all; the limit is {MAX_EXPANDED_CHARS}")
    defaults = [compile_glob(p) for p in LS_DEFAULT_IGNORES if p not in _LS_DEFAULT_NAMES]
    return union([*defaults, together])


def run_ls(env: CodingEnv, target: Path, ignore: list[str], depth: int, deadline: Deadline,
           max_scanned: int | None = None) -> str:
    """The tree under `target`; past `max_scanned` directory entries read (a symlink counts
    `LS_LINK_COST`: it is resolved) it raises `_ListingTooBig`."""
    workspace = env.workspace
    names = _LS_DEFAULT_NAMES
    match = ls_ignore_globs(tuple(ignore)).match
    lines = [(workspace.display(target).rstrip("/") or ".") + "/"]
    count = 0
    stopped = False
    budget = max_scanned

    def charge(units: int) -> None:
        nonlocal budget
        if budget is not None:
            budget -= units
            if budget < 0:
                raise _ListingTooBig

    def read(directory: str) -> list[os.DirEntry[str]]:
        with os.scandir(directory) as it:
            if budget is None:
                return list(it)
            entries = list(itertools.islice(it, budget + 1))  # never more than allowed
        charge(len(entries))
        return entries

    def walk(directory: str, rel_prefix: str, level: int) -> None:
        nonlocal count, stopped
        if deadline():
            stopped = True
            return
        try:
            entries = read(directory)
        except OSError as exc:
            lines.append("  " * level + f"({exc.strerror or 'unreadable'})")
            return
        dirs: list[tuple[str, str, str]] = []  # (sort key, name, path)
        files: list[tuple[str, str]] = []  # (sort key, line)
        for e in entries:
            if budget is None and deadline():  # in a thread: per entry, not per directory
                stopped = True
                return
            name = e.name
            if name in names or match(name) or (rel_prefix and match(rel_prefix + name)):
                continue
            try:
                if e.is_symlink():
                    charge(LS_LINK_COST)
                    real = Path(os.path.realpath(e.path))
                    if not workspace.contains(real):
                        continue  # never shown or followed out of the workspace
                    suffix = "/" if real.is_dir() else ""
                    files.append((name.lower(),
                                  f"{name}{suffix} -> {workspace.display(real)}"))
                elif e.is_dir(follow_symlinks=False):
                    dirs.append((name.lower(), name, e.path))
                else:
                    files.append((name.lower(), name))
            except OSError:
                continue
        dirs.sort(key=_first)  # by the key alone: stable, like sorting on name.lower()
        files.sort(key=_first)
        indent = "  " * level
        for _, name, path in dirs:
            if count >= LS_MAX_ENTRIES:
                stopped = True
                return
            lines.append(f"{indent}{name}/")
            count += 1
            if level < depth:
                walk(path, f"{rel_prefix}{name}/", level + 1)
                if stopped:
                    return
        room = LS_MAX_ENTRIES - count
        lines.extend([indent + shown for _, shown in files[:room]])
        count += min(room, len(files))
        if len(files) > room:
            stopped = True

    walk(str(target), "", 1)
    if stopped:
        why = (f"more than {LS_MAX_ENTRIES} entries" if count >= LS_MAX_ENTRIES
               else f"stopped after {WALK_TIMEOUT_S:g} s")
        lines.append(f"(listing cut: {why}; list a subdirectory or use a smaller depth)")
    elif count == 0:
        lines.append("  (empty)")
    return "\n".join(lines)


# --- registration ----------------------------------------------------------------------------


def register(server: Server, env: CodingEnv) -> None:
    workspace = env.workspace

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
            if include:
                compile_glob(include)  # refused here when too long or expanding too far
            target = workspace.resolve(path)
            if not target.exists():
                raise SearchError(f"{path} does not exist")
            if target.is_file() and is_binary_file(target):
                raise SearchError(f"{path} is a binary file; grep skips binary files")
            query = GrepQuery(
                pattern=pattern, target=target, walk_root=root_of(workspace, target),
                mode=output_mode, context=clamp(context, 0, 0, MAX_CONTEXT),
                case_insensitive=case_insensitive, include=include or None,
            )
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

    async def ls(
        path: Annotated[str | None, "Directory to list (default: the workspace root)"] = None,
        ignore: Annotated[list[str] | None, "Extra globs to leave out, e.g. [\"*.log\"]"
                          ] = None,
        depth: Annotated[int, "Levels to descend (1-5)"] = LS_DEPTH,
    ) -> Any:  # not `ToolResult`: that dataclass would be taken for structured output
        try:
            target = workspace.resolve(path)
            if not target.exists():
                raise SearchError(f"{path} does not exist")
            if not target.is_dir():
                raise SearchError(f"{path} is a file, not a directory (use view to read it)")
            deadline = Deadline(WALK_TIMEOUT_S)
            levels = clamp(depth, LS_DEPTH, 1, LS_MAX_DEPTH)
            ignores = list(ignore or ())
            # refused here when there are too many, or one too big
            plain = ls_ignore_globs(tuple(ignores)).plain
            try:  # on the event loop first: see LS_INLINE_ENTRIES
                if not plain:  # caller globs that cost more than a string test: a thread
                    raise _ListingTooBig
                text = run_ls(env, target, ignores, levels, deadline, LS_INLINE_ENTRIES)
            except _ListingTooBig:
                text = await in_thread(
                    lambda: run_ls(env, target, ignores, levels, deadline), deadline)
        except (WorkspaceError, SearchError, PatternError) as exc:
            return error(str(exc))
        except OSError as exc:
            return error(f"ls failed: {exc.strerror or exc}")
        return text_result(text)

    server.add_tool(
        ls, name="ls", title="List a directory tree",
        description=(
            "List a directory as an indented tree (directories end in `/`), "
            f"`depth` levels deep (default {LS_DEPTH}, at most {LS_MAX_DEPTH}). Leaves out "
            ".git, node_modules, virtualenvs, caches and build output, plus the `ignore` "
            f"globs; at most {LS_MAX_ENTRIES} entries."),
        annotations=READ_ONLY,
    )
