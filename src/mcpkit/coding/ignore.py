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

The walk uses `os.scandir` and stats nothing it does not have to. `glob_regex` translates a
shell glob (`**/*.py`, `src/*.{ts,tsx}`) into a regex over `/`-separated relative paths.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pathspec

ALWAYS_SKIPPED = frozenset({".git"})


class WalkStopped(Exception):
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
        spec = pathspec.GitIgnoreSpec.from_lines(lines)
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
    `stop()` (checked once per directory) returning true ends the walk with `WalkStopped`.
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

        `max_depth` 1 means only `start`'s own files; `prune(rel_dir)` true skips a directory.
        """
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
            raise WalkStopped
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


# --- shell globs -------------------------------------------------------------------------------


def _expand_braces(pattern: str) -> list[str]:
    """`a{b,c}d` -> ["abd", "acd"] (nested braces too); unbalanced braces stay literal."""
    depth = 0
    start = -1
    for i, ch in enumerate(pattern):
        if ch == "\\":
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                inner = pattern[start + 1:i]
                options: list[str] = []
                level = 0
                current = ""
                for c in inner:
                    if c == "," and level == 0:
                        options.append(current)
                        current = ""
                        continue
                    if c == "{":
                        level += 1
                    elif c == "}":
                        level -= 1
                    current += c
                options.append(current)
                if len(options) < 2:
                    continue
                head, tail = pattern[:start], pattern[i + 1:]
                out: list[str] = []
                for option in options:
                    out.extend(_expand_braces(head + option + tail))
                return out
    return [pattern]


def _translate(pattern: str) -> str:
    out: list[str] = []
    segments = pattern.split("/")
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            out.append(".*" if last else "(?:[^/]*/)*")
            continue
        i = 0
        while i < len(segment):
            ch = segment[i]
            if ch == "*":
                while i + 1 < len(segment) and segment[i + 1] == "*":
                    i += 1
                out.append("[^/]*")
            elif ch == "?":
                out.append("[^/]")
            elif ch == "[":
                end = segment.find("]", i + 2)
                if end == -1:
                    out.append(re.escape(ch))
                else:
                    body = segment[i + 1:end]
                    if body.startswith("!"):
                        body = "^" + body[1:]
                    out.append("[" + body.replace("\\", "\\\\") + "]")
                    i = end
            elif ch == "\\" and i + 1 < len(segment):
                i += 1
                out.append(re.escape(segment[i]))
            else:
                out.append(re.escape(ch))
            i += 1
        if not last:
            out.append("/")
    return "".join(out)


def glob_regex(pattern: str, *, ignore_case: bool = False) -> re.Pattern[str]:
    """A regex matching the whole of a `/`-separated relative path against a shell glob."""
    alternatives = [_translate(p) for p in _expand_braces(pattern)]
    body = "|".join(f"(?:{a})" for a in alternatives)
    return re.compile(f"(?s:{body})\\Z", re.IGNORECASE if ignore_case else 0)


def has_magic(segment: str) -> bool:
    return any(ch in segment for ch in "*?[{")


def split_literal_prefix(pattern: str) -> tuple[str, str]:
    """("src/pkg", "**/*.py") for "src/pkg/**/*.py": the leading segments without wildcards."""
    segments = pattern.split("/")
    literal: list[str] = []
    for segment in segments[:-1]:
        if has_magic(segment):
            break
        literal.append(segment)
    rest = segments[len(literal):]
    prefix = "/".join(literal)
    if pattern.startswith("/") and not prefix:
        prefix = "/"
    return prefix, "/".join(rest)


def glob_depth(pattern: str) -> int | None:
    """How many directory levels a glob can reach (None: unbounded, it has `**`)."""
    depths = []
    for p in _expand_braces(pattern):
        if "**" in p:
            return None
        depths.append(p.count("/") + 1)
    return max(depths)
