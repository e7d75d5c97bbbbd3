"""The resource server's verifiers over real HTTP on 127.0.0.1 (a small authorization server
in a thread, tests/server/authorization_server.py): JWKS discovered, cached, refreshed after
its TTL, rotated on an unknown kid but at most once per interval under a flood of random kids,
one fetch for concurrent callers, bounded in bytes, keys and time; RFC 7662 introspection
with client_secret_basic and a cache keyed by the token's hash; DPoP replay refused and the
nonce flow. No token and no client secret reaches a log."""

from __future__ import annotations

import json
import logging
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.auth.resource_tokens import ISSUER, RESOURCE, Signer, jwks
from tests.server.authorization_server import AuthServer, running_auth_server

from mcpkit.auth.dpop import DPoPKey
from mcpkit.auth.resource import (
    AuthInfo,
    DPoPNonceRequired,
    InvalidToken,
    TokenRequest,
    VerifierUnavailable,
)
from mcpkit.server.authorization import (
    AuthServerHttp,
    DPoPGuard,
    DPoPNonces,
    IntrospectionVerifier,
    JwtVerifier,
    MemoryReplayCache,
    ReplayCacheFull,
    discover_verifier,
)
from mcpkit.server.authorization.dpop import ENTRY_BYTES
from mcpkit.server.authorization.fetch import Fetched
from mcpkit.server.authorization.introspection import IntrospectionCache

pytestmark = pytest.mark.anyio
LIVENESS_S = 10.0


@pytest.fixture
def auth_server() -> Iterator[AuthServer]:
    with running_auth_server(Signer("k1"), Signer("r1", "RSA")) as server:
        yield server


def bearer(token: str) -> TokenRequest:
    return TokenRequest("Bearer", token, "POST", RESOURCE)


def mint(server: AuthServer, signer: Signer | None = None, **claims: Any) -> str:
    return (signer or server.signers[0]).mint({"iss": server.issuer, **claims})


# --- JWT access tokens against the JWKS ----------------------------------------------------


async def test_keys_are_discovered_once_and_cached(auth_server: AuthServer) -> None:
    verifier = JwtVerifier(auth_server.issuer, RESOURCE)
    for signer in auth_server.signers:  # an EC and an RSA key
        info = await verifier.verify(bearer(mint(auth_server, signer)))
        assert info.subject == "alice" and "mcp:read" in info.scopes
    assert auth_server.hits["/.well-known/oauth-authorization-server"] == 1
    assert auth_server.hits["/jwks"] == 1


async def test_a_token_for_another_resource_or_issuer_is_refused(
        auth_server: AuthServer) -> None:
    verifier = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri())
    with pytest.raises(InvalidToken, match="another resource"):
        await verifier.verify(bearer(mint(auth_server, aud="https://other.example/mcp")))
    with pytest.raises(InvalidToken, match="another authorization server"):
        await verifier.verify(bearer(mint(auth_server, iss="https://evil.example")))


async def test_a_new_kid_is_fetched_and_the_ttl_refreshes(auth_server: AuthServer) -> None:
    verifier = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri(),
                           jwks_refetch_interval_s=0, jwks_ttl_s=0.3)
    await verifier.verify(bearer(mint(auth_server)))
    rotated = Signer("k2")
    auth_server.signers.append(rotated)  # the AS rotates in a new key
    assert (await verifier.verify(bearer(mint(auth_server, rotated)))).subject == "alice"
    assert auth_server.hits["/jwks"] == 2
    await anyio.sleep(0.4)  # past the TTL: the next verification refetches
    await verifier.verify(bearer(mint(auth_server)))
    assert auth_server.hits["/jwks"] == 3


async def test_a_flood_of_unknown_kids_costs_the_as_one_fetch(auth_server: AuthServer) -> None:
    verifier = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri())
    await verifier.verify(bearer(mint(auth_server)))
    for _ in range(200):
        stranger = Signer(secrets.token_hex(8))
        with pytest.raises(InvalidToken, match="unknown kid"):
            await verifier.verify(bearer(mint(auth_server, stranger)))
    assert auth_server.hits["/jwks"] == 1  # the first fetch; the flood is rate-limited


