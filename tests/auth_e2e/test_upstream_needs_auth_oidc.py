"""The hub's `needs_auth` against the real authorization server (oidc-provider,
tests/auth_e2e/stack.py) and a protected `mcpkit serve --auth-issuer` upstream (opaque tokens,
checked by introspection at the provider), every piece a real process on 127.0.0.1, the hub's
store on SQLite and PostgreSQL:

- registered without credentials, the upstream's genuine OAuth challenge makes it
  `needs_auth`, its `last_error` naming the login endpoint;
- with a client-credentials token that the provider lets expire, the first health pass finds
  it healthy, and the first pass after the provider stopped accepting the token `needs_auth`
  (the login expired: not `unhealthy`, which stays for an upstream that cannot be reached).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import aiohttp
import anyio
import pytest
from tests.auth_e2e.serve_process import Served
from tests.auth_e2e.stack import Stack
from tests.auth_e2e.test_protected_serve import READ, introspecting_serve, machine_token
from tests.hub.conftest import box, database_url, store
from tests.procs import free_port
from tests.services_fixtures import postgres_db, postgres_server

from mcpkit.hub.api.context import HubContext
from mcpkit.hub.catalog import UpstreamNeedsAuth, refresh_catalog
from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.health import HealthChecker
from mcpkit.hub.needs_auth import login_path
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store, UpstreamRecord, UpstreamSpec

__all__ = ["box", "database_url", "postgres_db", "postgres_server", "store"]  # the fixtures

pytestmark = pytest.mark.anyio

TOKEN_TTL_S = 2
EXPIRY_LIMIT_S = 30.0
"""How long the test waits for the provider to stop accepting the short-lived token."""


@pytest.fixture(scope="module")
def served(oidc_stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with introspecting_serve(tmp_path_factory.mktemp("serve-upstream"), oidc_stack) as process:
        yield process


def settings() -> HubSettings:
    return HubSettings(allow_private_upstreams=True, health_interval_s=0.01)


async def register(store: Store, name: str, url: str, bearer: str | None = None
                   ) -> UpstreamRecord:
    user = await store.users.create(f"oidc-{name}-{free_port()}")
    return await store.upstreams.create(user.id, UpstreamSpec(
        name=name, transport="http", url=url, bearer=bearer, connect_timeout_s=5,
        call_timeout_s=10))


async def test_registered_without_credentials_the_oauth_upstream_needs_auth(
    store: Store, served: Served
) -> None:
    upstream = await register(store, "docs", served.url)
    with pytest.raises(UpstreamNeedsAuth):
        await refresh_catalog(store, upstream, settings())
    record = await store.upstreams.get(upstream.user_id, upstream.id)
    assert record.health_status == "needs_auth"
    assert record.last_error is not None
    assert record.last_error.startswith(
        'docs: it asks for an OAuth login (HTTP 401); set its auth_mode to "oauth" (PATCH) and '
        f"log in with POST {login_path(upstream.id)}")


async def test_a_login_that_expires_at_the_provider_is_needs_auth_on_the_next_pass(
    stack: Stack, store: Store, box: SecretBox, served: Served
) -> None:
    stack.set_access_token_ttl(TOKEN_TTL_S)
    token = await machine_token(stack, served.url, [READ])
    upstream = await register(store, "expiring", served.url, bearer=token)
    checker = HealthChecker(HubContext(settings(), store, box))

    assert await checker.run_pass() == 1
    assert (await store.upstreams.get(upstream.user_id, upstream.id)).health_status == "healthy"

    await _until_refused(served.url, token)
    assert await checker.run_pass() == 1
    record = await store.upstreams.get(upstream.user_id, upstream.id)
    assert record.health_status == "needs_auth"
    assert record.last_error is not None and login_path(upstream.id) in record.last_error
    assert "refused the stored credentials" in record.last_error
    assert token not in record.last_error


async def _until_refused(url: str, token: str) -> None:
    """Until the upstream answers `token` with 401 (the provider says it expired); bounded."""
    message = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"}}}
    headers = {"Authorization": f"Bearer {token}",
               "Accept": "application/json, text/event-stream"}
    deadline = time.monotonic() + EXPIRY_LIMIT_S
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            async with http.post(url, json=message, headers=headers) as reply:
                if reply.status == 401:
                    return
            await anyio.sleep(0.5)
    raise AssertionError(f"the token was still accepted after {EXPIRY_LIMIT_S:g} s")
