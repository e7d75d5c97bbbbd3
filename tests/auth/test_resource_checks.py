"""The resource server's pure checks (no IO): RFC 9068 JWT access tokens, RFC 7662
introspection answers, RFC 9449 DPoP proofs at a resource, and the `WWW-Authenticate` and
RFC 9728 documents a resource sends. Every refusal is an InvalidToken whose description names
the check and never the token; any input whatsoever gives AuthInfo or InvalidToken."""

from __future__ import annotations

import base64
import json
import time
from dataclasses import dataclass
from typing import Any

import jwt as pyjwt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joserfc import jwt
from joserfc.jwk import ECKey, OctKey
from tests.auth.resource_tokens import ISSUER, RESOURCE, Signer

from mcpkit.auth.access_token import (
    AccessTokenPolicy,
    access_token_info,
    unverified_header,
    verified_claims,
)
from mcpkit.auth.challenges import parse_challenges
from mcpkit.auth.dpop import DPoPKey, access_token_hash
from mcpkit.auth.dpop_proof import DPoPPolicy, check_nonce, check_presentation, check_proof
from mcpkit.auth.introspection import IntrospectionPolicy, introspection_info
from mcpkit.auth.resource import (
    AuthInfo,
    DPoPNonceRequired,
    InvalidDPoPProof,
    InvalidToken,
    TokenRequest,
    VerifierUnavailable,
    challenge_header,
    presented_token,
    protected_resource_metadata,
)
from mcpkit.errors import InvalidArgument

POLICY = AccessTokenPolicy(issuer=ISSUER, audience=RESOURCE)
SIGNER = Signer("k1")


def checked(token: str, policy: AccessTokenPolicy = POLICY, *, now: float | None = None,
            signer: Signer = SIGNER) -> AuthInfo:
    header = unverified_header(token, policy)
    claims = verified_claims(token, signer.key, header)
    return access_token_info(header, claims, policy, time.time() if now is None else now)


def refused(token: str, policy: AccessTokenPolicy = POLICY, **kw: Any) -> str:
    with pytest.raises(InvalidToken) as caught:
        checked(token, policy, **kw)
    assert token not in caught.value.description and token not in str(caught.value)
    return caught.value.description


# --- RFC 9068 ----------------------------------------------------------------------------


def test_a_good_token_names_the_caller() -> None:
    info = checked(SIGNER.mint())
    assert (info.subject, info.client_id, info.scopes) == (
        "alice", "app", frozenset({"mcp:read", "mcp:write"}))
    assert info.jkt is None and info.expires_at is not None
    assert info.claims["iss"] == ISSUER


@pytest.mark.parametrize("typ", ["at+jwt", "application/at+jwt", "AT+JWT"])
def test_access_token_types(typ: str) -> None:
    assert checked(SIGNER.mint(header={"typ": typ})).subject == "alice"


@pytest.mark.parametrize("typ", ["JWT", None, "dpop+jwt"])
def test_other_types_are_refused_unless_plain_jwt_is_allowed(typ: str | None) -> None:
    token = SIGNER.mint(header={"typ": typ})
    assert "typ must be at+jwt" in refused(token)
    lenient = AccessTokenPolicy(issuer=ISSUER, audience=RESOURCE, allow_plain_jwt=True)
    if typ == "dpop+jwt":
        assert "typ must be at+jwt" in refused(token, lenient)
    else:
        assert checked(token, lenient).subject == "alice"


@dataclass(frozen=True)
class FromNow:
    """A claim's time, this many seconds from when the test runs (not from collection)."""

    seconds: int


@pytest.mark.parametrize(("claims", "drop", "says"), [
    ({"iss": "https://evil.example"}, (), "another authorization server"),
    ({"iss": ISSUER + "/"}, (), "another authorization server"),  # exact, no normalizing
    ({"aud": "https://other.example/mcp"}, (), "for another resource"),
    ({"aud": ["https://other.example/mcp"]}, (), "for another resource"),
    ({}, ("aud",), "no audience"),
    ({"aud": 7}, (), "no audience"),
    ({"exp": FromNow(-120)}, (), "expired"),
    ({}, ("exp",), "no expiry"),
    ({"exp": "soon"}, (), "exp is not a number"),
    ({"nbf": FromNow(120)}, (), "not valid yet"),
    ({"iat": FromNow(120)}, (), "issued in the future"),
    ({}, ("sub",), "no sub"),
    ({"scope": ["mcp:read"]}, (), "scope is not a string"),
    ({"cnf": "x"}, (), "cnf claim is not an object"),
    ({"cnf": {"x5t#S256": "abc"}}, (), "confirmation method"),
], ids=lambda v: "+".join(v) if isinstance(v, dict) else str(v)[:40])  # keys: values are times
def test_claim_checks(claims: dict[str, Any], drop: tuple[str, ...], says: str) -> None:
    now = int(time.time())  # at run time: a worker may run the test minutes after collecting it
    timed = {k: now + v.seconds if isinstance(v, FromNow) else v for k, v in claims.items()}
    assert says in refused(SIGNER.mint(timed, drop=drop))


