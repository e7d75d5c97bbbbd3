"""DPoP (RFC 9449): proofs verified with PyJWT (an implementation independent of the joserfc
that signs them), the RFC's own vectors, htu normalization, and the nonce challenges."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from typing import Any

import jwt as pyjwt
import pytest

from mcpkit.auth.challenges import MalformedChallenge
from mcpkit.auth.dpop import (
    DEFAULT_MAX_NONCE_CHARS,
    DPoPKey,
    InvalidDPoPNonce,
    access_token_hash,
    authorization_header,
    is_dpop_token_type,
    normalize_htu,
    resource_nonce_challenge,
    token_endpoint_nonce_challenge,
)
from mcpkit.errors import InvalidArgument, PeerError


@pytest.fixture(scope="module")
def key() -> DPoPKey:
    return DPoPKey.generate()


def verified(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(header, claims) of a proof, after PyJWT checked its signature against the public JWK
    the proof itself carries (what a server does, RFC 9449 §4.3)."""
    header = pyjwt.get_unverified_header(proof)
    public_key = pyjwt.PyJWK(header["jwk"], algorithm="ES256").key
    claims = pyjwt.decode(proof, public_key, algorithms=["ES256"])
    return header, claims


def test_a_proof_verifies_against_its_public_jwk_with_the_rfc_9449_claims(
        key: DPoPKey) -> None:
    before = int(time.time())
    header, claims = verified(key.proof("POST", "https://as.example/token"))
    assert header["typ"] == "dpop+jwt"
    assert header["alg"] == "ES256"
    assert header["jwk"] == key.public_jwk
    assert set(claims) == {"jti", "htm", "htu", "iat"}  # no nonce, no ath unless given
    assert claims["htm"] == "POST"
    assert claims["htu"] == "https://as.example/token"
    assert before <= claims["iat"] <= int(time.time())


def test_the_header_jwk_is_public_only(key: DPoPKey) -> None:
    header, _ = verified(key.proof("GET", "https://rs.example/mcp"))
    assert set(header["jwk"]) == {"kty", "crv", "x", "y"}
    assert header["jwk"]["kty"] == "EC" and header["jwk"]["crv"] == "P-256"
    for private_member in ("d", "p", "q", "dp", "dq", "qi", "k"):
        assert private_member not in header["jwk"]


def test_every_proof_has_a_fresh_jti(key: DPoPKey) -> None:
    jtis = [verified(key.proof("POST", "https://rs.example/mcp"))[1]["jti"] for _ in range(50)]
    assert len(set(jtis)) == 50
    assert all(len(jti) >= 22 for jti in jtis)  # at least 128 bits of randomness


def test_nonce_and_ath_are_carried_when_given(key: DPoPKey) -> None:
    token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
    _, claims = verified(key.proof("POST", "https://rs.example/mcp", nonce="eyJ7S_zG.eyJH0-Z",
                                   access_token=token))
    assert claims["nonce"] == "eyJ7S_zG.eyJH0-Z"
    assert claims["ath"] == access_token_hash(token)


def test_ath_matches_the_rfc_9449_example() -> None:
    # RFC 9449 §7.1, Figures 12 and 13: this access token and its `ath`.
    token = "Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU"
    assert access_token_hash(token) == "fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo"


def test_jkt_is_the_rfc_7638_thumbprint_of_the_public_jwk(key: DPoPKey) -> None:
    # RFC 7638 §3.2: SHA-256 over the required members, lexicographic order, no whitespace.
    jwk = key.public_jwk
    canonical = json.dumps({name: jwk[name] for name in ("crv", "kty", "x", "y")},
                           separators=(",", ":"), sort_keys=True)
    expected = base64.urlsafe_b64encode(hashlib.sha256(canonical.encode()).digest())
    assert key.jkt == expected.rstrip(b"=").decode()


def test_the_thumbprint_library_call_reproduces_rfc_7638s_example() -> None:
    # RFC 7638 §3.1: the RSA key of RFC 7517 Appendix A.1 and its thumbprint; the same
    # joserfc call computes `jkt` and the private_key_jwt key's thumbprint.
    from joserfc.jwk import RSAKey
    example = RSAKey.import_key({
        "kty": "RSA", "e": "AQAB", "alg": "RS256", "kid": "2011-04-29",
        "n": "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6t"
             "Soc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-"
             "65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qN"
             "Lyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awa"
             "pJzKnqDKgw"})
    assert example.thumbprint() == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


def test_a_key_survives_a_pem_round_trip_with_its_thumbprint(key: DPoPKey) -> None:
    again = DPoPKey.from_pem(key.private_pem())
    assert again.jkt == key.jkt
    _, claims = verified(again.proof("GET", "https://rs.example/"))
    assert claims["htm"] == "GET"


def test_a_bad_pem_is_refused_without_quoting_it() -> None:
    secret_looking = "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbA==\n-----END"
    with pytest.raises(InvalidArgument) as caught:
        DPoPKey.from_pem(secret_looking)
    assert "c2VjcmV0" not in str(caught.value)
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_repr_shows_the_thumbprint_and_no_key_material(key: DPoPKey) -> None:
    text = repr(key)
    assert key.jkt in text
    private_pem = key.private_pem().decode()
    body = "".join(private_pem.splitlines()[1:-1])
    assert body[:40] not in text


