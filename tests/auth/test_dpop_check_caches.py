"""What the DPoP proof check remembers between requests (the proof's imported key and
thumbprint, joserfc's registry per algorithm, normalized `htu` values) and its single parse
of a proof never change a verdict: a proof refused with cold caches is refused with warm ones,
and the other way round. PyJWT (independent of joserfc) forges the proofs mcpkit would not
sign."""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator
from typing import Any

import jwt as pyjwt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from joserfc.jwk import ECKey

from mcpkit.auth import dpop, dpop_proof
from mcpkit.auth.dpop import (
    HTU_CACHE_ENTRIES,
    HTU_CACHE_MAX_CHARS,
    DPoPKey,
    access_token_hash,
    normalize_htu,
)
from mcpkit.auth.dpop_proof import DPoPPolicy, check_proof
from mcpkit.auth.resource import InvalidToken, TokenRequest
from mcpkit.errors import InvalidArgument

URL = "https://mcp.example/mcp"
TOKEN = "the-access-token"


def clear_caches() -> None:
    dpop_proof._public_key.cache_clear()
    dpop_proof._registry.cache_clear()
    dpop._normalize_htu_remembered.cache_clear()


@pytest.fixture(autouse=True)
def cold_caches() -> Iterator[None]:
    clear_caches()
    yield
    clear_caches()


def verdict(proof: str, key: DPoPKey, *, method: str = "POST", url: str = URL) -> str:
    """"ok", or the refusal's description."""
    request = TokenRequest("DPoP", TOKEN, method, url, dpop_proof=proof)
    try:
        check_proof(proof, request, policy=DPoPPolicy(), now=time.time(),
                    expected_jkt=key.jkt)
    except InvalidToken as refused:
        return refused.description
    return "ok"


def segments(proof: str) -> list[str]:
    return proof.split(".")


def signed_payload(ec: ECKey, payload: bytes) -> str:
    """A proof whose signature holds over any payload at all (PyJWT signs bytes as given)."""
    header = {"typ": "dpop+jwt", "jwk": ec.as_dict(private=False)}
    return pyjwt.api_jws.encode(payload, ec.as_pem(private=True), algorithm="ES256",
                                headers=header)


def test_a_verified_header_with_another_payload_is_refused() -> None:
    key = DPoPKey.generate()
    good = key.proof("POST", URL, access_token=TOKEN)
    assert verdict(good, key) == "ok"  # the key, registry and htu are now remembered
    other = key.proof("POST", URL + "/other", access_token=TOKEN)
    head, _, signature = segments(good)
    spliced = ".".join([head, segments(other)[1], signature])
    assert "signature" in verdict(spliced, key)
    # the same header and payload, the signature of another proof by the same key
    assert "signature" in verdict(".".join([head, segments(good)[1], segments(other)[2]]), key)
    assert verdict(good, key) == "ok"  # the check holds no state: the replay cache does


@pytest.mark.parametrize("payload", [b"[1, 2]", b"not json", b"\xff\xfe", b"\"text\""])
def test_a_signed_payload_that_is_no_json_object_is_refused(payload: bytes) -> None:
    ec = ECKey.generate_key("P-256", private=True)
    key = DPoPKey(ec)
    assert verdict(key.proof("POST", URL, access_token=TOKEN), key) == "ok"
    assert "not a JSON object" in verdict(signed_payload(ec, payload), key)


def test_a_signature_by_another_key_than_the_header_jwk_is_refused_with_a_warm_cache() -> None:
    ec = ECKey.generate_key("P-256", private=True)
    key = DPoPKey(ec)
    assert verdict(key.proof("POST", URL, access_token=TOKEN), key) == "ok"
    impostor = ECKey.generate_key("P-256", private=True)
    body = {"jti": "j", "htm": "POST", "htu": URL, "iat": int(time.time()),
            "ath": access_token_hash(TOKEN)}
    forged = pyjwt.encode(body, impostor.as_pem(private=True), algorithm="ES256",
                          headers={"typ": "dpop+jwt", "jwk": ec.as_dict(private=False)})
    assert "signature" in verdict(forged, key)


