"""DPoP-bound hub tokens (RFC 9449), over real HTTP on 127.0.0.1: a token request with a proof
gets `token_type: DPoP` and an access token with `cnf.jkt`; /mcp then takes it only as
`Authorization: DPoP` with a fresh proof by that key (a replayed proof, a proof by another key,
for another URL, or the token as Bearer are refused, each with a DPoP challenge naming the
check); the login's refresh token is bound to the key; mcpkit's own OAuth client with
`dpop=True` logs in and lists tools. The shared replay cache in Redis: bounded, expiring,
fail-closed; two replicas on one PostgreSQL and one Redis serve any step of a DPoP login, and
a proof used at one is refused by the other."""

from __future__ import annotations

import secrets
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from redis.asyncio import Redis
from tests.hub.hub_helpers import Hub, call, seed_admin
from tests.hub.oauth_login import HubLogin
from tests.hub.router.support import hub_app, hub_replicas, upstream
from tests.hub.test_hub_oauth import (
    REDIRECT,
    OAuthHub,
    authorization_url,
    claims_of,
    code_for,
    register_client,
    serving_oauth_hub,
    tool_names,
    user_with_password,
)
from tests.procs import free_port, serve_in_thread
from tests.services_fixtures import postgres_server, redis_server

from mcpkit import Client
from mcpkit.auth.dpop import DPoPKey
from mcpkit.auth.tokens import MemoryRegistrationStore, MemoryTokenStore
from mcpkit.client import Timeouts
from mcpkit.client.oauth import OAuth
from mcpkit.hub.api import create_app
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.oauth.dpop import (
    COUNT_PREFIX,
    REPLAY_PREFIX,
    RedisReplayCache,
    ReplayCheckUnavailable,
)
from mcpkit.hub.router import McpEndpoint
from mcpkit.hub.settings import HubSettings
from mcpkit.server.authorization import ReplayCacheFull
from mcpkit.testing.services import PostgresServer, RedisServer

__all__ = ["postgres_server", "redis_server"]

pytestmark = pytest.mark.anyio

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "t", "version": "1"}}}


@pytest.fixture(scope="module")
def dpop_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OAuthHub]:
    database_url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('hub') / 'hub.db'}"
    with serving_oauth_hub(database_url, "dpopup") as served:
        yield served


async def token_request(hub_url: str, proof: str | None, *, token_url: str | None = None,
                        **form: str) -> tuple[int, dict[str, Any]]:
    headers = {"DPoP": proof} if proof is not None else {}
    async with aiohttp.ClientSession() as http, http.post(
            (token_url or hub_url) + "/oauth/token", data=form, headers=headers) as reply:
        return reply.status, await reply.json(content_type=None)


def token_proof(key: DPoPKey, hub_url: str) -> str:
    return key.proof("POST", hub_url + "/oauth/token")


async def dpop_login(oauth_hub: OAuthHub, key: DPoPKey, *, token_url: str | None = None,
                     ) -> tuple[str, dict[str, Any]]:
    """A client id and the token response of a login whose token request carried a proof."""
    _, name, password = await user_with_password(oauth_hub)
    client_id = await register_client(oauth_hub.url)
    verifier = secrets.token_urlsafe(48)
    code = await code_for(oauth_hub.url, name, password, client_id, verifier)
    status, tokens = await token_request(
        oauth_hub.url, token_proof(key, oauth_hub.url), token_url=token_url,
        grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
        client_id=client_id, code_verifier=verifier)
    assert status == 200, tokens
    return client_id, tokens