@pytest.mark.parametrize(("url", "htu"), [
    ("https://as.example/token?x=1#frag", "https://as.example/token"),
    ("HTTPS://AS.Example:443/token", "https://as.example/token"),
    ("http://as.example:80/token", "http://as.example/token"),
    ("http://as.example:8080/token", "http://as.example:8080/token"),
    ("https://as.example", "https://as.example/"),
    ("https://as.example?x", "https://as.example/"),
    ("https://as.example/a%7eb%2fc%2Fd", "https://as.example/a~b%2Fc%2Fd"),
    ("http://[::1]:3000/mcp", "http://[::1]:3000/mcp"),
    ("http://127.0.0.1:41234/mcp/", "http://127.0.0.1:41234/mcp/"),
])
def test_htu_is_normalized_without_query_or_fragment(url: str, htu: str) -> None:
    assert normalize_htu(url) == htu


@pytest.mark.parametrize("url", [
    "ftp://as.example/token", "/token", "https://", "https://user:pw@as.example/token",
    "https://as.example:99999/token", "not a url", "", "http://as.example/\ud800",
    "http://é.example/token", "http://as.example/a b",
])
def test_a_url_that_is_no_http_target_is_refused(url: str) -> None:
    with pytest.raises(InvalidArgument):
        normalize_htu(url)


@pytest.mark.parametrize("method", ["", "PO ST", "GET\r\n", "X" * 33])
def test_a_bad_method_is_refused(key: DPoPKey, method: str) -> None:
    with pytest.raises(InvalidArgument):
        key.proof(method, "https://as.example/token")


def test_the_authorization_header_uses_the_dpop_scheme() -> None:
    assert authorization_header("eyJ.abc.def") == "DPoP eyJ.abc.def"
    assert is_dpop_token_type("DPoP") and is_dpop_token_type("dpop")
    assert not is_dpop_token_type("Bearer")


@pytest.mark.parametrize("token", ["", "has space", "new\nline", "é", "x" * 16385])
def test_a_token_unfit_for_a_header_is_refused_without_quoting_it(token: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        authorization_header(token)
    if token:
        assert token not in str(caught.value)


# --- nonce challenges ---------------------------------------------------------------------

USE_NONCE_BODY = b'{"error":"use_dpop_nonce","error_description":"need a nonce"}'


def test_the_token_endpoint_nonce_error_yields_the_new_nonce() -> None:
    # RFC 9449 §8's example: a 400 with use_dpop_nonce and the nonce in DPoP-Nonce.
    assert token_endpoint_nonce_challenge(400, USE_NONCE_BODY, ["eyJ7S_zG.eyJH0-Z"]) == (
        "eyJ7S_zG.eyJH0-Z")


@pytest.mark.parametrize(("status", "body"), [
    (400, b'{"error":"invalid_grant"}'),
    (401, USE_NONCE_BODY),
    (200, USE_NONCE_BODY),
    (400, b"use_dpop_nonce"),
    (400, b"[]"),
    (400, b"\xff\xfe"),
    (400, b"[" * 100000),
])
def test_other_token_endpoint_answers_are_no_nonce_challenge(status: int, body: bytes) -> None:
    assert token_endpoint_nonce_challenge(status, body, ["n"]) is None


@pytest.mark.parametrize("headers", [[], ["a", "b"], [""], ['bad"quote'], ["sp ace"],
                                     ["x" * (DEFAULT_MAX_NONCE_CHARS + 1)]])
def test_a_nonce_challenge_without_one_usable_nonce_is_a_peer_error(
        headers: list[str]) -> None:
    with pytest.raises(InvalidDPoPNonce):
        token_endpoint_nonce_challenge(400, USE_NONCE_BODY, headers)
    with pytest.raises(InvalidDPoPNonce):
        resource_nonce_challenge(401, ['DPoP error="use_dpop_nonce"'], headers)
    assert issubclass(InvalidDPoPNonce, PeerError)


def test_the_nonce_limit_is_settable() -> None:
    assert token_endpoint_nonce_challenge(400, USE_NONCE_BODY, ["abcdef"],
                                          max_nonce_chars=6) == "abcdef"
    with pytest.raises(InvalidDPoPNonce, match="over the limit of 5"):
        token_endpoint_nonce_challenge(400, USE_NONCE_BODY, ["abcdef"], max_nonce_chars=5)


def test_the_resource_nonce_challenge_yields_the_new_nonce() -> None:
    # The conformance mock's answer, and RFC 9449 §9's example.
    challenge = ('DPoP error="use_dpop_nonce", '
                 'resource_metadata="http://localhost:1/.well-known/oauth-protected-resource"')
    assert resource_nonce_challenge(401, [challenge], ["conformance-rs-dpop-nonce"]) == (
        "conformance-rs-dpop-nonce")
    rfc_example = ('DPoP error="use_dpop_nonce", error_description="Resource server requires '
                   'nonce in DPoP proof"')
    assert resource_nonce_challenge(401, [rfc_example], ["eyJ7S_zG.eyJH0-Z"]) == (
        "eyJ7S_zG.eyJH0-Z")
    both = ['Bearer realm="x"', 'dpop algs="ES256", ERROR=use_dpop_nonce']
    assert resource_nonce_challenge(401, both, ["n1"]) == "n1"


@pytest.mark.parametrize(("status", "challenges"), [
    (401, ['DPoP error="invalid_token"']),
    (401, ['Bearer error="use_dpop_nonce"']),
    (401, []),
    (403, ['DPoP error="use_dpop_nonce"']),
])
def test_other_resource_answers_are_no_nonce_challenge(status: int,
                                                       challenges: list[str]) -> None:
    assert resource_nonce_challenge(status, challenges, ["n"]) is None


def test_a_malformed_resource_challenge_is_a_peer_error() -> None:
    with pytest.raises(MalformedChallenge) as caught:
        resource_nonce_challenge(401, ['DPoP error="use_dpop_nonce'], ["n"])
    assert isinstance(caught.value, PeerError)
