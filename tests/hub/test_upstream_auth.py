"""`LoginAuth` and `client_auth` (hub/upstream_auth.py) over a real store and a real token
endpoint on 127.0.0.1 (a small aiohttp server that counts refreshes): one refresh for many
holders at once, invalid_grant drops the login, a network failure keeps it, a static upstream
needs no login, an OAuth one without a login raises UpstreamNeedsLogin naming its start."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from aiohttp import web
from tests.procs import free_port, serving

from mcpkit.auth.metadata import AuthorizationServerMetadata
from mcpkit.auth.tokens import ClientRegistration, TokenKey, TokenSet
from mcpkit.client.token_records import StoredGrant, decode_grant
from mcpkit.hub.api.context import HubContext
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store, UpstreamRecord, UpstreamSpec
from mcpkit.hub.upstream_auth import (
    LoginAuth,
    RefreshLock,
    StoredLogin,
    UpstreamNeedsLogin,
    client_auth,
)
from mcpkit.hub.upstream_client import UpstreamUnavailable

pytestmark = pytest.mark.anyio
RESOURCE = "https://mcp.example.com/mcp"


@dataclass
class TokenEndpoint:
    url: str
    answer: str = "fresh"  # or "invalid_grant"
    refreshes: list[str] = field(default_factory=list)


@contextlib.asynccontextmanager
async def token_endpoint() -> AsyncIterator[TokenEndpoint]:
    port = free_port()
    endpoint = TokenEndpoint(f"http://127.0.0.1:{port}/token")

    async def token(request: web.Request) -> web.Response:
        form = await request.post()
        endpoint.refreshes.append(str(form["refresh_token"]))
        await anyio.sleep(0.2)  # long enough for every other holder to queue
        if endpoint.answer == "invalid_grant":
            return web.json_response({"error": "invalid_grant"}, status=400)
        n = len(endpoint.refreshes)
        return web.json_response({"access_token": f"access-{n}", "token_type": "Bearer",
                                  "expires_in": 3600, "refresh_token": f"refresh-{n}"})

    app = web.Application()
    app.router.add_post("/token", token)
    async with serving(app, port):
        yield endpoint


async def oauth_upstream(store: Store, auth_mode: str = "oauth") -> UpstreamRecord:
    user = await store.users.create(f"user-{time.monotonic_ns() % 10**9}")
    return await store.upstreams.create(user.id, UpstreamSpec(
        name="who", transport="http", url=RESOURCE, auth_mode=auth_mode))  # type: ignore[arg-type]


async def stored_login(store: Store, upstream: UpstreamRecord, token_url: str) -> StoredGrant:
    """An expired login (access-0, refresh-0) whose authorization server is `token_url`'s."""
    metadata = AuthorizationServerMetadata(
        issuer="http://127.0.0.1", authorization_endpoint="http://127.0.0.1/authorize",
        token_endpoint=token_url)
    client = ClientRegistration("hub-client", None, "none", "dcr")
    grant = StoredGrant(TokenKey(RESOURCE, metadata.issuer, client.client_id),
                        TokenSet("access-0", refresh_token="refresh-0",
                                 expires_at=time.time() - 1), ("read",), metadata, client)
    await login_of(store, upstream).save(grant)
    return grant


async def kept(store: Store, upstream: UpstreamRecord) -> StoredGrant | None:
    record = await store.upstream_logins.get(upstream.user_id, upstream.id)
    return None if record is None else decode_grant(record.encode(), "test")


def holder(store: Store, upstream: UpstreamRecord, grant: StoredGrant) -> LoginAuth:
    """One connection's auth (each replica or pool entry has its own)."""
    return LoginAuth(login_of(store, upstream), upstream, grant)


def login_of(store: Store, upstream: UpstreamRecord) -> StoredLogin:
    return StoredLogin(store, RefreshLock(None), upstream.user_id, upstream.id)