async def mcp(url: str, authorization: str, proof: str | None) -> tuple[int, str, str]:
    """POST initialize to `url`: (status, WWW-Authenticate, body)."""
    headers = {"Authorization": authorization,
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": "2025-11-25"}
    if proof is not None:
        headers["DPoP"] = proof
    reply = await call("POST", url, json=INITIALIZE, headers=headers)
    return reply.status, reply.headers.get("WWW-Authenticate", ""), reply.text


def resource_proof(key: DPoPKey, hub_url: str, access_token: str) -> str:
    return key.proof("POST", hub_url + "/mcp", access_token=access_token)


# --- the authorization server ----------------------------------------------------------------


async def test_metadata_advertises_dpop(dpop_hub: OAuthHub) -> None:
    metadata = (await call("GET", dpop_hub.url + "/.well-known/oauth-authorization-server")).body
    assert "ES256" in metadata["dpop_signing_alg_values_supported"]
    assert "none" not in metadata["dpop_signing_alg_values_supported"]
    prm = (await call("GET", dpop_hub.url + "/.well-known/oauth-protected-resource/mcp")).body
    assert "ES256" in prm["dpop_signing_alg_values_supported"]


async def test_a_proof_binds_the_access_token_and_mcp_takes_it_with_a_proof(
        dpop_hub: OAuthHub) -> None:
    key = DPoPKey.generate()
    _, tokens = await dpop_login(dpop_hub, key)
    assert tokens["token_type"] == "DPoP"
    access = tokens["access_token"]
    assert claims_of(access)["cnf"] == {"jkt": key.jkt}
    mcp_url = dpop_hub.url + "/mcp"
    status, _, body = await mcp(mcp_url, "DPoP " + access, resource_proof(key, dpop_hub.url,
                                                                         access))
    assert status == 200, body
    # a fresh proof each time: the same token goes on working
    status, _, _ = await mcp(mcp_url, "DPoP " + access, resource_proof(key, dpop_hub.url,
                                                                      access))
    assert status == 200


async def test_mcp_refuses_replays_other_keys_other_urls_and_bearer(dpop_hub: OAuthHub) -> None:
    key = DPoPKey.generate()
    _, tokens = await dpop_login(dpop_hub, key)
    access = tokens["access_token"]
    mcp_url = dpop_hub.url + "/mcp"
    used = resource_proof(key, dpop_hub.url, access)
    assert (await mcp(mcp_url, "DPoP " + access, used))[0] == 200

    refusals = {
        "already used": ("DPoP " + access, used),
        "not bound to": ("DPoP " + access,
                         resource_proof(DPoPKey.generate(), dpop_hub.url, access)),
        "another URL": ("DPoP " + access,
                        key.proof("POST", dpop_hub.url + "/other", access_token=access)),
        "another HTTP method": ("DPoP " + access,
                                key.proof("GET", mcp_url, access_token=access)),
        "another access token": ("DPoP " + access, key.proof("POST", mcp_url,
                                                             access_token="x.y.z")),
        "needs a DPoP proof": ("DPoP " + access, None),
        "not as a Bearer token": ("Bearer " + access, resource_proof(key, dpop_hub.url,
                                                                     access)),
    }
    for says, (authorization, proof) in refusals.items():
        status, challenge, body = await mcp(mcp_url, authorization, proof)
        assert status == 401, (says, body)
        assert says in body, (says, body)
        assert challenge.startswith("DPoP ") and 'algs="' in challenge, challenge
        assert "invalid_" in challenge
    # an unbound (bearer) token sent as DPoP is refused as well
    _, bearer = await bearer_login(dpop_hub)
    status, _, body = await mcp(mcp_url, "DPoP " + bearer["access_token"],
                                resource_proof(key, dpop_hub.url, bearer["access_token"]))
    assert status == 401 and "not DPoP-bound" in body


async def bearer_login(oauth_hub: OAuthHub) -> tuple[str, dict[str, Any]]:
    _, name, password = await user_with_password(oauth_hub)
    client_id = await register_client(oauth_hub.url)
    verifier = secrets.token_urlsafe(48)
    code = await code_for(oauth_hub.url, name, password, client_id, verifier)
    status, tokens = await token_request(
        oauth_hub.url, None, grant_type="authorization_code", code=code, redirect_uri=REDIRECT,
        client_id=client_id, code_verifier=verifier)
    assert status == 200 and tokens["token_type"] == "Bearer", tokens
    assert "cnf" not in claims_of(tokens["access_token"])
    return client_id, tokens


async def test_the_token_endpoint_refuses_bad_and_replayed_proofs(dpop_hub: OAuthHub) -> None:
    key = DPoPKey.generate()
    client_id, tokens = await dpop_login(dpop_hub, key)
    refresh = {"grant_type": "refresh_token", "client_id": client_id,
               "refresh_token": tokens["refresh_token"]}
    wrong_url = key.proof("POST", dpop_hub.url + "/oauth/revoke")
    status, body = await token_request(dpop_hub.url, wrong_url, **refresh)
    assert status == 400 and body["error"] == "invalid_dpop_proof"
    assert "another URL" in body["error_description"]
    status, body = await token_request(dpop_hub.url, "not-a-jwt", **refresh)
    assert status == 400 and body["error"] == "invalid_dpop_proof"
    proof = token_proof(key, dpop_hub.url)
    status, renewed = await token_request(dpop_hub.url, proof, **refresh)
    assert status == 200 and renewed["token_type"] == "DPoP"
    status, body = await token_request(dpop_hub.url, proof, **{
        **refresh, "refresh_token": renewed["refresh_token"]})
    assert status == 400 and body["error"] == "invalid_dpop_proof"
    assert "already used" in body["error_description"]


async def test_the_refresh_token_is_bound_to_the_key(dpop_hub: OAuthHub) -> None:
    key = DPoPKey.generate()
    client_id, tokens = await dpop_login(dpop_hub, key)
    refresh = {"grant_type": "refresh_token", "client_id": client_id,
               "refresh_token": tokens["refresh_token"]}
    status, body = await token_request(dpop_hub.url, None, **refresh)
    assert status == 400 and body["error"] == "invalid_grant"
    assert "bound to a DPoP key" in body["error_description"]
    thief = DPoPKey.generate()
    status, body = await token_request(dpop_hub.url, token_proof(thief, dpop_hub.url),
                                       **refresh)
    assert status == 400 and body["error"] == "invalid_grant"
    assert "another DPoP key" in body["error_description"]
    # neither refusal spent the token: its holder refreshes with the key
    status, renewed = await token_request(dpop_hub.url, token_proof(key, dpop_hub.url),
                                          **refresh)
    assert status == 200, renewed
    assert renewed["token_type"] == "DPoP"
    assert claims_of(renewed["access_token"])["cnf"] == {"jkt": key.jkt}
    # ... and the rotated one is bound too
    status, body = await token_request(dpop_hub.url, None, **{
        **refresh, "refresh_token": renewed["refresh_token"]})
    assert status == 400 and "bound to a DPoP key" in body["error_description"]


async def test_mcpkits_oauth_client_with_dpop_logs_in_and_lists_tools(
        dpop_hub: OAuthHub) -> None:
    _, name, password = await user_with_password(dpop_hub)
    store = MemoryTokenStore()
    auth = OAuth(redirect=HubLogin(name, password), registrations=MemoryRegistrationStore(),
                 store=store, dpop=True)
    async with Client(dpop_hub.url + "/mcp", auth=auth,
                      timeouts=Timeouts(timeout=30.0)) as client:
        names = await tool_names(client)
    assert any(name.endswith("echo") for name in names), names
    (held,) = list(store._entries.values())
    assert held.token_type == "DPoP"
    assert "jkt" in claims_of(held.access_token)["cnf"]


# --- the shared replay cache -----------------------------------------------------------------


async def test_the_redis_replay_cache_is_bounded_and_expiring(
        redis_server: RedisServer) -> None:
    redis = Redis.from_url(redis_server.url)
    try:
        cache = RedisReplayCache(redis, max_entries=3, window_s=30.0)
        expires = time.time() + 20
        first = secrets.token_bytes(32)
        assert await cache.first_use(first, expires) is True
        assert await cache.first_use(first, expires) is False  # a replay
        assert await cache.first_use(secrets.token_bytes(32), expires) is True
        assert await cache.first_use(secrets.token_bytes(32), expires) is True
        with pytest.raises(ReplayCacheFull, match="retry shortly"):
            await cache.first_use(secrets.token_bytes(32), expires)
        assert await cache.first_use(first, expires) is False  # still known when full
        keys = [k.decode() async for k in redis.scan_iter(match="mcpkit:hub:dpop:*")]
        assert len([k for k in keys if k.startswith(REPLAY_PREFIX)]) == 3
        assert any(k.startswith(COUNT_PREFIX) for k in keys)
        for name in keys:  # every key the cache wrote expires
            assert 0 < await redis.pttl(name) <= 60_000
    finally:
        await redis.aclose()


async def test_the_replay_check_fails_closed_when_redis_is_gone() -> None:
    gone = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=0.5,
                          socket_timeout=0.5)
    try:
        cache = RedisReplayCache(gone)
        with pytest.raises(ReplayCheckUnavailable, match="retry shortly"):
            await cache.first_use(secrets.token_bytes(32), 10**10)
    finally:
        await gone.aclose()


