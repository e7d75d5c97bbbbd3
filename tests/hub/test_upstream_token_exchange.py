"""Token exchange (RFC 8693) for upstreams that trust the hub's OpenID Connect provider, end to
end: the real oidc-provider (tests/auth_e2e, `token_exchange=True`: the hub's client "hub" may
exchange a user's access token) is the hub's sign-in provider AND the upstream's authorization
server; the upstream is a real protected MCP server (whoami_upstream.py: mcpkit's resource
server), registered with `auth_mode` "token_exchange". Users sign in to the hub through the
provider over plain HTTP (tests/hub/oidc_login.OidcWalk), then call through the hub's /mcp
with the hub's own OAuth access token.

One provider, one upstream and one hub (SQLite) per module; each test has its own users."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
import pytest
from sqlalchemy import text as sql
from tests.auth_e2e.stack import Stack, running_stack
from tests.hub.hub_helpers import (
    ADMIN_USERS,
    UPSTREAMS,
    Api,
    Hub,
    call,
    fresh_user,
    seed_admin,
    unique,
)
from tests.hub.oidc_login import CALLBACK_PATH, OidcWalk
from tests.hub.router.support import hub_app, router_hub, text
from tests.hub.test_hub_oidc_signin import REDIRECT, CodeRequest, unverified_claims
from tests.hub.upstream_login_support import whoami_upstream
from tests.procs import free_port, serve_in_thread

from mcpkit import Client
from mcpkit.auth.client_auth import basic_authorization
from mcpkit.client import Timeouts
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.db.engine import make_engine
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store

pytestmark = pytest.mark.anyio

SECRET_ENV = "MCPKIT_TEST_HUB_TOKEN_EXCHANGE_SECRET"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"


@dataclass
class World:
    stack: Stack
    hub: Hub
    upstream_url: str

    @property
    def issuer(self) -> str:
        return self.stack.issuer


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    directory = tmp_path_factory.mktemp("token-exchange")
    database_url = f"sqlite+aiosqlite:///{directory / 'hub.db'}"
    box = SecretBox([generate_key()])
    admin = seed_admin(database_url, box)
    port = free_port()
    callback = f"http://127.0.0.1:{port}{CALLBACK_PATH}"
    with running_stack(directory, hub_redirect_uris=(callback,), token_exchange=True) as stack, \
            whoami_upstream(stack, directory) as upstream_url:
        os.environ[SECRET_ENV] = stack.hub_client_secret  # read by the hub at start
        try:
            settings = HubSettings(
                database_url=database_url, port=port, allow_private_upstreams=True,
                allow_stdio=True, auth_failure_burst=1_000_000, oidc_issuer=stack.issuer,
                oidc_client_id=stack.hub_client_id, oidc_client_secret_env=SECRET_ENV,
                oidc_allow_signup=True)
            with serve_in_thread(hub_app(settings, box), lifespan="on", name="hub-tx",
                                 port=port) as url:
                yield World(stack, Hub(url, admin, database_url, settings, box), upstream_url)
        finally:
            os.environ.pop(SECRET_ENV, None)


# --- helpers -------------------------------------------------------------------------------


@dataclass
class SignedIn:
    user_id: int
    hub_token: str
    """The hub's own OAuth access token (for /mcp)."""
    api: Api
    """An API token of theirs (for the REST API)."""


async def sign_in(world: World, account: str) -> SignedIn:
    """`account` signs in to the hub through the provider (a fresh browser profile) for an
    MCP client; the hub's access token, and an API token the admin makes for the user."""
    request = await CodeRequest.new(world.hub)
    back = await OidcWalk(world.hub.url, account, REDIRECT).walk(request.url)
    assert isinstance(back, str), back
    code = urllib.parse.parse_qs(urllib.parse.urlsplit(back).query)["code"][0]
    reply = await call("POST", world.hub.url + "/oauth/token", data={
        "grant_type": "authorization_code", "code": code, "redirect_uri": REDIRECT,
        "client_id": request.client_id, "code_verifier": request.verifier})
    assert reply.status == 200, reply.text
    hub_token = reply.body["access_token"]
    user_id = int(unverified_claims(hub_token)["sub"])
    root = Api(world.hub, world.hub.admin_token)
    made = await root.post(f"{ADMIN_USERS}/{user_id}/tokens", {"name": "tests"})
    assert made.status == 201, made.text
    return SignedIn(user_id, hub_token, Api(world.hub, made.body["secret"], user_id))


