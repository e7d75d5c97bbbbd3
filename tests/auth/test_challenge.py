"""`WWW-Authenticate` parsing: the Bearer parameters, several challenges, hostile values."""

from __future__ import annotations

import string

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.auth.challenge import MAX_HEADER_CHARS, BearerChallenge, parse_bearer_challenge


def test_reads_the_bearer_parameters() -> None:
    got = parse_bearer_challenge(
        'Bearer error="insufficient_scope", scope="mcp:basic mcp:write", '
        'resource_metadata="https://rs.example/.well-known/oauth-protected-resource/mcp"')
    assert got == BearerChallenge(
        resource_metadata="https://rs.example/.well-known/oauth-protected-resource/mcp",
        scope="mcp:basic mcp:write", error="insufficient_scope")
    assert got.scopes == ["mcp:basic", "mcp:write"]


def test_scheme_is_case_insensitive_and_token_values_are_read() -> None:
    got = parse_bearer_challenge("bearer error=invalid_token, scope=read")
    assert got == BearerChallenge(scope="read", error="invalid_token")


def test_finds_bearer_among_other_challenges() -> None:
    got = parse_bearer_challenge(
        'Basic realm="x", DPoP algs="ES256", Bearer scope="a", Newauth x=y')
    assert got is not None and got.scope == "a"


def test_token68_scheme_before_bearer() -> None:
    got = parse_bearer_challenge('Negotiate abc123==, Bearer scope="s"')
    assert got is not None and got.scope == "s"


def test_escaped_quotes_are_unescaped() -> None:
    got = parse_bearer_challenge(r'Bearer error_description="say \"hi\""')
    assert got is not None and got.error_description == 'say "hi"'


def test_a_bare_bearer_has_no_parameters() -> None:
    assert parse_bearer_challenge("Bearer") == BearerChallenge()


def test_no_bearer_or_malformed_gives_none() -> None:
    assert parse_bearer_challenge(None) is None
    assert parse_bearer_challenge("") is None
    assert parse_bearer_challenge('Basic realm="x"') is None
    assert parse_bearer_challenge('Bearer scope="unterminated') is None
    assert parse_bearer_challenge('Bearer scope="a", scope="b"') is None  # RFC 6750 §3
    assert parse_bearer_challenge("=== garbage") is None


def test_over_long_headers_are_ignored() -> None:
    value = 'Bearer scope="' + "a" * MAX_HEADER_CHARS + '"'
    assert parse_bearer_challenge(value) is None
    assert parse_bearer_challenge('Bearer scope="abc"', max_chars=5) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_parses_or_gives_none(value: str) -> None:
    got = parse_bearer_challenge(value)
    assert got is None or isinstance(got, BearerChallenge)


_SAFE = st.text(string.ascii_letters + string.digits + " :/._-=,", max_size=40)


@settings(max_examples=200, deadline=None)
@given(_SAFE, _SAFE, st.sampled_from(["", "Basic realm=\"r\", ", "DPoP algs=\"ES256\", "]))
def test_quoted_values_round_trip(scope: str, metadata: str, before: str) -> None:
    value = f'{before}Bearer scope="{scope}", resource_metadata="{metadata}"'
    got = parse_bearer_challenge(value)
    assert got is not None
    assert (got.scope, got.resource_metadata) == (scope, metadata)


def test_pathological_input_is_linear() -> None:
    # Backtracking regexes blow up on long runs of escapes or separators; these return.
    assert parse_bearer_challenge('Bearer a="' + "\\\\" * 3000) is None
    assert parse_bearer_challenge("Bearer " + ", " * 3000) == BearerChallenge()