def test_replicas_on_postgres_and_redis_serve_any_step_and_share_the_replay_cache(
        postgres_server: PostgresServer, redis_server: RedisServer, tmp_path: Path) -> None:
    """Two hubs on one PostgreSQL and one Redis behind one public URL: authorize at the first,
    redeem the code (with a proof) at the second, refresh at the first; a proof used at one
    replica - at /mcp or at the token endpoint - is refused by the other."""
    database_url = postgres_server.url_for(postgres_server.create_database().rsplit("/", 1)[1])
    box = SecretBox([generate_key()])
    token = seed_admin(database_url, box)
    with upstream("replup") as served, hub_replicas(
            box, database_url=database_url, allow_private_upstreams=True,
            redis_url=redis_server.url) as (first, second):
        public = first  # the replicas' public URL
        hub = OAuthHub(Hub(first, token, database_url,
                           HubSettings(database_url=database_url, public_url=public), box),
                       served.url)

        async def steps() -> None:
            key = DPoPKey.generate()
            # signed in and authorized at the first, the code redeemed at the second
            client_id, tokens = await dpop_login(hub, key, token_url=second)
            access = tokens["access_token"]
            proof = resource_proof(key, public, access)
            assert (await mcp(second + "/mcp", "DPoP " + access, proof))[0] == 200
            status, _, body = await mcp(first + "/mcp", "DPoP " + access, proof)
            assert status == 401 and "already used" in body  # replayed to the other replica
            fresh = resource_proof(key, public, access)
            assert (await mcp(first + "/mcp", "DPoP " + access, fresh))[0] == 200
            # the refresh at the first; its proof replayed at the second is refused
            refresh_proof = token_proof(key, public)
            status, renewed = await token_request(
                public, refresh_proof, token_url=first, grant_type="refresh_token",
                client_id=client_id, refresh_token=tokens["refresh_token"])
            assert status == 200 and renewed["token_type"] == "DPoP", renewed
            status, body = await token_request(
                public, refresh_proof, token_url=second, grant_type="refresh_token",
                client_id=client_id, refresh_token=renewed["refresh_token"])
            assert status == 400 and "already used" in body["error_description"]
            status, _ = await token_request(
                public, token_proof(key, public), token_url=second,
                grant_type="refresh_token", client_id=client_id,
                refresh_token=renewed["refresh_token"])
            assert status == 200  # the refused replay did not spend the refresh token

        anyio.run(steps)