async def test_concurrent_callers_share_one_fetch(auth_server: AuthServer) -> None:
    auth_server.jwks_delay_s = 0.3
    verifier = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri())
    subjects: list[str] = []

    async def one() -> None:
        subjects.append((await verifier.verify(bearer(mint(auth_server)))).subject)

    with anyio.fail_after(LIVENESS_S):
        async with anyio.create_task_group() as group:
            for _ in range(20):
                group.start_soon(one)
    assert subjects == ["alice"] * 20 and auth_server.hits["/jwks"] == 1


async def test_oversized_and_overfull_jwks_are_refused(auth_server: AuthServer) -> None:
    small = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri(),
                        max_jwks_bytes=1024)  # the RSA key alone is about 500 bytes
    auth_server.signers.append(Signer("r2", "RSA"))
    with pytest.raises(VerifierUnavailable, match="over the 1024-byte limit"):
        await small.verify(bearer(mint(auth_server)))
    few = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri(),
                      max_jwks_keys=2)
    with pytest.raises(VerifierUnavailable, match="3 keys, over the limit of 2"):
        await few.verify(bearer(mint(auth_server)))


async def test_a_slow_jwks_times_out(auth_server: AuthServer) -> None:
    auth_server.jwks_delay_s = 2  # past the verifier's 0.5 s bound
    verifier = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri(),
                           http=AuthServerHttp(timeout_s=0.5))
    with anyio.fail_after(LIVENESS_S), pytest.raises(VerifierUnavailable,
                                                      match="TimeoutError"):
        await verifier.verify(bearer(mint(auth_server)))
    # and the AS is not asked again within the interval, however many tokens come
    with pytest.raises(VerifierUnavailable, match="retrying later"):
        await verifier.verify(bearer(mint(auth_server)))
    assert auth_server.hits["/jwks"] == 1


async def test_the_old_keys_serve_while_the_jwks_is_broken(
        auth_server: AuthServer, caplog: pytest.LogCaptureFixture) -> None:
    verifier = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri(),
                           jwks_ttl_s=0, jwks_refetch_interval_s=0)
    await verifier.verify(bearer(mint(auth_server)))
    auth_server.jwks_body = b"<html>maintenance</html>"
    with caplog.at_level(logging.DEBUG):
        token = mint(auth_server)
        assert (await verifier.verify(bearer(token))).subject == "alice"
    assert "JWKS fetch failed" in caplog.text and token not in caplog.text
    assert auth_server.hits["/jwks"] == 2


async def test_only_https_or_loopback() -> None:
    verifier = JwtVerifier("http://as.example", RESOURCE)
    with pytest.raises(VerifierUnavailable, match="only HTTPS"):
        await verifier.verify(bearer(Signer("k").mint({"iss": "http://as.example"})))


async def test_discover_verifier_picks_by_metadata(auth_server: AuthServer) -> None:
    jwt_verifier = await discover_verifier(auth_server.issuer, RESOURCE)
    assert isinstance(jwt_verifier, JwtVerifier)
    assert (await jwt_verifier.verify(bearer(mint(auth_server)))).subject == "alice"
    introspecting = await discover_verifier(auth_server.issuer, RESOURCE,
                                            introspection_client=auth_server.client)
    assert isinstance(introspecting, IntrospectionVerifier)
    with pytest.raises(VerifierUnavailable):
        await discover_verifier("http://127.0.0.1:1", RESOURCE)


# --- RFC 7662 introspection ------------------------------------------------------------------


def introspector(server: AuthServer, **options: Any) -> IntrospectionVerifier:
    client_id, secret = server.client
    return IntrospectionVerifier(f"{server.issuer}/introspect", client_id, secret, RESOURCE,
                                 issuer=server.issuer, **options)


async def test_introspection_answers_and_its_cache(
        auth_server: AuthServer, caplog: pytest.LogCaptureFixture) -> None:
    token = secrets.token_urlsafe(32)
    auth_server.introspection[token] = {
        "active": True, "sub": "carol", "client_id": "cli", "scope": "mcp:read",
        "aud": RESOURCE, "iss": auth_server.issuer, "exp": int(time.time()) + 600}
    verifier = introspector(auth_server)
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            info = await verifier.verify(bearer(token))
            assert (info.subject, info.scopes) == ("carol", frozenset({"mcp:read"}))
        for _ in range(3):
            with pytest.raises(InvalidToken, match="not active"):
                await verifier.verify(bearer("unknown-token"))
    assert auth_server.hits["/introspect"] == 2  # one per token: both answers cached
    assert auth_server.introspected_forms[0]["token_type_hint"] == ["access_token"]
    assert token not in caplog.text and auth_server.client[1] not in caplog.text
    assert auth_server.client[1] not in repr(verifier)