MUTATIONS = st.sampled_from(["none", "payload", "signature", "header", "method", "url",
                             "truncate", "other key"])


@settings(max_examples=60, deadline=None)
@given(mutations=st.lists(MUTATIONS, min_size=1, max_size=6), spot=st.integers(0, 200))
def test_warm_caches_give_the_verdict_cold_ones_give(mutations: list[str], spot: int) -> None:
    key, stranger = DPoPKey.generate(), DPoPKey.generate()
    for mutation in mutations:
        proof = (stranger if mutation == "other key" else key).proof(
            "POST", URL, access_token=TOKEN)
        parts = segments(proof)
        if mutation in ("payload", "signature", "header"):
            index = {"header": 0, "payload": 1, "signature": 2}[mutation]
            raw = bytearray(base64.urlsafe_b64decode(parts[index] + "=="))
            raw[spot % len(raw)] ^= 0x01
            parts[index] = base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()
        elif mutation == "truncate":
            parts[2] = parts[2][: spot % len(parts[2])]
        request: dict[str, Any] = {"method": "GET"} if mutation == "method" else (
            {"url": URL + "x"} if mutation == "url" else {})
        mutated = ".".join(parts)
        warm = verdict(mutated, key, **request)
        clear_caches()
        assert verdict(mutated, key, **request) == warm
        assert (warm == "ok") == (mutation == "none"), (mutation, warm)


def test_the_htu_cache_is_bounded_in_entries() -> None:
    for number in range(HTU_CACHE_ENTRIES * 2):
        assert normalize_htu(f"HTTPS://Host{number}.example:443/a?q") == \
            f"https://host{number}.example/a"
    info = dpop._normalize_htu_remembered.cache_info()
    assert info.currsize == HTU_CACHE_ENTRIES == info.maxsize


def test_a_url_over_the_cache_bound_is_normalized_but_not_remembered() -> None:
    long_path = "/" + "a" * HTU_CACHE_MAX_CHARS
    assert normalize_htu("https://mcp.example" + long_path + "?q") == \
        "https://mcp.example" + long_path
    assert dpop._normalize_htu_remembered.cache_info().currsize == 0


@pytest.mark.parametrize("url", ["ftp://mcp.example/mcp", "https://user@mcp.example/",
                                 "https://mcp.example/a b", "/relative"])
def test_a_refused_url_is_refused_every_time_and_not_remembered(url: str) -> None:
    for _ in range(3):
        with pytest.raises(InvalidArgument):
            normalize_htu(url)
    assert dpop._normalize_htu_remembered.cache_info().currsize == 0


@settings(max_examples=200, deadline=None)
@given(url=st.from_regex(r"(?i:https?)://[A-Za-z0-9.%\-\[\]:@]{0,30}(/[!-~]{0,40})?",
                         fullmatch=True))
def test_a_remembered_htu_is_the_one_computed_afresh(url: str) -> None:
    def afresh() -> str | None:
        try:
            return dpop._normalize_htu(url)
        except InvalidArgument:
            return None

    def remembered() -> str | None:
        try:
            return normalize_htu(url)
        except InvalidArgument:
            return None

    first, again = remembered(), remembered()
    assert first == again == afresh()


def test_both_sides_of_the_htu_comparison_stay_distinct_in_the_cache() -> None:
    key = DPoPKey.generate()
    proof = key.proof("POST", URL, access_token=TOKEN)
    assert verdict(proof, key) == "ok"
    assert "htu" in verdict(proof, key, url="https://mcp.example/other")
    assert "htu" in verdict(proof, key, url="http://mcp.example/mcp")
    assert verdict(proof, key, url="https://MCP.example:443/mcp?q#f") == "ok"