def test_a_replica_whose_redis_is_gone_refuses_dpop_with_503(tmp_path: Path) -> None:
    """Fail closed: a replica that cannot reach the shared replay cache answers a DPoP proof
    with 503 and Retry-After - at the token endpoint and at /mcp - never with a pass, while
    bearer tokens go on working there. (The first replica, without Redis, issues the
    tokens; both share the database and the key.)"""
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    box = SecretBox([generate_key()])
    token = seed_admin(database_url, box)
    ports = [free_port(), free_port()]
    public = f"http://127.0.0.1:{ports[0]}"
    common = {"database_url": database_url, "public_url": public,
              "allow_private_upstreams": True, "auth_failure_burst": 1_000_000}
    healthy = HubSettings(port=ports[0], **common)  # type: ignore[arg-type]
    cut_off = HubSettings(port=ports[1], **common)  # type: ignore[arg-type]
    dead_redis = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0",
                                socket_connect_timeout=0.2, socket_timeout=0.2)
    endpoint = McpEndpoint()
    broken = create_app(cut_off, box=box, redis=dead_redis, components=[endpoint.component],
                        mounts={"/mcp": endpoint})
    with upstream("goneup") as served, \
            serve_in_thread(hub_app(healthy, box), lifespan="on", name="hub",
                            port=ports[0]) as first, \
            serve_in_thread(broken, lifespan="on", name="hub", port=ports[1]) as second:
        hub = OAuthHub(Hub(first, token, database_url, healthy, box), served.url)

        async def steps() -> None:
            key = DPoPKey.generate()
            client_id, tokens = await dpop_login(hub, key)
            access = tokens["access_token"]
            reply = await call("POST", second + "/mcp", json=INITIALIZE, headers={
                "Authorization": "DPoP " + access, "DPoP": resource_proof(key, public, access),
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": "2025-11-25"})
            assert reply.status == 503 and reply.headers["Retry-After"] == "1", reply.text
            async with aiohttp.ClientSession() as http, http.post(
                    second + "/oauth/token", headers={"DPoP": token_proof(key, public)},
                    data={"grant_type": "refresh_token", "client_id": client_id,
                          "refresh_token": tokens["refresh_token"]}) as answer:
                body = await answer.json(content_type=None)
                assert answer.status == 503 and answer.headers["Retry-After"] == "1"
                assert body["error"] == "temporarily_unavailable"
            _, bearer = await bearer_login(hub)
            status, _, text = await mcp(second + "/mcp", "Bearer " + bearer["access_token"],
                                        None)
            assert status == 200, text

        anyio.run(steps)
    anyio.run(dead_redis.aclose)


async def test_an_authorization_request_may_bind_its_code_to_a_key(dpop_hub: OAuthHub) -> None:
    """RFC 9449 §10: `dpop_jkt` at the authorization endpoint; the code is then redeemed only
    with a proof by that key, and a malformed thumbprint is refused back to the client."""
    _, name, password = await user_with_password(dpop_hub)
    client_id = await register_client(dpop_hub.url)
    key = DPoPKey.generate()
    login = HubLogin(name, password)

    async def code(**extra: str) -> tuple[str, str]:
        verifier = secrets.token_urlsafe(48)
        back = await login(authorization_url(dpop_hub.url, client_id, verifier, **extra))
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(back).query)
        return query.get("code", [""])[0], query.get("error", [""])[0] or verifier

    def exchange(code: str, verifier: str) -> dict[str, str]:
        return {"grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
                "client_id": client_id, "code_verifier": verifier}

    bound, verifier = await code(dpop_jkt=key.jkt)
    status, body = await token_request(dpop_hub.url, token_proof(DPoPKey.generate(),
                                                                 dpop_hub.url),
                                       **exchange(bound, verifier))
    assert status == 400 and body["error"] == "invalid_grant"
    assert "bound to a DPoP key (dpop_jkt)" in body["error_description"]
    bound, verifier = await code(dpop_jkt=key.jkt)
    status, body = await token_request(dpop_hub.url, None, **exchange(bound, verifier))
    assert status == 400 and "dpop_jkt" in body["error_description"]  # no proof at all
    bound, verifier = await code(dpop_jkt=key.jkt)
    status, tokens = await token_request(dpop_hub.url, token_proof(key, dpop_hub.url),
                                         **exchange(bound, verifier))
    assert status == 200 and tokens["token_type"] == "DPoP", tokens
    none, error = await code(dpop_jkt="not a thumbprint")
    assert not none and error == "invalid_request"
