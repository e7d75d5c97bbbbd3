"""The `ls` tool: a directory as an indented tree, with the usual clutter (.git,
node_modules, .venv, caches, build output …) and the caller's `ignore` globs left out.

A small tree is listed on the event loop (see `LS_INLINE_ENTRIES`); a bigger one, or one
with costly ignore globs, in a worker thread that stops at `WALK_TIMEOUT_S`. Symlinks are
shown with their target and never followed out of the workspace.
"""

from __future__ import annotations

import functools
import itertools
import operator
import os
from pathlib import Path
from typing import Annotated, Any

from mcpkit.coding.deadline import Deadline, in_thread
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.search.braces import MAX_EXPANDED_CHARS, MAX_EXPANSIONS
from mcpkit.coding.search.common import (
    READ_ONLY,
    WALK_TIMEOUT_S,
    SearchError,
    clamp,
    error,
    text_result,
)
from mcpkit.coding.search.globmatch import GlobSet, PatternError, compile_glob, union
from mcpkit.coding.workspace import Workspace, WorkspaceError
from mcpkit.server.server import Server

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


class _Lister:
    """One `ls` walk: the tree's lines, the entries counted against `LS_MAX_ENTRIES` and the
    directory entries read against `max_scanned` (None: no budget, in a worker thread)."""

    def __init__(self, workspace: Workspace, ignore: list[str], depth: int,
                 deadline: Deadline, max_scanned: int | None) -> None:
        self.workspace = workspace
        self.match = ls_ignore_globs(tuple(ignore)).match
        self.depth = depth
        self.deadline = deadline
        self.budget = max_scanned
        self.lines: list[str] = []
        self.count = 0
        self.stopped = False

    def charge(self, units: int) -> None:
        if self.budget is not None:
            self.budget -= units
            if self.budget < 0:
                raise _ListingTooBig

    def read(self, directory: str) -> list[os.DirEntry[str]]:
        with os.scandir(directory) as it:
            if self.budget is None:
                return list(it)
            entries = list(itertools.islice(it, self.budget + 1))  # never more than allowed
        self.charge(len(entries))
        return entries

    def sorted_entries(self, entries: list[os.DirEntry[str]], rel_prefix: str
                       ) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]] | None:
        """The directories (sort key, name, path) and the other lines (sort key, line) to
        show, sorted; None when the walk must stop."""
        dirs: list[tuple[str, str, str]] = []
        files: list[tuple[str, str]] = []
        match, workspace = self.match, self.workspace
        for e in entries:
            if self.budget is None and self.deadline():  # in a thread: per entry too
                self.stopped = True
                return None
            name = e.name
            if name in _LS_DEFAULT_NAMES or match(name) or (rel_prefix
                                                            and match(rel_prefix + name)):
                continue
            try:
                if e.is_symlink():
                    self.charge(LS_LINK_COST)
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
        return dirs, files

    def walk(self, directory: str, rel_prefix: str, level: int) -> None:
        if self.deadline():
            self.stopped = True
            return
        try:
            entries = self.read(directory)
        except OSError as exc:
            self.lines.append("  " * level + f"({exc.strerror or 'unreadable'})")
            return
        found = self.sorted_entries(entries, rel_prefix)
        if found is None:
            return
        dirs, files = found
        indent = "  " * level
        for _, name, path in dirs:
            if self.count >= LS_MAX_ENTRIES:
                self.stopped = True
                return
            self.lines.append(f"{indent}{name}/")
            self.count += 1
            if level < self.depth:
                self.walk(path, f"{rel_prefix}{name}/", level + 1)
                if self.stopped:
                    return
        room = LS_MAX_ENTRIES - self.count
        self.lines.extend([indent + shown for _, shown in files[:room]])
        self.count += min(room, len(files))
        if len(files) > room:
            self.stopped = True


def run_ls(env: CodingEnv, target: Path, ignore: list[str], depth: int, deadline: Deadline,
           max_scanned: int | None = None) -> str:
    """The tree under `target`; past `max_scanned` directory entries read (a symlink counts
    `LS_LINK_COST`: it is resolved) it raises `_ListingTooBig`."""
    workspace = env.workspace
    lister = _Lister(workspace, ignore, depth, deadline, max_scanned)
    lines = lister.lines
    lines.append((workspace.display(target).rstrip("/") or ".") + "/")
    lister.walk(str(target), "", 1)
    if lister.stopped:
        why = (f"more than {LS_MAX_ENTRIES} entries" if lister.count >= LS_MAX_ENTRIES
               else f"stopped after {WALK_TIMEOUT_S:g} s")
        lines.append(f"(listing cut: {why}; list a subdirectory or use a smaller depth)")
    elif lister.count == 0:
        lines.append("  (empty)")
    return "\n".join(lines)


async def list_tree(env: CodingEnv, target: Path, ignores: list[str], levels: int) -> str:
    """`run_ls` on the event loop when the tree is small, else in a worker thread."""
    deadline = Deadline(WALK_TIMEOUT_S)
    # refused here when there are too many, or one too big
    plain = ls_ignore_globs(tuple(ignores)).plain
    try:  # on the event loop first: see LS_INLINE_ENTRIES
        if not plain:  # caller globs that cost more than a string test: a thread
            raise _ListingTooBig
        return run_ls(env, target, ignores, levels, deadline, LS_INLINE_ENTRIES)
    except _ListingTooBig:
        text: str = await in_thread(
            lambda: run_ls(env, target, ignores, levels, deadline), deadline)
        return text


def register(server: Server, env: CodingEnv) -> None:
    workspace = env.workspace

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
            levels = clamp(depth, LS_DEPTH, 1, LS_MAX_DEPTH)
            text = await list_tree(env, target, list(ignore or ()), levels)
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