def test_audience_list_and_several_accepted_audiences() -> None:
    token = SIGNER.mint({"aud": ["https://other.example", RESOURCE]})
    assert checked(token).subject == "alice"
    both = AccessTokenPolicy(issuer=ISSUER, audience=["https://a.example", RESOURCE])
    assert checked(SIGNER.mint(), both).subject == "alice"


def test_leeway_is_settable() -> None:
    token = SIGNER.mint({"exp": int(time.time()) - 30})
    assert checked(token).subject == "alice"  # within the default 60 s
    strict = AccessTokenPolicy(issuer=ISSUER, audience=RESOURCE, leeway_s=5)
    assert "expired" in refused(token, strict)


def test_scp_list_client_id_from_azp_and_dpop_binding() -> None:
    token = SIGNER.mint({"scp": ["a", "b"], "azp": "web", "cnf": {"jkt": "thumb"}},
                        drop=("scope", "client_id"))
    info = checked(token)
    assert (info.scopes, info.client_id, info.jkt) == (frozenset({"a", "b"}), "web", "thumb")


def test_header_checks() -> None:
    assert "not a JWT" in refused("abc")
    assert "over 100 characters" in refused(
        SIGNER.mint(), AccessTokenPolicy(issuer=ISSUER, audience=RESOURCE, max_token_chars=100))
    assert "does not decode" in refused("!!.e30.sig")
    head, payload, sig = SIGNER.mint().split(".")
    assert "does not decode" in refused(f"{head}.{payload}x.{sig}")
    unsigned = ".".join(base64.urlsafe_b64encode(json.dumps(part).encode()).decode().rstrip("=")
                        for part in ({"alg": "none", "typ": "at+jwt"}, {"sub": "x"})) + "."
    assert "algorithm is not accepted" in refused(unsigned)
    hmac = jwt.encode({"alg": "HS256", "typ": "at+jwt"}, {"sub": "x"},
                      OctKey.generate_key(256), algorithms=["HS256"])
    assert "algorithm is not accepted" in refused(hmac)


def test_a_signature_by_another_key_is_refused() -> None:
    forged = Signer("k1").mint()  # same kid, another key
    assert "signature does not verify" in refused(forged)
    head, _payload, sig = SIGNER.mint().split(".")
    other_payload = SIGNER.mint({"sub": "mallory"}).split(".")[1]
    assert "signature does not verify" in refused(f"{head}.{other_payload}.{sig}")


# --- any input: AuthInfo or InvalidToken, never another exception --------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                                  max_size=3),
    max_leaves=10)
CLAIM_NAMES = st.sampled_from(["iss", "aud", "sub", "exp", "nbf", "iat", "scope", "scp",
                               "client_id", "azp", "cnf", "x"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(claims=st.dictionaries(CLAIM_NAMES, JSON_VALUES, max_size=8),
       header=st.dictionaries(st.sampled_from(["typ", "kid", "alg", "crit", "jwk"]),
                              JSON_VALUES, max_size=3))
def test_any_claims_or_header_give_auth_info_or_invalid_token(
        claims: dict[str, Any], header: dict[str, Any]) -> None:
    try:
        info = access_token_info({"typ": "at+jwt", **header}, claims, POLICY, time.time())
    except InvalidToken:
        return
    assert isinstance(info, AuthInfo) and info.subject == claims["sub"]
    assert claims["iss"] == ISSUER


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300) | st.from_regex(r"[A-Za-z0-9_\-]{0,40}\.[A-Za-z0-9_\-]{0,40}"
                                              r"\.[A-Za-z0-9_\-]{0,40}", fullmatch=True))
def test_any_token_text_gives_invalid_token(token: str) -> None:
    with pytest.raises(InvalidToken):
        checked(token)


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=200) | st.builds(lambda d: json.dumps(d).encode(),
                                           st.dictionaries(st.sampled_from(
                                               ["active", "aud", "exp", "sub", "scope",
                                                "client_id", "cnf", "iss"]),
                                               JSON_VALUES, max_size=6)))
