"""What a remote party sends (WWW-Authenticate and DPoP-Nonce headers, token-endpoint bodies,
token-exchange answers) never raises anything but mcpkit's own errors, whatever it is; and
the WWW-Authenticate grammar itself, case by case."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.auth.assertions import parse_id_jag_response
from mcpkit.auth.challenges import MalformedChallenge, parse_challenges
from mcpkit.auth.dpop import (
    DPoPKey,
    normalize_htu,
    resource_nonce_challenge,
    token_endpoint_nonce_challenge,
)
from mcpkit.errors import InvalidArgument, PeerError

PROOF_KEY = DPoPKey.generate()

# Header-ish text: the grammar's own characters weighted in, so the parser's branches are hit.
GRAMMAR = st.sampled_from([*' \t,="\\', "DPoP", "Bearer", "error", "use_dpop_nonce", "==",
                           "a/b", "\x00", "é", "\r\n"])
HEADER_TEXT = st.one_of(st.text(max_size=200),
                        st.lists(st.one_of(GRAMMAR, st.text(max_size=5)), max_size=40).map(
                            "".join))


@settings(max_examples=400, deadline=None)
@given(HEADER_TEXT)
def test_any_www_authenticate_parses_or_is_malformed(value: str) -> None:
    try:
        challenges = parse_challenges(value)
    except MalformedChallenge:
        return
    for scheme, params in challenges:
        assert scheme == scheme.lower()
        assert all(name == name.lower() for name in params)


@settings(max_examples=300, deadline=None)
@given(st.lists(HEADER_TEXT, max_size=3), st.lists(HEADER_TEXT, max_size=3),
       st.sampled_from([400, 401, 403]))
def test_any_resource_answer_yields_a_nonce_none_or_a_peer_error(
        challenges: list[str], nonces: list[str], status: int) -> None:
    try:
        nonce = resource_nonce_challenge(status, challenges, nonces)
    except PeerError:
        return
    assert nonce is None or (nonce in {n.strip(" \t") for n in nonces} and status == 401)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=200),
                 st.dictionaries(st.text(max_size=10), st.text(max_size=10)).map(
                     lambda d: repr(d).encode()),
                 st.just(b'{"error":"use_dpop_nonce"}')),
       st.lists(HEADER_TEXT, max_size=3))
def test_any_token_endpoint_answer_yields_a_nonce_none_or_a_peer_error(
        body: bytes, nonces: list[str]) -> None:
    try:
        token_endpoint_nonce_challenge(400, body, nonces)
    except PeerError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=300),
                 st.fixed_dictionaries({}, optional={
                     "access_token": st.one_of(st.text(max_size=40), st.integers()),
                     "issued_token_type": st.sampled_from(
                         ["urn:ietf:params:oauth:token-type:id-jag", "x", 3]),
                     "token_type": st.sampled_from(["N_A", "Bearer", None]),
                     "expires_in": st.one_of(st.integers(), st.floats(), st.text(max_size=3)),
                 }).map(lambda d: __import__("json").dumps(d).encode())))
def test_any_token_exchange_answer_is_an_id_jag_or_a_peer_error(body: bytes) -> None:
    try:
        parse_id_jag_response(body)
    except PeerError:
        pass


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=60), st.from_regex(r"https?://[^\s]{0,40}", fullmatch=True)))
def test_any_url_is_normalized_or_refused_as_an_invalid_argument(url: str) -> None:
    try:
        htu = normalize_htu(url)
    except InvalidArgument:
        with pytest.raises(InvalidArgument):
            PROOF_KEY.proof("POST", url)
        return
    assert "?" not in htu and "#" not in htu
    assert PROOF_KEY.proof("POST", url).count(".") == 2


def test_the_challenge_length_is_bounded_and_settable() -> None:
    long_value = 'DPoP error="' + "x" * 9000 + '"'
    with pytest.raises(MalformedChallenge, match="over the limit of 8192"):
        parse_challenges(long_value)
    assert parse_challenges(long_value, max_chars=10000)[0][0] == "dpop"


@pytest.mark.parametrize(("value", "expected"), [
    ('DPoP error="use_dpop_nonce", error_description="x"',
     [("dpop", {"error": "use_dpop_nonce", "error_description": "x"})]),
    ("Basic dXNlcjpwYXNz==, DPoP algs=ES256",
     [("basic", {}), ("dpop", {"algs": "ES256"})]),
    ('Bearer realm="a\\"b\\\\c" , scope="x y"',
     [("bearer", {"realm": 'a"b\\c', "scope": "x y"})]),
    ("Newauth", [("newauth", {})]),
    (", ,Bearer ,", [("bearer", {})]),
    ("", []),
])
def test_challenges_parse_per_rfc_9110(value: str,
                                       expected: list[tuple[str, dict[str, str]]]) -> None:
    assert parse_challenges(value) == expected


@pytest.mark.parametrize("value", [
    "error=x",                          # a parameter before any scheme
    'DPoP error="unterminated',
    "DPoP error=x error=y",             # two parameters without a comma
    "DPoP error=x, ERROR=y",            # a parameter twice (names are case-insensitive)
    'DPoP"',
    "DPoP a=\"\x00\"",                  # a control character in a quoted string
    "Basic abc def",
])
def test_malformed_challenges_are_refused(value: str) -> None:
    with pytest.raises(MalformedChallenge):
        parse_challenges(value)
