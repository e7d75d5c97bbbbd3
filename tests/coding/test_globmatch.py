"""The linear glob matcher, the capped brace expansion and the bounded line splitter, checked
against independent references on small random inputs (hypothesis), plus the hostile shapes
that blew up the regex translation, timed by step counts rather than clocks."""

from __future__ import annotations

import fnmatch
import functools
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.coding.child_lines import OVERSIZED_PREFIX, LineSplitter
from mcpkit.coding.search import braces, globmatch
from mcpkit.coding.search.braces import PatternError, expand_braces
from mcpkit.coding.search.globmatch import Glob, compile_glob, parse_segment

# --- one segment against fnmatch ---------------------------------------------------------------

# `^` is left out: fnmatch takes `[^x]` literally where git and shells (and this matcher) negate;
# `/` and `\\` are left out: fnmatch knows no path segments and no escapes.
SEGMENT_PATTERN = st.text(alphabet="ab*?[]!-", max_size=8)
NAME = st.text(alphabet="ab-!]", max_size=8)


@settings(max_examples=400, deadline=None)
@given(SEGMENT_PATTERN, NAME)
def test_segment_matching_agrees_with_fnmatch(pattern: str, name: str) -> None:
    assert globmatch.match_tokens(parse_segment(pattern), name) == fnmatch.fnmatchcase(
        name, pattern), (pattern, name)


@settings(max_examples=300, deadline=None)
@given(SEGMENT_PATTERN, NAME)
def test_segment_fast_paths_agree_with_the_general_matcher(pattern: str, name: str) -> None:
    matcher, _ = globmatch.segment_matcher(pattern)
    assert matcher(name) == globmatch.match_tokens(parse_segment(pattern), name)


def test_caret_negates_like_git() -> None:
    assert compile_glob("[^a]b").match("cb") and not compile_glob("[^a]b").match("ab")
    assert compile_glob(r"\*x").match("*x") and not compile_glob(r"\*x").match("ax")


# --- whole paths against a naive reference --------------------------------------------------


def reference_match(pattern: str, path: str) -> bool:
    """Segment by segment, by plain recursion (exponential, fine for tiny inputs): `**` takes
    any number of segments (a trailing one at least one), other segments go to fnmatch."""
    parts = pattern.split("/")
    if parts[-1] == "**":
        parts.append("*")
    names = path.split("/")

    @functools.cache
    def go(p: int, n: int) -> bool:
        if p == len(parts):
            return n == len(names)
        if parts[p] == "**":
            return any(go(p + 1, k) for k in range(n, len(names) + 1))
        return n < len(names) and fnmatch.fnmatchcase(names[n], parts[p]) and go(p + 1, n + 1)

    return go(0, 0)


SEGMENT = st.one_of(st.just("**"), st.text(alphabet="ab*?[]!", min_size=1, max_size=4))
PATH_PATTERN = st.lists(SEGMENT, min_size=1, max_size=4).map("/".join)
PATH = st.lists(st.text(alphabet="ab", min_size=1, max_size=4), min_size=1,
                max_size=5).map("/".join)


@settings(max_examples=400, deadline=None)
@given(PATH_PATTERN, PATH)
def test_path_matching_agrees_with_the_reference(pattern: str, path: str) -> None:
    assert Glob(pattern).match(path) == reference_match(pattern, path), (pattern, path)


def test_the_usual_globs() -> None:
    cases = {
        "**/*.py": (["a.py", "x/y/a.py"], ["a.pyc", "x/a.txt"]),
        "*.py": (["a.py"], ["x/a.py"]),
        "src/**": (["src/a", "src/a/b"], ["src", "lib/a"]),
        "src/**/test_*.py": (["src/test_a.py", "src/x/y/test_b.py"], ["src/x/a_test.py"]),
        "*.{ts,tsx}": (["a.ts", "b.tsx"], ["a.js", "a.t"]),
        "**": (["a", "a/b"], []),
    }
    for pattern, (hits, misses) in cases.items():
        matcher = compile_glob(pattern)
        assert all(matcher.match(p) for p in hits), pattern
        assert not any(matcher.match(p) for p in misses), pattern