async def test_introspection_refuses_another_audience_and_a_wrong_client(
        auth_server: AuthServer) -> None:
    auth_server.introspection["t"] = {"active": True, "sub": "x", "aud": "https://other"}
    with pytest.raises(InvalidToken, match="another resource"):
        await introspector(auth_server).verify(bearer("t"))
    client_id, _ = auth_server.client
    wrong = IntrospectionVerifier(f"{auth_server.issuer}/introspect", client_id, "nope",
                                  RESOURCE)
    with pytest.raises(VerifierUnavailable, match="answered 401"):
        await wrong.verify(bearer("t"))


async def test_concurrent_callers_share_one_introspection(auth_server: AuthServer) -> None:
    auth_server.introspection_delay_s = 0.3
    auth_server.introspection["same"] = {"active": True, "sub": "dan", "aud": RESOURCE}
    verifier = introspector(auth_server, max_concurrent_requests=2)
    seen: list[str] = []

    async def one(token: str) -> None:
        try:
            seen.append((await verifier.verify(bearer(token))).subject)
        except InvalidToken:
            seen.append("refused")

    with anyio.fail_after(LIVENESS_S):
        async with anyio.create_task_group() as group:
            for _ in range(10):
                group.start_soon(one, "same")
            for i in range(4):
                group.start_soon(one, f"other-{i}")
    assert sorted(seen) == ["dan"] * 10 + ["refused"] * 4
    assert auth_server.hits["/introspect"] == 5 == verifier.requests  # 1 + one per other
    assert auth_server.most_introspections_in_flight == 2  # the verifier's cap


def test_introspection_cache_bounds_and_expiry() -> None:
    now = [1000.0]
    cache = IntrospectionCache(ttl_s=30, max_entries=100, max_bytes=8192,
                               clock=lambda: now[0])
    short = AuthInfo(subject="s", expires_at=1005.0)
    cache.put(b"a", short, 100)
    now[0] = 1004.0
    assert cache.get(b"a") is short
    now[0] = 1005.5  # never past the token's exp, though the TTL is 30 s
    assert cache.get(b"a") is None
    for i in range(50):
        cache.put(bytes([i]), AuthInfo(subject="s"), 500)
    assert cache.bytes <= 8192 and len(cache) == 8192 // (4 * 500 + 512)
    assert cache.get(bytes([49])) is not None and cache.get(bytes([0])) is None


# --- DPoP ------------------------------------------------------------------------------------


def dpop_request(token: str, key: DPoPKey, *, nonce: str | None = None,
                 proof: str | None = None) -> TokenRequest:
    proof = proof or key.proof("POST", RESOURCE, access_token=token, nonce=nonce)
    return TokenRequest("DPoP", token, "POST", RESOURCE, dpop_proof=proof)


async def test_dpop_bound_token_needs_a_fresh_proof_by_its_key(auth_server: AuthServer) -> None:
    key = DPoPKey.generate()
    verifier = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri())
    token = mint(auth_server, cnf={"jkt": key.jkt})
    request = dpop_request(token, key)
    assert (await verifier.verify(request)).jkt == key.jkt
    with pytest.raises(InvalidToken, match="already used"):
        await verifier.verify(request)  # the same proof again
    with pytest.raises(InvalidToken, match="not as a Bearer token"):
        await verifier.verify(bearer(token))
    with pytest.raises(InvalidToken, match=r"cnf\.jkt"):
        await verifier.verify(dpop_request(token, DPoPKey.generate()))
    unbound = mint(auth_server)
    with pytest.raises(InvalidToken, match="not DPoP-bound"):
        await verifier.verify(dpop_request(unbound, key))