async def register(api: Api, world: World, name: str = "tx") -> dict[str, Any]:
    created = await api.create_upstream(name=name, url=world.upstream_url, transport="http",
                                        auth_mode="token_exchange")
    assert created["auth_mode"] == "token_exchange"
    return created


async def refresh(api: Api, upstream_id: str) -> Any:
    return await api.post(f"{UPSTREAMS}/{upstream_id}/refresh")


async def store_of(world: World) -> Store:
    return await Store.open(world.hub.database_url, world.hub.box, migrate=False)


async def exchange_by_hand(world: World, subject_token: str) -> str:
    """The exchange the hub makes, made by the test as the hub's client: a token for the
    upstream."""
    auth = {"Authorization": basic_authorization(world.stack.hub_client_id,
                                                 world.stack.hub_client_secret)}
    form = {"grant_type": TOKEN_EXCHANGE, "subject_token": subject_token,
            "subject_token_type": ACCESS_TOKEN_TYPE, "requested_token_type": ACCESS_TOKEN_TYPE,
            "resource": world.upstream_url}
    async with aiohttp.ClientSession() as http, \
            http.post(world.issuer + "/token", data=form, headers=auth) as reply:
        body = await reply.json()
        assert reply.status == 200, body
    assert body["issued_token_type"] == ACCESS_TOKEN_TYPE
    token: str = body["access_token"]
    return token


# --- the exchange, end to end ----------------------------------------------------------------


