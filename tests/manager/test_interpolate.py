"""`${VAR}`, `${VAR:-default}` and `$$` in config values."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcpkit.manager.config import ConfigError
from mcpkit.manager.interpolate import escape, interpolate, is_variable_name

WHERE = "~/.config/mcpkit/mcp.json: server 'docs'"
ENV = {"HOME": "/home/ann", "TOKEN": "s3cret", "EMPTY": "", "DOLLARS": "${TOKEN}$$"}


def expand(text: str, environ: dict[str, str] | None = None) -> str:
    result = interpolate(text, ENV if environ is None else environ, WHERE)
    assert isinstance(result, str)
    return result


def test_plain_text_is_unchanged() -> None:
    assert expand("") == ""
    assert expand("no references here") == "no references here"


def test_variables_are_replaced_wherever_they_are() -> None:
    assert expand("${HOME}") == "/home/ann"
    assert expand("${HOME}/bin:${HOME}/.local/bin") == "/home/ann/bin:/home/ann/.local/bin"
    assert expand("Bearer ${TOKEN}") == "Bearer s3cret"
    assert expand("${EMPTY}") == ""


def test_default_is_used_when_unset_or_empty_like_the_shell() -> None:
    assert expand("${MISSING:-fallback}") == "fallback"
    assert expand("${EMPTY:-fallback}") == "fallback"
    assert expand("${TOKEN:-fallback}") == "s3cret"
    assert expand("${MISSING:-}") == ""
    assert expand("x${MISSING:-a b}y") == "xa by"


def test_defaults_may_hold_references_expanded_only_when_used() -> None:
    assert expand("${MISSING:-${HOME}/x}") == "/home/ann/x"
    assert expand("${MISSING:-${ALSO_MISSING:-deep}}") == "deep"
    assert expand("${MISSING:-$$}") == "$"
    # an unset variable in a default that is not used is no error
    assert expand("${TOKEN:-${NOT_SET}}") == "s3cret"


def test_double_dollar_is_a_literal_dollar() -> None:
    assert expand("$$") == "$"
    assert expand("$${HOME}") == "${HOME}"
    assert expand("$$$${HOME}") == "$${HOME}"
    assert expand("$$${HOME}") == "$/home/ann"
    assert expand("price: 5$$") == "price: 5$"


def test_a_lone_dollar_stays() -> None:
    assert expand("$HOME") == "$HOME"
    assert expand("5$") == "5$"
    assert expand("$ {HOME}") == "$ {HOME}"
    assert expand("a$b$") == "a$b$"


def test_substituted_values_are_not_expanded_again() -> None:
    assert expand("${DOLLARS}") == "${TOKEN}$$"


def test_unset_variable_names_the_variable_and_where() -> None:
    with pytest.raises(ConfigError) as caught:
        expand("Bearer ${DOCS_TOKEN}")
    assert str(caught.value) == (
        "~/.config/mcpkit/mcp.json: server 'docs': ${DOCS_TOKEN} is not set "
        "(use ${DOCS_TOKEN:-default} for a default)")


def test_unset_variable_without_where() -> None:
    with pytest.raises(ConfigError, match=r"^\$\{X\} is not set"):
        interpolate("${X}", {}, "")


@pytest.mark.parametrize(("text", "why"), [
    ("${", "a variable name must follow"),
    ("${}", "a variable name must follow"),
    ("${1ABC}", "a variable name must follow"),
    ("${-x}", "a variable name must follow"),
    ("${HOME", "no closing }"),
    ("x ${HOME:-default", "no closing }"),
    ("${HOME:-${TOKEN}", "no closing }"),
    ("${HOME-x}", "expected } or :-"),
    ("${HOME:=x}", "expected } or :-"),
    ("${HO ME}", "expected } or :-"),
])
def test_malformed_references_are_errors(text: str, why: str) -> None:
    with pytest.raises(ConfigError) as caught:
        expand(text)
    message = str(caught.value)
    assert message.startswith(WHERE + ": malformed ")
    assert why in message
    assert "write $$ for a literal $" in message


def test_malformed_excerpt_is_short() -> None:
    with pytest.raises(ConfigError) as caught:
        expand("${HOME" + "x" * 200)
    assert len(str(caught.value)) < len(WHERE) + 150


def test_walks_lists_and_objects_but_not_keys() -> None:
    value = {"command": "${HOME}/bin/server", "args": ["--token", "${TOKEN}", 3],
             "env": {"${TOKEN}": "${TOKEN}"}, "enabled": True, "timeout": 1.5, "none": None,
             "nested": [{"deep": ["${HOME}"]}]}
    assert interpolate(value, ENV, WHERE) == {
        "command": "/home/ann/bin/server", "args": ["--token", "s3cret", 3],
        "env": {"${TOKEN}": "s3cret"}, "enabled": True, "timeout": 1.5, "none": None,
        "nested": [{"deep": ["/home/ann"]}]}


def test_error_in_a_nested_value_is_reported() -> None:
    with pytest.raises(ConfigError, match=r"\$\{NOPE\} is not set"):
        interpolate({"env": {"A": ["${NOPE}"]}}, ENV, WHERE)


def test_input_is_not_modified() -> None:
    value = {"args": ["${HOME}"]}
    interpolate(value, ENV, WHERE)
    assert value == {"args": ["${HOME}"]}


def test_keep_unset_leaves_the_reference_as_written() -> None:
    assert interpolate("a ${NOPE} b", ENV, WHERE, keep_unset=True) == "a ${NOPE} b"
    assert interpolate("${NOPE:-d} ${HOME}", ENV, WHERE, keep_unset=True) == "d /home/ann"
    assert interpolate("${NOPE:-${ALSO}}", ENV, WHERE, keep_unset=True) == "${ALSO}"
    with pytest.raises(ConfigError, match="malformed"):
        interpolate("${NOPE", ENV, WHERE, keep_unset=True)


def test_variable_names() -> None:
    assert is_variable_name("_A1")
    assert is_variable_name("path")
    assert not is_variable_name("1A")
    assert not is_variable_name("A-B")
    assert not is_variable_name("")


@given(st.text())
def test_escape_round_trips(text: str) -> None:
    assert interpolate(escape(text), {}, WHERE) == text