async def test_the_nonce_flow(auth_server: AuthServer) -> None:
    clock = [0.0]
    nonces = DPoPNonces(rotation_s=100, clock=lambda: clock[0])
    verifier = JwtVerifier(auth_server.issuer, RESOURCE, jwks_uri=auth_server.jwks_uri(),
                           dpop=DPoPGuard(nonces=nonces))
    key = DPoPKey.generate()
    token = mint(auth_server, cnf={"jkt": key.jkt})
    with pytest.raises(DPoPNonceRequired) as asked:
        await verifier.verify(dpop_request(token, key))
    first = asked.value.nonce
    assert (await verifier.verify(dpop_request(token, key, nonce=first))).jkt == key.jkt
    clock[0] = 150  # rotated: the previous nonce still passes
    assert nonces.current() != first
    await verifier.verify(dpop_request(token, key, nonce=first))
    clock[0] = 450  # two rotations later: stale
    with pytest.raises(DPoPNonceRequired) as again:
        await verifier.verify(dpop_request(token, key, nonce=first))
    assert again.value.nonce not in (first, None)


async def test_the_replay_cache_is_bounded_in_bytes_and_fails_closed() -> None:
    now = [0.0]
    cache = MemoryReplayCache(max_bytes=3 * ENTRY_BYTES, clock=lambda: now[0])
    for key in (b"a", b"b", b"c"):
        assert await cache.first_use(key, expires_at=60)
    assert not await cache.first_use(b"a", expires_at=60)
    with pytest.raises(ReplayCacheFull):
        await cache.first_use(b"d", expires_at=60)
    now[0] = 61  # the proofs could no longer pass their iat check: forgotten
    assert await cache.first_use(b"a", expires_at=121) and len(cache) == 1


def test_no_secret_in_a_request_repr() -> None:
    request = dpop_request("secret-token", DPoPKey.generate())
    assert "secret-token" not in repr(request) and request.dpop_proof not in repr(request)


def test_a_flood_keeps_the_caches_within_their_byte_bounds() -> None:
    """The replay and introspection caches of a real process, flooded far past their bounds
    (2 MiB each): its resident memory grows by at most the two bounds plus 8 MiB of headroom
    (unbounded, they would hold about 69 MB)."""
    bound = 2 * 1024 * 1024
    out = subprocess.run([sys.executable, "-m", "tests.server.authorization_flood", str(bound)],
                         capture_output=True, text=True, timeout=120, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    figures = json.loads(out.stdout)
    assert figures["replay_kept"] == bound // ENTRY_BYTES
    assert figures["replay_refused"] == 200_000 - figures["replay_kept"]
    assert figures["introspection_bytes"] <= bound and figures["introspection_kept"] > 100
    assert figures["after"] - figures["before"] <= 2 * bound + 8 * 1024 * 1024, figures


class _KeysInMemory(AuthServerHttp):
    """The JWKS without a socket (in addition to the real-HTTP tests above): for the fuzz
    below, which runs hundreds of verifications."""

    async def get(self, url: str, *, max_bytes: int | None = None) -> Fetched:
        return Fetched(200, json.dumps(jwks(FUZZ_SIGNER)).encode())


FUZZ_SIGNER = Signer("fuzz")


@settings(max_examples=200, deadline=None)
@given(scheme=st.sampled_from(["Bearer", "DPoP"]),
       token=st.text(max_size=200) | st.builds(
           lambda claims: FUZZ_SIGNER.mint(claims),
           st.dictionaries(st.sampled_from(["aud", "exp", "sub", "scope", "cnf", "iss"]),
                           st.none() | st.integers() | st.text(max_size=10)
                           | st.dictionaries(st.just("jkt"), st.text(max_size=5)),
                           max_size=4)),
       proof=st.none() | st.text(max_size=100),
       method=st.sampled_from(["GET", "POST", "x y"]),
       url=st.sampled_from([RESOURCE, "not a url", "http://[::1"]))
async def test_any_request_gives_auth_info_or_an_authorization_refusal(
        scheme: str, token: str, proof: str | None, method: str, url: str) -> None:
    request = TokenRequest(scheme, token, method, url, dpop_proof=proof)  # type: ignore[arg-type]
    verifier = JwtVerifier(ISSUER, RESOURCE, jwks_uri="https://as.example/jwks",
                           http=_KeysInMemory())
    try:
        info = await verifier.verify(request)
    except (InvalidToken, DPoPNonceRequired):
        return
    assert isinstance(info, AuthInfo) and scheme == "Bearer" and info.jkt is None
