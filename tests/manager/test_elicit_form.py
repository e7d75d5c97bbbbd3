"""The elicitation form `mcpkit call` shows: what a server may put in it is bounded, and
nothing it writes reaches the terminal as a control sequence (property-based)."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.manager.elicit_form import FormLimits, check, clean, parse_answer, parse_form
from mcpkit.protocol.errors import McpError

LIMITS = FormLimits()


@given(st.text(), st.integers(min_value=1, max_value=300))
def test_cleaned_text_has_no_control_characters_and_is_bounded(text: str, limit: int) -> None:
    shown = clean(text, limit)
    assert len(shown) <= limit
    assert all(unicodedata.category(c) not in ("Cc", "Cf") for c in shown)


@given(st.lists(st.sampled_from(["\x1b[31m", "\x1b]0;title\x07", "\x1b]8;;http://x\x1b\\",
                                 "\x1bP1$r\x1b\\", "\x9b2J", "\u202e", "ok", "\n", "é"])))
def test_escape_sequences_leave_no_trace(parts: list[str]) -> None:
    shown = clean("".join(parts), 10_000, lines=True)
    assert shown == "".join(p for p in parts if p in ("ok", "\n", "é"))


def test_forms_are_bounded_and_primitive_only() -> None:
    many = {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(33)}}
    with pytest.raises(McpError, match="33 fields; this client shows at most 32"):
        parse_form(many, LIMITS)
    nested = {"type": "object", "properties": {"x": {"type": "object"}}}
    with pytest.raises(McpError, match="primitive types only"):
        parse_form(nested, LIMITS)
    choices = {"type": "object", "properties": {
        "x": {"type": "string", "enum": [str(i) for i in range(101)]}}}
    with pytest.raises(McpError, match="offers 101 choices"):
        parse_form(choices, LIMITS)


FORM = {"type": "object", "required": ["n"], "properties": {
    "n": {"type": "integer", "minimum": 1, "maximum": 9},
    "tags": {"type": "array", "items": {"anyOf": [{"const": "a", "title": "Alpha"},
                                                  {"const": "b", "title": "Beta"}]},
             "maxItems": 1},
    "old": {"type": "string", "enum": ["x", "y"], "enumNames": ["Ex", "Why"]},
    "when": {"type": "string", "format": "date", "default": "not a date"},
}}


def test_typed_answers_follow_the_schema() -> None:
    n, tags, old, when = parse_form(FORM, LIMITS)
    assert (n.required, tags.required) == (True, False)
    assert when.default is None  # a default that breaks its own schema is not offered
    assert parse_answer(n, " 3 ", LIMITS) == 3
    assert parse_answer(tags, "Beta", LIMITS) == ["b"]
    assert parse_answer(old, "Why", LIMITS) == "y" and parse_answer(old, "1", LIMITS) == "x"
    assert parse_answer(when, "2026-01-31", LIMITS) == "2026-01-31"
    for fld, text, problem in ((n, "10", "at most 9"), (n, "2.5", "whole number"),
                               (tags, "a,b", "at most 1 choices"), (when, "31/01", "ISO 8601"),
                               (n, "9" * 5000, "at most 4096 characters")):
        with pytest.raises(ValueError, match=problem):
            parse_answer(fld, text, LIMITS)


@given(st.integers(min_value=1, max_value=9) | st.booleans() | st.text(max_size=5))
def test_given_values_are_checked_like_typed_ones(value: Any) -> None:
    n = parse_form(FORM, LIMITS)[0]
    ok = isinstance(value, int) and not isinstance(value, bool)
    if ok:
        assert check(n, value) == value
    else:
        with pytest.raises(ValueError):
            check(n, value)