class CountingName(str):
    """A name that counts how many characters the matcher reads from it."""

    reads = 0

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        CountingName.reads += 1
        return str.__getitem__(self, key)


@pytest.mark.parametrize("pattern", ["a*" * 30 + "b", "*" * 1000 + "x", "*a" * 200 + "?b"])
def test_hostile_globs_cost_at_most_pattern_times_name(pattern: str) -> None:
    name = CountingName("a" * 300)
    CountingName.reads = 0
    assert not globmatch.match_tokens(parse_segment(pattern), name)
    tokens = len(parse_segment(pattern))
    assert CountingName.reads <= (tokens + 1) * (len(name) + 1)


# --- braces ----------------------------------------------------------------------------------

LITERAL = st.text(alphabet="ab*", max_size=2)


@st.composite
def brace_tree(draw: st.DrawFn, depth: int = 2) -> tuple[str, list[str]]:
    """A pattern and its expansion, built together: a sequence of literals and groups of two
    or more alternatives (each alternative itself such a sequence)."""
    pattern: list[str] = []
    expansions = [""]
    for _ in range(draw(st.integers(0, 3))):
        if depth > 0 and draw(st.booleans()):
            options = draw(st.lists(brace_tree(depth - 1), min_size=2, max_size=3))
            pattern.append("{" + ",".join(p for p, _ in options) + "}")
            choices = [e for _, exp in options for e in exp]
        else:
            text = draw(LITERAL)
            pattern.append(text)
            choices = [text]
        expansions = [a + b for a, b in itertools.product(expansions, choices)]
    return "".join(pattern), expansions


@settings(max_examples=300, deadline=None)
@given(brace_tree())
def test_brace_expansion_agrees_with_the_tree_it_came_from(case: tuple[str, list[str]]) -> None:
    pattern, expected = case
    if len(expected) > braces.MAX_EXPANSIONS:
        with pytest.raises(PatternError):
            expand_braces(pattern)
    else:
        assert expand_braces(pattern) == expected


def test_literal_braces_stay() -> None:
    assert expand_braces("{a}") == ["{a}"]
    assert expand_braces("{a,b") == ["{a,b"]
    assert expand_braces(r"\{a,b}") == [r"\{a,b}"]
    assert expand_braces("x{}y") == ["x{}y"]


def test_brace_bombs_are_refused_with_the_limit() -> None:
    with pytest.raises(PatternError, match=f"the limit is {braces.MAX_EXPANSIONS}"):
        expand_braces("{a,b}" * 22)
    with pytest.raises(PatternError, match=f"the limit is {braces.MAX_EXPANSIONS}"):
        expand_braces("{" + ",".join("abcdefghijklmnopq") + "}" * 1 + "{1,2,3,4,5,6,7,8,9,0}" * 2)
    with pytest.raises(PatternError, match=f"the limit is {braces.MAX_PATTERN_CHARS}"):
        compile_glob("a" * (braces.MAX_PATTERN_CHARS + 1))
    assert len(expand_braces("{a,b}" * 8)) == 256  # exactly at the limit
    with pytest.raises(PatternError, match=f"the limit is {braces.MAX_EXPANDED_CHARS}"):
        expand_braces("a" * 900 + "{b,c}" * 5)  # 32 patterns of 905 characters


# --- the line splitter ------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40), max_size=8), st.data())
def test_line_splitter_agrees_with_split(lines: list[bytes], data: st.DataObject) -> None:
    lines = [line.replace(b"\n", b"") for line in lines]
    stream = b"".join(line + b"\n" for line in lines)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    got: list[bytes] = []
    big: list[bytes] = []
    cap = 20
    splitter = LineSplitter(got.append, big.append, max_line_bytes=cap)
    for start, end in itertools.pairwise([0, *cuts, len(stream)]):
        splitter.feed(stream[start:end])
    splitter.close()
    assert got == [line for line in lines if line and len(line) <= cap]
    # an oversized line is reported once, as soon as it passes the cap: a prefix of it
    oversized = [line for line in lines if len(line) > cap]
    assert len(big) == len(oversized)
    for prefix, line in zip(big, oversized, strict=True):
        assert line.startswith(prefix) and cap < len(prefix) <= OVERSIZED_PREFIX