async def test_each_user_reaches_the_upstream_as_their_own_provider_subject(
        world: World, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpkit")
    mark = world.stack.mark()
    accounts = unique("ada"), unique("bob")
    users = [await sign_in(world, account) for account in accounts]
    upstreams = []
    for user in users:
        upstream = await register(user.api, world)
        refreshed = await refresh(user.api, upstream["id"])  # the first exchange
        assert refreshed.status == 200, refreshed.text
        assert refreshed.body["tool_count"] == 2
        upstreams.append(upstream)
    for user, account in zip(users, accounts, strict=True):
        async with Client(f"{world.hub.url}/mcp", bearer_token=user.hub_token,
                          timeouts=Timeouts(timeout=30.0)) as client:
            names = sorted(tool.name for tool in await client.list_tools())
            assert names == ["tx__token_claims", "tx__whoami"]
            for _ in range(3):
                assert text(await client.call_tool("tx__whoami", {})) == account
            seen = json.loads(text(await client.call_tool("tx__token_claims", {})))
        # the upstream got the provider's token for itself, for this user, to the hub's
        # client - never the hub's own token (whose issuer is the hub)
        assert seen == {"iss": world.issuer, "aud": world.upstream_url, "client_id": "hub",
                        "sub": account}
        assert unverified_claims(user.hub_token)["iss"] == world.hub.url
        exchanges = world.stack.events_since(mark, "token_exchange.success", account=account)
        assert [(e["client_id"], e["resource"]) for e in exchanges] == \
            [("hub", world.upstream_url)], "one exchange per user while the token is cached"
    async with await store_of(world) as store:
        for user, upstream in zip(users, upstreams, strict=True):
            assert not await store.upstream_logins.has(user.user_id, upstream["id"])
        subjects = [await store.oidc.subject_token(user.user_id, world.issuer) for user in users]
    engine = make_engine(world.hub.database_url)
    try:
        async with engine.connect() as connection:
            stored = (await connection.execute(sql(
                "SELECT COUNT(*) FROM upstream_logins"))).scalar_one()
    finally:
        await engine.dispose()
    assert stored == 0, "nothing is stored for a token-exchange upstream"
    for identity in subjects:
        assert identity is not None and identity.access_token
        assert identity.access_token not in caplog.text
    assert world.stack.hub_client_secret not in caplog.text
    assert "exchanged user" in caplog.text


async def test_the_exchanged_token_is_refused_by_the_hub_itself(world: World) -> None:
    account = unique("cy")
    user = await sign_in(world, account)
    async with await store_of(world) as store:
        identity = await store.oidc.subject_token(user.user_id, world.issuer)
    assert identity is not None and identity.access_token
    upstream_token = await exchange_by_hand(world, identity.access_token)
    async with Client(world.upstream_url, bearer_token=upstream_token,
                      timeouts=Timeouts(timeout=30.0)) as direct:  # the upstream takes it…
        assert text(await direct.call_tool("whoami", {})) == account
    hello = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "tx", "version": "1"}}}
    for token in (upstream_token, identity.access_token):  # …the hub takes neither
        reply = await call("POST", world.hub.url + "/mcp", json=hello, headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream"})
        assert reply.status == 401, reply.text
        assert 'error="invalid_token"' in reply.headers["WWW-Authenticate"]
        assert token not in reply.text


async def test_a_user_without_a_provider_identity_is_told_to_sign_in_through_it(
        world: World) -> None:
    _, api = await fresh_user(world.hub)  # a hub account of its own (no provider identity)
    upstream = await register(api, world)
    mark = world.stack.mark()
    reply = await refresh(api, upstream["id"])
    assert reply.status == 502, reply.text
    assert reply.error["message"] == (
        "tx: token exchange needs its owner's identity at the hub's OpenID Connect provider "
        "(the owner has never signed in through it): sign in to the hub through "
        f"{world.issuer} again")
    assert world.stack.events_since(mark, "grant.error") == []  # nothing asked of the provider
    # needs_auth (not unhealthy), with no login endpoint: the sign-in is the way back
    assert reply.error["code"] == "upstream_needs_auth"
    shown = (await api.get(f"{UPSTREAMS}/{upstream['id']}")).body
    assert shown["health_status"] == "needs_auth" and shown["login"] is None


async def test_an_expired_or_refused_provider_token_without_refresh_asks_for_a_sign_in(
        world: World) -> None:
    account = unique("dee")
    user = await sign_in(world, account)
    async with await store_of(world) as store:
        identity = await store.oidc.subject_token(user.user_id, world.issuer)
        assert identity is not None

        async def keep(**changed: Any) -> None:  # what a sign-in would have stored
            assert identity is not None
            await store.oidc.sign_in(world.issuer, account, names=[account],
                                     tokens=dataclasses.replace(identity, **changed),
                                     allow_signup=False)

        await keep(expires_at=time.time() - 1, refresh_token=None)  # nothing to refresh with
        mark = world.stack.mark()
        expired = await register(user.api, world, "late")
        reply = await refresh(user.api, expired["id"])
        assert reply.status == 502, reply.text
        assert "the provider's access token from the last sign-in has expired" in \
            reply.error["message"]
        assert world.issuer in reply.error["message"]
        assert world.stack.events_since(mark, "grant.error") == []  # refused before asking

        await keep(access_token="an-access-token-the-provider-never-issued",
                   refresh_token=None)
        reply = await refresh(user.api, expired["id"])
        assert reply.status == 502, reply.text
        assert "the provider refused the access token of the last sign-in " \
            "(invalid_grant)" in reply.error["message"]
        refusals = world.stack.events_since(mark, "grant.error", grant_type=TOKEN_EXCHANGE)
        assert [e["error"] for e in refusals] == ["invalid_grant"]
        assert "never-issued" not in reply.text

    again = await sign_in(world, account)  # signing in again through the provider mends it
    assert again.user_id == user.user_id
    assert (await refresh(user.api, expired["id"])).status == 200
    async with Client(f"{world.hub.url}/mcp", bearer_token=again.hub_token,
                      timeouts=Timeouts(timeout=30.0)) as client:
        assert text(await client.call_tool("late__whoami", {})) == account


async def test_a_token_past_its_life_is_exchanged_again(world: World) -> None:
    account = unique("eve")
    user = await sign_in(world, account)  # its provider token: the usual hour
    world.stack.set_access_token_ttl(2)  # the upstream tokens exchanged from now on: 2 s
    try:
        mark = world.stack.mark()
        upstream = await register(user.api, world, "brief")
        assert (await refresh(user.api, upstream["id"])).status == 200
        async with Client(f"{world.hub.url}/mcp", bearer_token=user.hub_token,
                          timeouts=Timeouts(timeout=30.0)) as client:
            assert text(await client.call_tool("brief__whoami", {})) == account
            await anyio.sleep(2.5)  # every token exchanged so far has expired
            assert text(await client.call_tool("brief__whoami", {})) == account
    finally:
        world.stack.set_access_token_ttl(3600)
    exchanges = world.stack.events_since(mark, "token_exchange.success", account=account)
    assert len(exchanges) >= 2


async def test_an_expiring_provider_token_is_refreshed_once_before_the_exchange(
        world: World) -> None:
    account = unique("fay")
    user = await sign_in(world, account)
    async with await store_of(world) as store:
        signed = await store.oidc.subject_token(user.user_id, world.issuer)
        assert signed is not None and signed.refresh_token  # --token-exchange: the hub's too
        await store.oidc.refreshed(user.user_id, world.issuer, dataclasses.replace(
            signed, expires_at=time.time() + 5))  # within the hub's refresh margin
    mark = world.stack.mark()
    upstreams = [await register(user.api, world, name) for name in ("one", "two")]
    async with anyio.create_task_group() as group:  # both need the provider token at once
        for upstream in upstreams:
            group.start_soon(refresh, user.api, upstream["id"])
    refreshes = world.stack.events_since(mark, "grant.success", grant_type="refresh_token",
                                         client_id="hub")
    assert len(refreshes) == 1, "one refresh of the user's provider tokens"
    exchanges = world.stack.events_since(mark, "token_exchange.success", account=account)
    assert len(exchanges) == 2  # one per upstream
    async with await store_of(world) as store:
        renewed = await store.oidc.subject_token(user.user_id, world.issuer)
        assert renewed is not None and renewed.expires_at is not None
        assert renewed.access_token != signed.access_token
        assert renewed.refresh_token not in (None, signed.refresh_token)  # rotated, kept
        assert renewed.expires_at > time.time() + 60 and renewed.id_token == signed.id_token
        # the rotated-away refresh token: the provider refuses it (and drops the grant)
        await store.oidc.refreshed(user.user_id, world.issuer, dataclasses.replace(
            renewed, expires_at=time.time() - 1, refresh_token=signed.refresh_token))
    async with Client(f"{world.hub.url}/mcp", bearer_token=user.hub_token,
                      timeouts=Timeouts(timeout=30.0)) as client:
        assert text(await client.call_tool("one__whoami", {})) == account  # cached
    late = await register(user.api, world, "three")
    reply = await refresh(user.api, late["id"])
    assert reply.status == 502, reply.text
    assert "the provider refused the refresh token of the last sign-in (invalid_grant)" in \
        reply.error["message"]


# --- registration -------------------------------------------------------------------------


@pytest.fixture
def plain_hub(tmp_path: Any) -> Iterator[Hub]:
    """A hub without an OpenID Connect provider."""
    with router_hub(f"sqlite+aiosqlite:///{tmp_path / 'plain.db'}") as hub:
        yield hub


async def test_token_exchange_needs_the_hubs_provider_and_a_network_upstream(
        world: World, plain_hub: Hub) -> None:
    _, api = await fresh_user(world.hub)
    stdio = await api.post(UPSTREAMS, {"name": "local", "transport": "stdio",
                                       "command": ["true"], "auth_mode": "token_exchange"})
    assert stdio.status == 422, stdio.text
    assert stdio.error["message"] == ('auth_mode "token_exchange" needs a network upstream '
                                      "(http, sse or ws), not stdio")
    _, other = await fresh_user(plain_hub)
    refused = await other.post(UPSTREAMS, {"name": "tx", "transport": "http",
                                           "url": world.upstream_url,
                                           "auth_mode": "token_exchange"})
    assert refused.status == 422, refused.text
    expected = ('auth_mode "token_exchange" needs the hub to sign users in with an '
                "OpenID Connect provider (mcpkit hub serve --oidc-issuer): this hub has none")
    assert refused.error["message"] == expected
    assert refused.error.get("field") == "auth_mode"
    static = await other.create_upstream(name="st", transport="http", url=world.upstream_url)
    patched = await other.patch(f"{UPSTREAMS}/{static['id']}", {"auth_mode": "token_exchange"})
    assert patched.status == 422 and patched.error["message"] == expected
