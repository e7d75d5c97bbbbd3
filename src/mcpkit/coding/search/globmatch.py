"""Shell globs over `/`-separated relative paths, matched in linear time (no regexes).

A glob translated to a backtracking regex (`a*a*a*…b` -> `a[^/]*a[^/]*…b`) can take
exponential time on a long name, and Python's `re` holds the GIL while it does, so one
pattern froze the whole server. Here matching is the classic two-pointer wildcard algorithm,
used at two levels:

- within a path segment: `*` (any run of characters), `?` (one character), `[abc]`,
  `[a-z]`, `[!x]`/`[^x]` (one character of / not of a set), `\\x` (a literal x);
- over the segments: a whole `**` segment matches any number of segments (a trailing `**`
  at least one: `a/**` is what lies below `a`), every other segment exactly one.

Each mismatch after a star only moves that star's start one step on, so a match costs at
most O(len(pattern) * len(path)) steps, whatever the pattern. `{a,b}` groups are expanded
first, capped (see `braces.py`).

Character classes follow `fnmatch` (a `]` right after `[` or `[!` is a member; a `-` at
either end is literal; a range whose ends are reversed is empty; a `[` without a closing
`]` is literal), except that `^` negates like `!`, as in git and shells.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from mcpkit.coding.search.braces import PatternError, check_length, expand_braces

__all__ = ["CharClass", "Glob", "GlobSet", "PatternError", "compile_glob", "glob_depth",
           "has_magic", "match_tokens", "split_literal_prefix", "union"]

GLOBSTAR = "**"


class _Star:
    """`*` inside a segment: any run of characters."""

    __slots__ = ()


class _AnyChar:
    """`?`: exactly one character."""

    __slots__ = ()


STAR = _Star()
ANY_CHAR = _AnyChar()


@dataclass(frozen=True, slots=True)
class CharClass:
    """`[...]`: one character in (or, `negated`, not in) `chars` or one of `ranges`."""

    chars: frozenset[str]
    ranges: tuple[tuple[str, str], ...]
    negated: bool

    def __call__(self, ch: str) -> bool:
        hit = ch in self.chars or any(lo <= ch <= hi for lo, hi in self.ranges)
        return hit != self.negated


Token = str | _Star | _AnyChar | CharClass
"""A literal character, `*`, `?` or a class."""


def parse_class(segment: str, i: int) -> tuple[CharClass, int] | None:
    """The class opening at `segment[i] == "["` and the index after its `]`; None when it
    has no closing `]` (the `[` is then a literal)."""
    j = i + 1
    negated = j < len(segment) and segment[j] in "!^"
    if negated:
        j += 1
    first = j
    if j < len(segment) and segment[j] == "]":
        j += 1  # a `]` first is a member, not the end
    close = segment.find("]", j)
    if close == -1:
        return None
    body = segment[first:close]
    chars: set[str] = set()
    ranges: list[tuple[str, str]] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            ranges.append((body[k], body[k + 2]))  # empty when reversed: never matches
            k += 3
        else:
            chars.add(body[k])
            k += 1
    return CharClass(frozenset(chars), tuple(ranges), negated), close + 1


def parse_segment(segment: str) -> tuple[Token, ...]:
    tokens: list[Token] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            if not tokens or tokens[-1] is not STAR:  # a run of stars is one star
                tokens.append(STAR)
            i += 1
        elif ch == "?":
            tokens.append(ANY_CHAR)
            i += 1
        elif ch == "[" and (parsed := parse_class(segment, i)) is not None:
            tokens.append(parsed[0])
            i = parsed[1]
        elif ch == "\\" and i + 1 < len(segment):
            tokens.append(segment[i + 1])
            i += 2
        else:
            tokens.append(ch)
            i += 1
    return tuple(tokens)


def _token_matches(token: Token, ch: str) -> bool:
    if isinstance(token, str):
        return token == ch
    if token is ANY_CHAR:
        return True
    assert isinstance(token, CharClass)
    return token(ch)


_Item = TypeVar("_Item")
_Subject = TypeVar("_Subject")


def match_tokens(tokens: Sequence[Token], text: str) -> bool:
    """Whether `tokens` match all of `text` (O(len(tokens) * len(text)))."""
    return _two_pointer_match(tokens, text, STAR, _token_matches)


def _two_pointer_match(items: Sequence[_Item], subjects: Sequence[_Subject], star: object,
                       accepts: Callable[[_Item, _Subject], bool]) -> bool:
    """Whether `items` match all of `subjects`, where the item `star` matches any run of
    subjects and `accepts(item, subject)` says whether another item matches one subject:
    two pointers, backing up only to the last star (O(len(items) * len(subjects))).
    Characters against a segment's tokens, and segments against a glob's parts (`**`)."""
    t = i = 0
    last_star = -1  # index of the last star seen, -1 before any
    resume = 0  # where in `subjects` that star's match currently ends
    count = len(items)
    while i < len(subjects):
        if t < count:
            item = items[t]
            if item is star:
                last_star, resume = t, i
                t += 1
                continue
            if accepts(item, subjects[i]):
                t += 1
                i += 1
                continue
        if last_star < 0:
            return False
        resume += 1  # the star takes one more subject; retry the rest after it
        t, i = last_star + 1, resume
    while t < count and items[t] is star:
        t += 1
    return t == count


SegmentMatcher = Callable[[str], bool]


def segment_matcher(segment: str) -> tuple[SegmentMatcher, bool]:
    """A predicate for one path segment, and whether it is a plain string test: the common
    shapes (`name`, `*`, `*.py`, `test_*`, `a*b`) are, the rest get the general matcher."""
    tokens = parse_segment(segment)
    if all(isinstance(t, str) for t in tokens):
        literal = "".join(t for t in tokens if isinstance(t, str))
        return literal.__eq__, True
    stars = [k for k, t in enumerate(tokens) if t is STAR]
    if len(stars) == 1 and all(isinstance(t, str) or t is STAR for t in tokens):
        k = stars[0]
        head = "".join(t for t in tokens[:k] if isinstance(t, str))
        tail = "".join(t for t in tokens[k + 1:] if isinstance(t, str))
        least = len(head) + len(tail)
        return (lambda name: (len(name) >= least and name.startswith(head)
                              and name.endswith(tail))), True
    return (lambda name: match_tokens(tokens, name)), False


class Glob:
    """One glob without `{}` groups, matched against `/`-separated relative paths."""

    __slots__ = ("parts", "pattern", "plain")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        segments = pattern.split("/")
        if segments[-1] == GLOBSTAR:
            segments.append("*")  # `a/**` names what is below `a`: one segment at least
        parts: list[SegmentMatcher | None] = []  # None: `**`
        self.plain = True
        """No `**` and only plain string tests: a match costs O(len(path))."""
        for segment in segments:
            if segment == GLOBSTAR:
                self.plain = False
                if not parts or parts[-1] is not None:  # `**/**` is one `**`
                    parts.append(None)
            else:
                matcher, plain = segment_matcher(segment)
                self.plain = self.plain and plain
                parts.append(matcher)
        self.parts = tuple(parts)

    def match(self, path: str) -> bool:
        """The two-pointer algorithm over segments: `**` (None) is the star."""
        return _two_pointer_match(self.parts, path.split("/"), None, _part_accepts)


def _part_accepts(part: SegmentMatcher | None, name: str) -> bool:
    assert part is not None  # the star is never asked
    return part(name)


class GlobSet:
    """A glob with its `{a,b}` groups expanded (capped): a path matches if any does."""

    __slots__ = ("globs", "pattern")

    def __init__(self, globs: Sequence[Glob], pattern: str) -> None:
        self.globs = tuple(globs)
        self.pattern = pattern

    def match(self, path: str) -> bool:
        return any(g.match(path) for g in self.globs)

    @property
    def plain(self) -> bool:
        return all(g.plain for g in self.globs)


def compile_glob(pattern: str) -> GlobSet:
    """`PatternError` when the pattern is too long or expands to too many alternatives."""
    return GlobSet([Glob(p) for p in expand_braces(pattern)], pattern)


def union(sets: Sequence[GlobSet]) -> GlobSet:
    return GlobSet([g for s in sets for g in s.globs], "|".join(s.pattern for s in sets))


def has_magic(segment: str) -> bool:
    return any(ch in segment for ch in "*?[{")


def split_literal_prefix(pattern: str) -> tuple[str, str]:
    """("src/pkg", "**/*.py") for "src/pkg/**/*.py": the leading segments without wildcards."""
    check_length(pattern)
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
    for p in expand_braces(pattern):
        if GLOBSTAR in p:
            return None
        depths.append(p.count("/") + 1)
    return max(depths)