def test_any_introspection_answer_gives_auth_info_or_invalid_token(body: bytes) -> None:
    """(or VerifierUnavailable for an answer that is not a JSON object: the AS's fault)"""
    try:
        info = introspection_info(body, IntrospectionPolicy(audience=RESOURCE), time.time())
    except (InvalidToken, VerifierUnavailable):
        return
    assert isinstance(info, AuthInfo)


# --- RFC 7662 ----------------------------------------------------------------------------


def answer(**fields: Any) -> bytes:
    base: dict[str, Any] = {"active": True, "aud": RESOURCE, "sub": "bob",
                            "client_id": "cli", "scope": "mcp:read",
                            "exp": int(time.time()) + 60}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None}).encode()


def test_an_active_answer_names_the_caller() -> None:
    info = introspection_info(answer(cnf={"jkt": "t"}), IntrospectionPolicy(RESOURCE),
                              time.time())
    assert (info.subject, info.client_id, info.scopes, info.jkt) == (
        "bob", "cli", frozenset({"mcp:read"}), "t")


@pytest.mark.parametrize(("fields", "says"), [
    ({"active": False}, "not active"),
    ({"active": "true"}, "not active"),
    ({"aud": "https://other.example"}, "another resource"),
    ({"aud": None}, "no audience"),
    ({"exp": int(time.time()) - 300}, "expired"),
    ({"iss": "https://evil.example"}, "another authorization server"),
    ({"sub": None, "client_id": None}, "no subject"),
])
def test_introspection_refusals(fields: dict[str, Any], says: str) -> None:
    policy = IntrospectionPolicy(RESOURCE, issuer=ISSUER)
    with pytest.raises(InvalidToken, match=says):
        introspection_info(answer(**fields), policy, time.time())


def test_absent_audience_allowed_when_configured_and_broken_answers() -> None:
    lenient = IntrospectionPolicy(RESOURCE, require_audience=False)
    assert introspection_info(answer(aud=None), lenient, time.time()).subject == "bob"
    for body in (b"[]", b"not json", b"x" * 70_000):
        with pytest.raises(VerifierUnavailable):
            introspection_info(body, lenient, time.time())


# --- RFC 9449 at a resource --------------------------------------------------------------

URL = "https://mcp.example/mcp"
TOKEN = "the-access-token"
BOUND = AuthInfo(subject="s", jkt="")  # filled per key below


def bound_to(key: DPoPKey) -> AuthInfo:
    return AuthInfo(subject="s", jkt=key.jkt)


def dpop_request(proof: str | None, *, method: str = "POST", url: str = URL,
                 scheme: str = "DPoP") -> TokenRequest:
    return TokenRequest(scheme, TOKEN, method, url, dpop_proof=proof)  # type: ignore[arg-type]


def test_a_good_proof_passes() -> None:
    key = DPoPKey.generate()
    proof = key.proof("POST", URL + "?q=1", access_token=TOKEN, nonce="n1")
    checked_proof = check_proof(proof, dpop_request(proof, url="https://MCP.example:443/mcp#f"),
                                policy=DPoPPolicy(), now=time.time(), expected_jkt=key.jkt)
    assert checked_proof.jkt == key.jkt and checked_proof.nonce == "n1" and checked_proof.jti


def proof_refusal(proof: str, key: DPoPKey, **request: Any) -> str:
    with pytest.raises(InvalidDPoPProof) as caught:
        check_proof(proof, dpop_request(proof, **request), policy=DPoPPolicy(),
                    now=time.time(), expected_jkt=key.jkt)
    assert caught.value.error == "invalid_dpop_proof"  # RFC 9449 §7.1
    assert TOKEN not in caught.value.description
    return caught.value.description


def test_proof_refusals() -> None:
    key = DPoPKey.generate()
    good = key.proof("POST", URL, access_token=TOKEN)
    assert "htm" in proof_refusal(good, key, method="GET")
    assert "htu" in proof_refusal(good, key, url="https://mcp.example/other")
    assert "htu" in proof_refusal(good, key, url="http://mcp.example/mcp")
    old = key.proof("POST", URL, access_token=TOKEN, issued_at=int(time.time()) - 120)
    assert "too old" in proof_refusal(old, key)
    future = key.proof("POST", URL, access_token=TOKEN, issued_at=int(time.time()) + 60)
    assert "future" in proof_refusal(future, key)
    assert "ath" in proof_refusal(key.proof("POST", URL, access_token="other"), key)
    assert "ath" in proof_refusal(key.proof("POST", URL), key)
    other = DPoPKey.generate().proof("POST", URL, access_token=TOKEN)
    assert "cnf.jkt" in proof_refusal(other, key)
    assert "is not a JWT" in proof_refusal("abc", key)


