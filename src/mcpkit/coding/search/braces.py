"""Brace expansion of caller-supplied globs (`*.{ts,tsx}` -> `*.ts`, `*.tsx`), capped.

A pattern's alternatives multiply: 22 groups of `{a,b}` make 4,194,304 patterns (more than
1.4 GiB once expanded). The expansion here is lazy and stops at `MAX_EXPANSIONS`, so a
hostile pattern costs at most that many small strings before it is refused with
`PatternError`, as it is past `MAX_EXPANDED_CHARS` characters in all; pattern length is
capped first (`MAX_PATTERN_CHARS`), which also bounds the nesting and so the recursion depth.

Semantics (the ones the coding tools always had): `{a,b}` expands at any nesting depth;
a group without a top-level comma (`{a}`, `{}`) and unbalanced braces stay literal; a
backslash keeps the next character from opening or closing a group.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from mcpkit.errors import UsageError

MAX_PATTERN_CHARS = 1024
"""Longest glob (`glob` pattern, `grep` include, `ls` ignore) the tools accept."""
MAX_EXPANSIONS = 256
"""Most patterns one glob may expand to through its `{a,b}` groups."""
MAX_EXPANDED_CHARS = 8192
"""Most characters all of a glob's expansions may add up to: a match costs at most this
times the length of the path (see `globmatch.py`)."""


class PatternError(UsageError, ValueError):
    """A caller's pattern the tools refuse: too long, or expanding to too many patterns
    (the message names the limit and is meant for the model). A usage error, and a
    `ValueError` as before."""


def check_length(pattern: str, what: str = "pattern", limit: int = MAX_PATTERN_CHARS) -> None:
    if len(pattern) > limit:
        raise PatternError(f"{what} is {len(pattern)} characters long; the limit is {limit}")


def expand_braces(pattern: str, limit: int = MAX_EXPANSIONS,
                  max_chars: int = MAX_EXPANDED_CHARS) -> list[str]:
    """Every pattern `pattern` stands for; `PatternError` past `limit` of them or past
    `max_chars` characters in all."""
    check_length(pattern)
    expanded: list[str] = []
    size = 0
    for one in itertools.islice(_expand(pattern), limit + 1):
        expanded.append(one)
        size += len(one)
        if size > max_chars:
            raise PatternError(
                f"pattern {shorten(pattern)!r} expands to more than {max_chars} characters "
                f"through its {{a,b}} groups; the limit is {max_chars}")
    if len(expanded) > limit:
        raise PatternError(
            f"pattern {shorten(pattern)!r} expands to more than {limit} alternatives "
            f"through its {{a,b}} groups; the limit is {limit}")
    return expanded


def shorten(pattern: str, keep: int = 60) -> str:
    return pattern if len(pattern) <= keep else pattern[:keep] + "…"


def _expand(pattern: str) -> Iterator[str]:
    """Lazily, in order: the first group with a top-level comma is split, and each choice is
    expanded again (groups after it, and groups nested in the choice)."""
    group = _first_group(pattern)
    if group is None:
        yield pattern
        return
    start, end, options = group
    head, tail = pattern[:start], pattern[end + 1:]
    for option in options:
        yield from _expand(head + option + tail)


def _first_group(pattern: str) -> tuple[int, int, list[str]] | None:
    """(index of `{`, index of its `}`, the top-level options) of the first balanced group
    that has a top-level comma; None when there is none."""
    depth = 0
    start = -1
    escaped = False
    for i, ch in enumerate(pattern):
        if escaped:
            escaped = False
            continue
        if ch == "\\":
            escaped = True
            continue
        if ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth:
            depth -= 1
            if depth == 0:
                options = _split_options(pattern[start + 1:i])
                if len(options) >= 2:
                    return start, i, options
    return None


def _split_options(inner: str) -> list[str]:
    """`a,{b,c},d` -> ["a", "{b,c}", "d"]: split on commas outside nested groups."""
    options: list[str] = []
    level = 0
    current: list[str] = []
    escaped = False
    for c in inner:
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == "," and level == 0:
            options.append("".join(current))
            current = []
            continue
        elif c == "{":
            level += 1
        elif c == "}":
            level -= 1
        current.append(c)
    options.append("".join(current))
    return options
