"""Walking a workspace tree the way git sees it: .gitignore rules, `.git` skipped, no escapes.

`Walker(root).files(start)` yields the files under `start` that git would not ignore:

- every `.gitignore` from the workspace root down to each directory applies (nested files,
  `!negation`, `dir/`-only patterns, anchored `/patterns`, `**`), deeper files first, the
  last matching pattern of a file deciding — the matching itself is `pathspec`'s
  `GitIgnoreSpec` (git's wildmatch semantics), not hand-written;
  `.git/info/exclude` of the root applies too;
- an ignored directory is not entered (git cannot re-include files under it either);
- `.git` is never entered;
- symlinks are never followed into directories; a symlink to a file is reported only when
  its real path lies inside the workspace (`include_links=True`), never when it points out.

The walk uses `os.scandir` and stats nothing it does not have to, and goes at most
`MAX_WALK_DEPTH` directories deep. Shell globs (`**/*.py`) are matched by `globmatch.py`.

The .gitignore patterns are the workspace's, and an agent can write one: pathspec matches
them with its RE2 backend (`google-re2`, linear time, no backtracking), never with Python's
`re`, where `a*a*a*…b` against a long name would take exponential time holding the GIL.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pathspec

ALWAYS_SKIPPED = frozenset({".git"})
PATHSPEC_BACKEND: Final = "re2"
"""pathspec's linear-time matcher (see the module docstring)."""
MAX_WALK_DEPTH = 128
"""Directories deeper than this below a walk's start are not entered (a deeper tree would
only exhaust the recursion of the walk)."""


class _WalkStopped(Exception):
    """The walk was stopped (cancelled or out of time): its `stop()` returned true."""


@dataclass(frozen=True, slots=True)
class Layer:
    """The rules of one ignore file: `base` is its directory relative to the walk root."""

    base: str  # "" for the root, else "a/b/"
    spec: pathspec.GitIgnoreSpec


def load_layer(directory: Path, base: str, name: str = ".gitignore") -> Layer | None:
    try:
        with open(directory / name, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    lines = [line for line in lines if line.strip() and not line.startswith("#")]
    if not lines:
        return None
    try:
        spec = pathspec.GitIgnoreSpec.from_lines(lines, backend=PATHSPEC_BACKEND)
    except (ValueError, TypeError):  # a pattern pathspec cannot compile: ignore the file
        return None
    return Layer(base, spec)


def is_ignored(layers: tuple[Layer, ...], rel: str, is_dir: bool) -> bool:
    """Whether `rel` (relative to the walk root, `/`-separated) is ignored by `layers`."""
    for layer in reversed(layers):
        if layer.base:
            if not rel.startswith(layer.base):
                continue
            sub = rel[len(layer.base):]
        else:
            sub = rel
        result = layer.spec.check_file(sub + "/" if is_dir else sub)
        if result.include is not None:
            return bool(result.include)
    return False


@dataclass(slots=True)
class Entry:
    """A file found by the walk."""

    path: str  # absolute
    rel: str  # relative to the walk root (the workspace root), `/`-separated
    name: str
    entry: os.DirEntry[str]


class Walker:
    """Walks directories under `root` (a workspace root) honouring .gitignore.

    `contains(real_path)` decides whether a symlink's target is inside the workspace;
    `stop()` (checked once per directory) returning true ends the walk with `_WalkStopped`.
    """

    def __init__(
        self,
        root: Path,
        contains: Callable[[Path], bool],
        *,
        gitignore: bool = True,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        self.root = root
        self.contains = contains
        self.gitignore = gitignore
        self.stop = stop

    def _rel(self, path: Path) -> str:
        rel = path.relative_to(self.root).as_posix()
        return "" if rel == "." else rel

    def layers_for(self, start: Path) -> tuple[Layer, ...]:
        """The ignore rules that apply at `start`: the root's and every ancestor's."""
        if not self.gitignore:
            return ()
        layers: list[Layer] = []
        exclude = load_layer(self.root / ".git" / "info", "", "exclude")
        if exclude is not None:
            layers.append(exclude)
        directory = self.root
        parts = Path(self._rel(start)).parts if start != self.root else ()
        for i in range(len(parts) + 1):
            if i:
                directory = directory / parts[i - 1]
            base = "/".join(parts[:i]) + "/" if i else ""
            layer = load_layer(directory, base)
            if layer is not None:
                layers.append(layer)
        return tuple(layers)

    def files(
        self,
        start: Path,
        *,
        include_links: bool = True,
        max_depth: int | None = None,
        prune: Callable[[str], bool] | None = None,
    ) -> Iterator[Entry]:
        """Files under the directory `start` (sorted by name within each directory).

        `max_depth` 1 means only `start`'s own files (at most, and by default,
        `MAX_WALK_DEPTH`); `prune(rel_dir)` true skips a directory.
        """
        max_depth = MAX_WALK_DEPTH if max_depth is None else min(max_depth, MAX_WALK_DEPTH)
        layers = self.layers_for(start)
        base = self._rel(start)
        yield from self._walk(str(start), base + "/" if base else "", layers, 1, max_depth,
                              include_links, prune, loaded=True)

    def _walk(
        self,
        directory: str,
        rel_prefix: str,
        layers: tuple[Layer, ...],
        depth: int,
        max_depth: int | None,
        include_links: bool,
        prune: Callable[[str], bool] | None,
        loaded: bool = False,
    ) -> Iterator[Entry]:
        """`loaded`: this directory's .gitignore is already in `layers` (the start)."""
        if self.stop is not None and self.stop():
            raise _WalkStopped
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return  # unreadable or vanished: skipped, like git and ripgrep do
        if self.gitignore and not loaded and any(e.name == ".gitignore" for e in entries):
            layer = load_layer(Path(directory), rel_prefix)
            if layer is not None:
                layers = (*layers, layer)
        subdirs: list[tuple[str, str]] = []
        for e in entries:
            name = e.name
            if name in ALWAYS_SKIPPED:
                continue
            rel = rel_prefix + name
            try:
                if e.is_symlink():
                    if not include_links:
                        continue
                    real = Path(os.path.realpath(e.path))
                    if not self.contains(real) or not real.is_file():
                        continue  # out of the workspace, dangling or a directory: not followed
                    if layers and is_ignored(layers, rel, False):
                        continue
                    yield Entry(e.path, rel, name, e)
                    continue
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if layers and is_ignored(layers, rel, is_dir):
                continue
            if is_dir:
                subdirs.append((e.path, rel))
            elif e.is_file(follow_symlinks=False):
                yield Entry(e.path, rel, name, e)
        if max_depth is not None and depth >= max_depth:
            return
        for path, rel in subdirs:
            if prune is not None and prune(rel):
                continue
            yield from self._walk(path, rel + "/", layers, depth + 1, max_depth,
                                  include_links, prune)