async def test_many_holders_of_one_expired_login_refresh_it_once(sqlite_store: Store) -> None:
    upstream = await oauth_upstream(sqlite_store)
    async with token_endpoint() as endpoint:
        grant = await stored_login(sqlite_store, upstream, endpoint.url)
        sent: list[Any] = []

        async def one() -> None:
            sent.append(await holder(sqlite_store, upstream, grant).headers(RESOURCE))

        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(one)
    assert endpoint.refreshes == ["refresh-0"]
    assert sent == [{"Authorization": "Bearer access-1"}] * 5
    stored = await kept(sqlite_store, upstream)
    assert stored is not None and stored.tokens.refresh_token == "refresh-1"


async def test_a_401_refreshes_and_sends_again_and_invalid_grant_drops_the_login(
        sqlite_store: Store) -> None:
    upstream = await oauth_upstream(sqlite_store)
    async with token_endpoint() as endpoint:
        grant = await stored_login(sqlite_store, upstream, endpoint.url)
        fresh = StoredGrant(grant.key, TokenSet("access-0", refresh_token="refresh-0",
                                                expires_at=time.time() + 3600),
                            grant.scopes, grant.metadata, grant.client)
        auth = holder(sqlite_store, upstream, fresh)
        assert await auth.headers(RESOURCE) == {"Authorization": "Bearer access-0"}
        assert await auth.challenge(RESOURCE, 401, {}) is True  # refreshed: send again
        assert await auth.headers(RESOURCE) == {"Authorization": "Bearer access-1"}
        assert await auth.challenge(RESOURCE, 403, {}) is False  # not a login problem
        endpoint.answer = "invalid_grant"
        with pytest.raises(UpstreamNeedsLogin, match="/oauth/start"):
            await auth.challenge(RESOURCE, 401, {})
    assert await kept(sqlite_store, upstream) is None


async def test_a_network_failure_keeps_the_login(sqlite_store: Store) -> None:
    upstream = await oauth_upstream(sqlite_store)
    grant = await stored_login(sqlite_store, upstream, f"http://127.0.0.1:{free_port()}/token")
    with pytest.raises(UpstreamUnavailable) as raised:
        await holder(sqlite_store, upstream, grant).headers(RESOURCE)
    assert not isinstance(raised.value, UpstreamNeedsLogin)
    stored = await kept(sqlite_store, upstream)
    assert stored is not None and stored.tokens.refresh_token == "refresh-0"


async def test_client_auth_by_auth_mode(sqlite_store: Store) -> None:
    context = HubContext(HubSettings(), sqlite_store, box=None)  # type: ignore[arg-type]
    static = await oauth_upstream(sqlite_store, "static")
    assert await client_auth(context, static) is None
    oauth = await oauth_upstream(sqlite_store)
    with pytest.raises(UpstreamNeedsLogin) as raised:
        await client_auth(context, oauth, purpose="catalog")
    assert f"/api/v1/users/mcp/upstreams/{oauth.id}/oauth/start" in str(raised.value)
    await stored_login(sqlite_store, oauth, "http://127.0.0.1:9/token")
    assert isinstance(await client_auth(context, oauth), LoginAuth)


@pytest.mark.parametrize("url", ["http://127.0.0.1:9/token", "http://localhost:9/token",
                                 "https://169.254.169.254/latest", "http://[::1]:9/x",
                                 "https://10.1.2.3/token"])
async def test_the_hubs_oauth_requests_refuse_private_hosts_unless_allowed(url: str) -> None:
    """The upstream (and the authorization server its metadata names) are someone else's
    URLs: the hub's OAuth requests keep to its SSRF rule."""
    from mcpkit.auth.errors import AuthorizationError
    from mcpkit.client.oauth_http import OAuthHttp

    with pytest.raises(AuthorizationError, match=r"refused|BlockedAddress"):
        await OAuthHttp(allow_private=False).get(url)
    if url.startswith("http://"):  # loopback, allowed: it tries (and nothing listens)
        with pytest.raises(AuthorizationError) as allowed:
            await OAuthHttp(allow_private=True, timeout_s=2).get(url)
        assert "refused to connect" not in str(allowed.value)