def forged_proof(key: ECKey, header: dict[str, Any], claims: dict[str, Any]) -> str:
    """A proof signed by `key` with any header at all (PyJWT, an independent library, signs
    what joserfc would refuse to)."""
    head = {"typ": "dpop+jwt", "jwk": key.as_dict(private=False), **header}
    body = {"jti": "j", "htm": "POST", "htu": URL, "iat": int(time.time()),
            "ath": access_token_hash(TOKEN), **claims}
    return pyjwt.encode(body, key.as_pem(private=True), algorithm="ES256", headers=head)


def test_proof_header_refusals() -> None:
    ec = ECKey.generate_key("P-256", private=True)
    key = DPoPKey(ec)
    assert "typ" in proof_refusal(forged_proof(ec, {"typ": "JWT"}, {}), key)
    assert "private key material" in proof_refusal(
        forged_proof(ec, {"jwk": ec.as_dict(private=True)}, {}), key)
    assert "no public jwk" in proof_refusal(forged_proof(ec, {"jwk": None}, {}), key)
    assert "jti" in proof_refusal(forged_proof(ec, {}, {"jti": ""}), key)
    assert "jti" in proof_refusal(forged_proof(ec, {}, {"jti": "x" * 300}), key)
    hmac = pyjwt.encode({"jti": "j"}, "k" * 32, algorithm="HS256",
                        headers={"typ": "dpop+jwt", "jwk": {"kty": "oct", "k": "aw"}})
    assert "algorithm" in proof_refusal(hmac, key)
    # a proof whose jwk is another key than the one that signed it
    other = ECKey.generate_key("P-256", private=True)
    assert "signature" in proof_refusal(
        forged_proof(ec, {"jwk": other.as_dict(private=False)}, {}), key)


def test_presentation_rules() -> None:
    key = DPoPKey.generate()
    unbound = AuthInfo(subject="s")
    assert check_presentation(dpop_request(None, scheme="Bearer"), unbound) is False
    # a DPoP header beside an unbound Bearer token is not looked at (RFC 6750 governs)
    assert check_presentation(dpop_request("junk", scheme="Bearer"), unbound) is False
    with pytest.raises(InvalidToken, match="not as a Bearer token") as downgrade:
        check_presentation(dpop_request(None, scheme="Bearer"), bound_to(key))
    assert downgrade.value.error == "invalid_token"
    with pytest.raises(InvalidToken, match="not DPoP-bound"):
        check_presentation(dpop_request("p"), unbound)
    with pytest.raises(InvalidDPoPProof, match="needs a DPoP proof"):
        check_presentation(dpop_request(None), bound_to(key))
    assert check_presentation(dpop_request("p"), bound_to(key)) is True


def test_nonce_check() -> None:
    key = DPoPKey.generate()
    proof = check_proof(p := key.proof("POST", URL, access_token=TOKEN), dpop_request(p),
                        policy=DPoPPolicy(), now=time.time(), expected_jkt=key.jkt)
    with pytest.raises(DPoPNonceRequired) as caught:
        check_nonce(proof, ("a", "b"), "a")
    assert caught.value.nonce == "a"
    with_nonce = key.proof("POST", URL, access_token=TOKEN, nonce="b")
    check_nonce(check_proof(with_nonce, dpop_request(with_nonce), policy=DPoPPolicy(),
                            now=time.time(), expected_jkt=key.jkt), ("a", "b"), "a")


@settings(max_examples=100, deadline=None)
@given(header=st.dictionaries(st.sampled_from(["typ", "alg", "jwk", "kid"]), JSON_VALUES,
                              max_size=4),
       claims=st.dictionaries(st.sampled_from(["jti", "htm", "htu", "iat", "ath", "nonce"]),
                              JSON_VALUES, max_size=6))
def test_any_proof_gives_a_proof_or_invalid_token(header: dict[str, Any],
                                                  claims: dict[str, Any]) -> None:
    ec = ECKey.generate_key("P-256", private=True)
    try:
        proof = forged_proof(ec, {k: v for k, v in header.items() if k != "alg"}, claims)
    except (TypeError, ValueError, pyjwt.PyJWTError):  # PyJWT will not sign it: skip
        return
    try:
        check_proof(proof, dpop_request(proof), policy=DPoPPolicy(), now=time.time(),
                    expected_jkt=DPoPKey(ec).jkt)
    except InvalidToken:
        return


# --- WWW-Authenticate and RFC 9728 ---------------------------------------------------------


