"""The search tools: `glob`, `grep` and `ls` (all read-only).

- `glob` lists files matching a shell glob, newest first, honouring .gitignore.
- `grep` searches file contents with a regex: ripgrep (`rg`) when it is on PATH (or next to
  the Python running the server, where `pip` puts it), else a Python search with the same
  output. Both honour .gitignore, skip `.git`, binary files and symlinks.
- `ls` prints a tree with the usual clutter (.git, node_modules, .venv, caches …) left out.

Every path goes through `Workspace.resolve`; walks never follow a symlink out of the
workspace (see `ignore.py`). Failures are `isError` results with one line for the model.
Set `MCPKIT_GREP_ENGINE=python` to force the Python search (tests; machines with a broken rg).
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
import msgspec

from mcpkit.coding.env import CodingEnv
from mcpkit.coding.ignore import (
    Walker,
    WalkStopped,
    glob_depth,
    glob_regex,
    split_literal_prefix,
)
from mcpkit.coding.processes import open_in_group, signal_group
from mcpkit.coding.workspace import Workspace, WorkspaceError
from mcpkit.server.results import text_block
from mcpkit.server.server import Server
from mcpkit.server.tools import ToolResult

GLOB_LIMIT = 200
GREP_LIMIT = 200
MAX_LIMIT = 5000
MAX_CONTEXT = 20
MAX_LINE = 400
"""Characters of one line `grep` shows; the rest is cut with a note."""
GREP_TIMEOUT_S = 30.0
WALK_TIMEOUT_S = 30.0
STORE_LINES = 20_000
"""Lines `grep` keeps in memory for content output; past that it only counts."""
MAX_FILE_BYTES = 64 * 1024 * 1024
"""The Python search skips files larger than this."""
LS_DEPTH = 2
LS_MAX_DEPTH = 5
LS_MAX_ENTRIES = 1000
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
ENGINE_ENV = "MCPKIT_GREP_ENGINE"

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
        "truncated": {"type": "boolean"},
        "timed_out": {"type": "boolean"},
    },
    "required": ["mode", "engine", "files", "total_files", "truncated"],
}

OutputMode = Literal["files_with_matches", "content", "count"]


class SearchError(Exception):
    """A search the tool refuses or cannot run (the message is meant for the model)."""


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


def shown_path(workspace: Workspace, walk_root: Path, rel: str) -> str:
    """A walked file as the model should see it: relative to the workspace root."""
    if walk_root == workspace.root:
        return rel
    return str(walk_root / rel)


def is_binary_file(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return b"\0" in f.read(1 << 20)
    except OSError:
        return False


def cut_line(text: str) -> str:
    if len(text) <= MAX_LINE:
        return text
    return f"{text[:MAX_LINE]} … [line cut, {len(text)} chars]"


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
class GlobOutcome:
    files: list[tuple[float, str]]
    timed_out: bool


def run_glob(env: CodingEnv, pattern: str, path: str | None, deadline: Deadline) -> GlobOutcome:
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
            return GlobOutcome([], False)
    walk_root = root_of(workspace, base)
    base_rel = base.relative_to(walk_root).as_posix()
    skip = 0 if base_rel == "." else len(base_rel) + 1
    regex = glob_regex(rest)
    walker = Walker(walk_root, workspace.contains, stop=deadline)
    found: list[tuple[float, str]] = []
    try:
        for entry in walker.files(base, max_depth=glob_depth(rest)):
            if regex.match(entry.rel[skip:]) is None:
                continue
            try:
                mtime = entry.entry.stat().st_mtime
            except OSError:
                continue
            found.append((mtime, shown_path(workspace, walk_root, entry.rel)))
    except WalkStopped:
        if not deadline.timed_out:
            raise
        return GlobOutcome(found, True)
    return GlobOutcome(found, False)


def glob_text(pattern: str, outcome: GlobOutcome, limit: int) -> ToolResult:
    ordered = sorted(outcome.files, key=lambda f: (-f[0], f[1]))
    shown = [p for _, p in ordered[:limit]]
    total = len(ordered)
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


@dataclass(slots=True)
class FileHits:
    path: str  # as shown to the model
    abs_path: str
    matches: int = 0
    lines: list[tuple[int, str, bool]] = field(default_factory=list)  # (number, text, match)


@dataclass(slots=True)
class GrepOutcome:
    engine: str
    files: list[FileHits] = field(default_factory=list)
    stored: int = 0
    timed_out: bool = False

    def add(self, hits: FileHits) -> None:
        if hits.matches <= 0:
            return
        if self.stored >= STORE_LINES:
            hits.lines = []
        self.stored += len(hits.lines)
        self.files.append(hits)


@dataclass(slots=True)
class GrepQuery:
    pattern: str
    target: Path
    walk_root: Path
    mode: str
    context: int
    case_insensitive: bool
    include: str | None


def include_filter(include: str | None) -> Callable[[str, str], bool] | None:
    """A filter on (name, path below the search directory) for the `include` glob."""
    if not include:
        return None
    if "/" in include:
        full = glob_regex(include.lstrip("/"))
        return lambda name, rel: full.match(rel) is not None
    name_re = glob_regex(include)
    return lambda name, rel: name_re.match(name) is not None


def find_ripgrep() -> str | None:
    if os.environ.get(ENGINE_ENV, "").lower() == "python":
        return None
    found = shutil.which("rg")
    if found:
        return found
    beside = Path(sys.executable).parent / "rg"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return None


def context_ranges(match_lines: list[int], context: int, count: int) -> list[int]:
    """The 0-based line indexes to show: the matches and `context` lines around each."""
    wanted: set[int] = set()
    for i in match_lines:
        wanted.update(range(max(0, i - context), min(count, i + context + 1)))
    return sorted(wanted)


def python_grep(query: GrepQuery, workspace: Workspace, deadline: Deadline) -> GrepOutcome:
    flags = re.MULTILINE | (re.IGNORECASE if query.case_insensitive else 0)
    try:
        regex = re.compile(query.pattern, flags)
    except re.error as exc:
        raise SearchError(f"invalid regex {query.pattern!r}: {exc}") from None
    outcome = GrepOutcome("python")
    accept = include_filter(query.include)
    walk_root = query.walk_root
    if query.target.is_file():
        base_rel = query.target.parent.relative_to(walk_root).as_posix()
        rel = query.target.relative_to(walk_root).as_posix()
        items = [(str(query.target), rel)]
    else:
        base_rel = query.target.relative_to(walk_root).as_posix()
        walker = Walker(walk_root, workspace.contains, stop=deadline)
        items = None
    skip = 0 if base_rel == "." else len(base_rel) + 1

    def search_one(abs_path: str, rel: str) -> None:
        name = rel.rsplit("/", 1)[-1]
        if accept is not None and not accept(name, rel[skip:]):
            return
        try:
            if os.path.getsize(abs_path) > MAX_FILE_BYTES:
                return
            with open(abs_path, "rb") as f:
                data = f.read()
        except OSError:
            return
        if b"\0" in data:
            return  # binary
        text = data.decode("utf-8", errors="replace")
        first = regex.search(text)
        if first is None:
            return
        hits = FileHits(shown_path(workspace, walk_root, rel), abs_path)
        if query.mode == "files_with_matches" and "\n" not in first.group():
            hits.matches = 1
            outcome.add(hits)
            return
        lines = text.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
        matched = [i for i, line in enumerate(lines) if regex.search(line.rstrip("\r"))]
        hits.matches = len(matched)
        if query.mode == "content" and outcome.stored < STORE_LINES:
            marks = set(matched)
            hits.lines = [(i + 1, cut_line(lines[i].rstrip("\r")), i in marks)
                          for i in context_ranges(matched, query.context, len(lines))]
        outcome.add(hits)

    try:
        if items is not None:
            for abs_path, rel in items:
                search_one(abs_path, rel)
        else:
            for entry in walker.files(query.target, include_links=False):
                if deadline():
                    raise WalkStopped
                search_one(entry.path, entry.rel)
    except WalkStopped:
        if not deadline.timed_out:
            raise
        outcome.timed_out = True
    return outcome


class _RgText(msgspec.Struct):
    text: str | None = None
    bytes: str | None = None


class _RgData(msgspec.Struct):
    path: _RgText | None = None
    lines: _RgText | None = None
    line_number: int | None = None


class _RgEvent(msgspec.Struct):
    type: str
    data: _RgData


_rg_decoder = msgspec.json.Decoder(_RgEvent)


def _rg_text(value: _RgText | None) -> str:
    if value is None:
        return ""
    if value.text is not None:
        return value.text
    import base64

    return base64.b64decode(value.bytes or "").decode("utf-8", errors="replace")


def ripgrep_args(rg: str, query: GrepQuery, target_arg: str) -> list[str]:
    args = [rg, "--json", "--no-config", "--no-require-git", "--no-ignore-dot",
            "--no-ignore-global", "--hidden", "--glob", "!.git", "--engine", "auto"]
    if query.case_insensitive:
        args.append("--ignore-case")
    if query.mode == "files_with_matches":
        args += ["--max-count", "1"]
    elif query.mode == "content" and query.context:
        args += ["--context", str(query.context)]
    if query.include:
        # A type filter, not --glob: --glob would override .gitignore.
        last = query.include.rstrip("/").rsplit("/", 1)[-1]
        args += ["--type-add", f"mcpkitinclude:{last}", "--type", "mcpkitinclude"]
    args += ["--regexp", query.pattern, "--", target_arg]
    return args


def rg_error_line(stderr: str, pattern: str) -> str | None:
    """One line for a fatal rg error (None when rg only complained about some files)."""
    text = stderr.strip()
    if "regex parse error" in text or "error parsing" in text.lower():
        last = [line.strip() for line in text.splitlines() if line.strip()][-1]
        last = last.removeprefix("error:").strip()
        return f"invalid regex {pattern!r}: {last}"
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and not lines[-1].startswith("rg: ./") and "No such file" not in lines[-1]:
        return "ripgrep failed: " + lines[-1].removeprefix("rg: ")
    return None


async def ripgrep(rg: str, query: GrepQuery, workspace: Workspace) -> GrepOutcome:
    walk_root = query.walk_root
    if walk_root == workspace.root:
        rel = query.target.relative_to(walk_root).as_posix()
        target_arg = "." if rel == "." else rel
    else:
        target_arg = str(query.target)
    accept = include_filter(query.include) if query.include and "/" in query.include else None
    base_rel = (query.target if query.target.is_dir() else query.target.parent
                ).relative_to(walk_root).as_posix()
    skip = 0 if base_rel == "." else len(base_rel) + 1
    outcome = GrepOutcome("ripgrep")
    stderr_parts: list[bytes] = []
    current: FileHits | None = None

    def on_event(raw: bytes) -> None:
        nonlocal current
        try:
            event = _rg_decoder.decode(raw)
        except msgspec.DecodeError:
            return
        kind = event.type
        if kind == "begin":
            shown = _rg_text(event.data.path)
            if shown.startswith("./"):
                shown = shown[2:]
            abs_path = shown if os.path.isabs(shown) else str(walk_root / shown)
            rel_shown = (shown if not os.path.isabs(shown)
                         else Path(shown).relative_to(walk_root).as_posix())
            current = FileHits(shown_path(workspace, walk_root, rel_shown), abs_path)
            if accept is not None and not accept(rel_shown.rsplit("/", 1)[-1],
                                                 rel_shown[skip:]):
                current = None
        elif current is None:
            return
        elif kind == "match" or kind == "context":
            is_match = kind == "match"
            if is_match:
                current.matches += 1
            if query.mode == "content" and outcome.stored + len(current.lines) < STORE_LINES:
                line = _rg_text(event.data.lines).rstrip("\n").rstrip("\r")
                current.lines.append((event.data.line_number or 0, cut_line(line), is_match))
        elif kind == "end":
            outcome.add(current)
            current = None

    process = await open_in_group(ripgrep_args(rg, query, target_arg), cwd=workspace.root)
    try:
        assert process.stdout is not None and process.stderr is not None
        stdout, stderr = process.stdout, process.stderr

        async def drain_stderr() -> None:
            size = 0
            async for chunk in stderr:
                if size < 65536:
                    stderr_parts.append(chunk)
                    size += len(chunk)

        with anyio.move_on_after(GREP_TIMEOUT_S) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain_stderr)
                pending = b""
                async for chunk in stdout:
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    for raw in complete:
                        if raw:
                            on_event(raw)
                if pending:
                    on_event(pending)
            await process.wait()
        outcome.timed_out = scope.cancelled_caught
    finally:
        if process.returncode is None:
            signal_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.wait()
    if process.returncode == 2 and not outcome.files and not outcome.timed_out:
        message = rg_error_line(b"".join(stderr_parts).decode("utf-8", "replace"),
                                query.pattern)
        if message:
            raise SearchError(message)
    return outcome


def grep_text(query: GrepQuery, outcome: GrepOutcome, limit: int) -> ToolResult:
    files = outcome.files
    total_files = len(files)
    total_matches = sum(f.matches for f in files)
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
    else:
        files.sort(key=lambda f: f.path)
        emitted = 0
        for hits in files:
            if emitted >= limit:
                break
            if not hits.lines:
                continue
            shown.append(hits.path)
            if lines and query.context:
                lines.append("--")
            previous = None
            for number, text, is_match in hits.lines:
                if emitted >= limit:
                    break
                if query.context and previous is not None and number != previous + 1:
                    lines.append("--")
                lines.append(f"{hits.path}{':' if is_match else '-'}{number}"
                             f"{':' if is_match else '-'}{text}")
                previous = number
                if is_match:
                    emitted += 1
        if total_matches > emitted:
            truncated = True
            lines.append(f"({total_matches - emitted} more matching lines not shown; narrow "
                         f"the search or raise limit)")
        structured["total_matches"] = total_matches
    if not files:
        lines.append(f"No matches for {query.pattern!r}.")
    if outcome.timed_out:
        lines.append(f"(the search stopped after {GREP_TIMEOUT_S:g} s; results are "
                     f"incomplete)")
    structured.update(files=shown, total_files=total_files, truncated=truncated,
                      timed_out=outcome.timed_out)
    return text_result("\n".join(lines), structured)


async def run_grep(env: CodingEnv, query: GrepQuery) -> GrepOutcome:
    rg = find_ripgrep()
    if rg is not None:
        return await ripgrep(rg, query, env.workspace)
    deadline = Deadline(GREP_TIMEOUT_S)
    result: GrepOutcome = await in_thread(lambda: python_grep(query, env.workspace, deadline),
                                          deadline)
    return result


# --- ls --------------------------------------------------------------------------------------


class ListingTooBig(Exception):
    """An `ls` on the event loop read more directory entries than it may (`max_scanned`)."""


_LS_DEFAULT_NAMES = frozenset(p for p in LS_DEFAULT_IGNORES if not any(c in p for c in "*?["))
_first = operator.itemgetter(0)  # a sort key: the first item of a tuple


@functools.lru_cache(maxsize=64)
def ls_ignore_regex(ignore: tuple[str, ...]) -> re.Pattern[str]:
    """One regex for the default ignore globs and the `ignore` ones (matched against an
    entry's name and its path below the listed directory): one match per entry, not one per
    glob."""
    globs = [p for p in LS_DEFAULT_IGNORES if p not in _LS_DEFAULT_NAMES]
    for pattern in ignore:
        pattern = pattern.strip().rstrip("/")
        if pattern:
            globs.append(pattern.lstrip("/"))
    return re.compile("|".join(f"(?:{glob_regex(g).pattern})" for g in globs))


def run_ls(env: CodingEnv, target: Path, ignore: list[str], depth: int, deadline: Deadline,
           max_scanned: int | None = None) -> str:
    """The tree under `target`; past `max_scanned` directory entries read (a symlink counts
    `LS_LINK_COST`: it is resolved) it raises `ListingTooBig`."""
    workspace = env.workspace
    names = _LS_DEFAULT_NAMES
    match = ls_ignore_regex(tuple(ignore)).match
    lines = [(workspace.display(target).rstrip("/") or ".") + "/"]
    count = 0
    stopped = False
    budget = max_scanned

    def charge(units: int) -> None:
        nonlocal budget
        if budget is not None:
            budget -= units
            if budget < 0:
                raise ListingTooBig

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
        try:
            outcome = await in_thread(lambda: run_glob(env, pattern, path, deadline), deadline)
        except (WorkspaceError, SearchError) as exc:
            return error(str(exc))
        except OSError as exc:
            return error(f"glob failed: {exc.strerror or exc}")
        return glob_text(pattern, outcome, clamp(limit, GLOB_LIMIT, 1, MAX_LIMIT))

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
        try:
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
            outcome = await run_grep(env, query)
        except (WorkspaceError, SearchError) as exc:
            return error(str(exc))
        except OSError as exc:
            return error(f"grep failed: {exc.strerror or exc}")
        return grep_text(query, outcome, clamp(limit, GREP_LIMIT, 1, MAX_LIMIT))

    server.add_tool(
        grep, name="grep", title="Search file contents",
        description=(
            "Search file contents with a regular expression (ripgrep when installed). "
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
            try:  # on the event loop first: see LS_INLINE_ENTRIES
                text = run_ls(env, target, ignores, levels, deadline, LS_INLINE_ENTRIES)
            except ListingTooBig:
                text = await in_thread(
                    lambda: run_ls(env, target, ignores, levels, deadline), deadline)
        except (WorkspaceError, SearchError) as exc:
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
