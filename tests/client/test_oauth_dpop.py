"""`mcpkit.client.oauth_dpop.DPoP` alone: nonces kept per origin and bounded, the headers a
bound and an unbound token go out with, and the resource's nonce challenge read strictly."""

from __future__ import annotations

import pytest
from joserfc import jws

from mcpkit.auth.dpop import InvalidDPoPNonce
from mcpkit.auth.tokens import TokenSet
from mcpkit.client.oauth_dpop import DPoP, dpop_from_option, header_values
from mcpkit.errors import InvalidArgument


def claims(proof: str) -> dict[str, object]:
    import json
    return dict(json.loads(jws.extract_compact(proof.encode()).payload))


def test_nonces_are_kept_per_origin_and_bounded() -> None:
    dpop = DPoP(max_nonces=3)
    dpop.remember_nonce("http://a.example/token", "na")
    dpop.remember_nonce("http://a.example/token", "token-side", role="token")
    assert claims(dpop.proof("POST", "http://a.example/token", role="token"))["nonce"] == (
        "token-side")  # the same origin's authorization server has its own nonce
    dpop.remember_nonce("http://b.example/mcp", "nb")
    assert claims(dpop.proof("POST", "http://a.example/other"))["nonce"] == "na"
    dpop.remember_nonce("http://c.example/", "nc")  # a third origin: the oldest goes
    assert "nonce" not in claims(dpop.proof("POST", "http://a.example/token"))
    assert claims(dpop.proof("GET", "http://b.example/mcp"))["nonce"] == "nb"
    assert repr(dpop).startswith("DPoP(jkt=")


def test_headers_for_bound_and_unbound_tokens() -> None:
    dpop = DPoP()
    bound = dpop.resource_headers("GET", "http://r.example/mcp?x=1",
                                  TokenSet("tok", token_type="DPoP"))
    assert bound["Authorization"] == "DPoP tok"
    proof = claims(bound["DPoP"])
    assert proof["htm"] == "GET" and proof["htu"] == "http://r.example/mcp" and "ath" in proof
    assert dpop.resource_headers("POST", "http://r.example/mcp", TokenSet("tok")) == {
        "Authorization": "Bearer tok"}


def test_the_resource_nonce_challenge() -> None:
    dpop = DPoP()
    url = "http://r.example/mcp"
    asked = {"www-authenticate": 'DPoP error="use_dpop_nonce"', "DPoP-Nonce": "n1"}
    assert dpop.resource_challenge(url, 401, asked)
    assert claims(dpop.proof("POST", url))["nonce"] == "n1"
    assert not dpop.resource_challenge(url, 401, {"WWW-Authenticate": 'DPoP error="x"'})
    assert not dpop.resource_challenge(url, 403, asked)
    with pytest.raises(InvalidDPoPNonce):
        dpop.resource_challenge(url, 401, {"WWW-Authenticate": 'DPoP error="use_dpop_nonce"'})
    with pytest.raises(InvalidDPoPNonce, match="over the limit"):
        DPoP(max_nonce_chars=8).resource_challenge(url, 401, {**asked, "DPoP-Nonce": "n" * 9})


def test_options() -> None:
    assert dpop_from_option(False) is None and dpop_from_option(None) is None
    assert isinstance(dpop_from_option(True), DPoP)
    with pytest.raises(InvalidArgument):
        dpop_from_option("yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        DPoP(max_nonces=0)
    assert header_values({"A": "1", "a": "2", "b": "3"}, "a") == ["1", "2"]