def test_challenge_header_round_trips_through_the_strict_parser() -> None:
    value = challenge_header("Bearer", resource_metadata='https://r.example/.well-known/x"y',
                             scope=["mcp:read", "mcp:write"], error="invalid_token",
                             description='bad "token"\r\nX-Injected: 1\\')
    assert "\r" not in value and "\n" not in value
    [(scheme, params)] = parse_challenges(value)
    assert scheme == "bearer"
    assert params == {"resource_metadata": 'https://r.example/.well-known/x"y',
                      "scope": "mcp:read mcp:write", "error": "invalid_token",
                      "error_description": "bad ?token???X-Injected: 1?"}


def test_dpop_challenge_with_algs() -> None:
    value = challenge_header("DPoP", resource_metadata=None, algs=["ES256", "PS256"],
                             error="use_dpop_nonce")
    assert value == 'DPoP algs="ES256 PS256", error="use_dpop_nonce"'
    assert challenge_header("Bearer", resource_metadata=None) == "Bearer"


@pytest.mark.parametrize("bad", [
    {"scope": ['a"b']}, {"error": "bad error"}, {"resource_metadata": "https://x/\n"},
    {"algs": ["ES 256"]},
])
def test_challenge_header_refuses_values_off_the_grammar(bad: dict[str, Any]) -> None:
    args: dict[str, Any] = {"resource_metadata": None, **bad}
    with pytest.raises(InvalidArgument):
        challenge_header("DPoP", **args)


def test_protected_resource_metadata_document() -> None:
    document = protected_resource_metadata(RESOURCE, [ISSUER], ["mcp:read"],
                                           dpop_signing_alg_values_supported=["ES256"])
    assert document == {"resource": RESOURCE, "authorization_servers": [ISSUER],
                        "bearer_methods_supported": ["header"], "scopes_supported": ["mcp:read"],
                        "dpop_signing_alg_values_supported": ["ES256"]}
    with pytest.raises(InvalidArgument):
        protected_resource_metadata(RESOURCE, [])


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=400) | st.from_regex(r"[A-Za-z0-9_\-]{0,60}\.[A-Za-z0-9_\-]{0,60}"
                                              r"\.[A-Za-z0-9_\-]{0,60}", fullmatch=True))
def test_any_proof_text_gives_invalid_token(proof: str) -> None:
    with pytest.raises(InvalidToken):
        check_proof(proof, dpop_request(proof), policy=DPoPPolicy(), now=time.time(),
                    expected_jkt="x")


# --- reading a request's headers -----------------------------------------------------------


def test_presented_token() -> None:
    request = presented_token("POST", URL, ["dpop  abc.def-_~+/=="], ["  proof "])
    assert request is not None
    assert (request.scheme, request.token, request.dpop_proof) == ("DPoP", "abc.def-_~+/==",
                                                                   "proof")
    bearer = presented_token("GET", URL, ["Bearer t"])
    assert bearer is not None and (bearer.scheme, bearer.dpop_proof) == ("Bearer", None)
    assert presented_token("GET", URL, []) is None
    assert presented_token("GET", URL, ["Basic dXNlcjpwdw=="]) is None
    with pytest.raises(InvalidToken, match="more than one Authorization"):
        presented_token("GET", URL, ["Bearer a", "Bearer b"])
    with pytest.raises(InvalidToken, match="not a token"):
        presented_token("GET", URL, ["Bearer a b"])
    with pytest.raises(InvalidToken, match="not a token"):
        presented_token("GET", URL, ["Bearer"])
    with pytest.raises(InvalidToken, match="over 30 characters"):
        presented_token("GET", URL, ["Bearer " + "a" * 30], max_chars=30)
    with pytest.raises(InvalidDPoPProof, match="more than one DPoP"):
        presented_token("GET", URL, ["DPoP t"], ["p1", "p2"])


SCHEME_AND_JUNK = st.tuples(st.sampled_from(["Bearer", "DPoP", "dpop", "Basic", ""]),
                            st.text(max_size=40))


@settings(max_examples=300, deadline=None)
@given(st.lists(SCHEME_AND_JUNK, max_size=2), st.lists(st.text(max_size=20), max_size=2))
def test_any_headers_give_a_request_none_or_invalid_token(
        authorization: list[tuple[str, str]], dpop: list[str]) -> None:
    values = [f"{scheme} {junk}" for scheme, junk in authorization]
    try:
        request = presented_token("GET", URL, values, dpop)
    except InvalidToken as refused:
        assert all(junk not in refused.description
                   for _, junk in authorization if len(junk) >= 8)
        return
    assert request is None or (request.token and " " not in request.token)
