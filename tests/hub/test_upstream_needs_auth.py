"""An upstream that wants authorization is `needs_auth`, told apart from a dead one, and its
catalog and health checks may use credentials of their own - against real upstreams on
127.0.0.1 and a real hub (REST + /mcp) on SQLite and PostgreSQL:

- registered without credentials, a protected upstream - the OAuth test server
  (tests/client/oauth_server.py: `WWW-Authenticate: Bearer resource_metadata=…`) and `mcpkit
  serve --token` (a bare `Bearer`) - is `needs_auth` after its first refresh, whose 502
  `upstream_needs_auth`, `last_error` and `login` name `POST …/{id}/oauth/start`; switched to
  `auth_mode` "oauth", that endpoint answers the authorization URL; given the token, the other
  is healthy;
- an upstream whose port is closed is `unhealthy`, with no login hint;
- a token the authorization server expires between two health passes makes the upstream
  `needs_auth` on the next pass (and the metrics count it), while a dead one next to it is
  `unhealthy`;
- with catalog credentials, the upstream itself (tests/hub/guarded_upstream.py records the
  token of every request) sees the catalog fetch and the health check carry the catalog token
  and `tools/call` the call token; revoking the call token makes the next call an `isError`
  result naming the login (a prompt: a JSON-RPC error whose data names it), and the upstream
  `needs_auth`;
- an "oauth" upstream whose owner has no login is `needs_auth` before anything is sent, even
  with catalog credentials;
- the CLI warns with the login endpoint and shows it (`upstream get`), and the catalog
  credentials masked;
- the store gives each purpose its credentials (sealed, kept across updates);
- the detection itself (`client.auth_refusal`, `hub.needs_auth`) on the exceptions the Client
  raises, for any `WWW-Authenticate` value (hypothesis).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from tests.client import oauth_server
from tests.client.oauth_server import AuthServer, Issued
from tests.hub.guarded_upstream import guarded_upstream
from tests.hub.hub_helpers import (
    UPSTREAMS,
    Hub,
    database_for,
    fresh_user,
    open_store,
    upstream_process,
)
from tests.hub.router.support import hub_client, router_hub, text
from tests.hub.test_store import raw
from tests.procs import free_port

from mcpkit.auth.errors import AuthorizationError, AuthorizationFailed, AuthorizationNotConfigured
from mcpkit.client import ServerError
from mcpkit.client.auth_refusal import authorization_refusal
from mcpkit.hub.api.context import HubContext
from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.health import HealthChecker
from mcpkit.hub.needs_auth import UpstreamNeedsAuth, login_path, refusal
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store, UpstreamRecord, UpstreamSpec
from mcpkit.hub.upstream_client import UpstreamUnavailable
from mcpkit.transports.client.base import HttpStatusError

pytestmark = pytest.mark.anyio

SERVE_TOKEN = "serve-token-0123456789abcdef"
CATALOG_TOKEN = "catalog-token-0123456789abcdef"
CALL_TOKEN = "call-token-0123456789abcdef"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    url = database_for(request, request.param, tmp_path_factory.mktemp("hub"))
    with router_hub(url) as running:
        yield running


@pytest.fixture(scope="module")
def oauth_upstream() -> Iterator[AuthServer]:
    with oauth_server.running() as auth:
        yield auth


@pytest.fixture(scope="module")
def serve_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    workspace = tmp_path_factory.mktemp("workspace")
    with upstream_process("-m", "mcpkit", "serve", "--token", SERVE_TOKEN, "--workspace",
                          str(workspace), "--port") as served:
        yield served.url


def closed_port_url() -> str:
    return f"http://127.0.0.1:{free_port()}/mcp"


# --- registration (REST) ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["oauth", "bare-bearer"])
async def test_a_protected_upstream_registered_without_credentials_needs_auth(
    hub: Hub, oauth_upstream: AuthServer, serve_upstream: str, kind: str
) -> None:
    _, api = await fresh_user(hub)
    url = oauth_upstream.resource if kind == "oauth" else serve_upstream
    created = await api.create_upstream(name="docs", url=url)
    start = login_path(created["id"])

    refreshed = await api.post(f"{UPSTREAMS}/{created['id']}/refresh")
    assert refreshed.status == 502, refreshed.text
    assert refreshed.error["code"] == "upstream_needs_auth"
    assert start in refreshed.error["message"]

    shown = (await api.get(f"{UPSTREAMS}/{created['id']}")).body
    assert shown["health_status"] == "needs_auth"
    assert shown["login"]["method"] == "POST" and shown["login"]["path"] == start
    expected = "it asks for an OAuth login (HTTP 401)" if kind == "oauth" else (
        "it asks for authorization (HTTP 401)")
    assert shown["last_error"].startswith(
        f'docs: {expected}; set its auth_mode to "oauth" (PATCH) and log in with POST {start}')
    assert shown["login"]["message"].startswith('set its auth_mode to "oauth"')
    listed = (await api.get(UPSTREAMS)).body["items"]
    assert [(u["name"], u["health_status"]) for u in listed] == [("docs", "needs_auth")]

    if kind == "oauth":  # switched to the owner's login, the hint's endpoint starts it
        patched = await api.patch(f"{UPSTREAMS}/{created['id']}", {"auth_mode": "oauth"})
        assert patched.status == 200, patched.text
        assert patched.body["login"]["message"] == (
            f"log in with POST {start} (it answers with the authorization URL to open)")
        started = await api.post(start)
        assert started.status == 200, started.text
        assert started.body["authorization_url"].startswith(f"{oauth_upstream.base}/authorize?")

    if kind == "bare-bearer":  # the token it wants: healthy, the hint gone
        patched = await api.patch(f"{UPSTREAMS}/{created['id']}", {"bearer_token": SERVE_TOKEN})
        assert patched.status == 200, patched.text
        healthy = await api.post(f"{UPSTREAMS}/{created['id']}/refresh")
        assert healthy.status == 200, healthy.text
        assert healthy.body["health_status"] == "healthy" and healthy.body["login"] is None
        assert healthy.body["tool_count"] > 0


async def test_the_cli_says_how_to_log_in(hub: Hub, oauth_upstream: AuthServer) -> None:
    """`mcpkit hub upstream add` keeps the registration and warns with the login endpoint;
    `get` shows it and what the catalog sends (masked)."""
    _, api = await fresh_user(hub)
    env = {**os.environ, "MCPKIT_HUB_URL": hub.url, "MCPKIT_HUB_TOKEN": str(api.token)}
    added = await anyio.to_thread.run_sync(lambda: _mcpkit(
        env, "hub", "upstream", "add", "docs", oauth_upstream.resource))
    assert added.returncode == 0, added.stderr
    assert "docs added" in added.stdout
    assert ('it asks for an OAuth login (HTTP 401); set its auth_mode to "oauth" (PATCH) and '
            "log in with POST") in added.stderr
    upstream_id = (await api.get(UPSTREAMS)).body["items"][0]["id"]
    shown = await anyio.to_thread.run_sync(lambda: _mcpkit(env, "hub", "upstream", "get",
                                                           "docs"))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert any(line.split() == ["health:", "needs_auth", *line.split()[2:]] for line in lines)
    assert any(line.split() == ["login:", "POST", login_path(upstream_id)] for line in lines)
    assert any(line.split() == ["catalog", "auth:", "as", "for", "calls"]
               for line in lines)

    split = await anyio.to_thread.run_sync(lambda: _mcpkit(
        env, "hub", "upstream", "add", "split", closed_port_url(), "--no-refresh",
        "--catalog-bearer", CATALOG_TOKEN, "--catalog-header", "X-Catalog: v-0123456789abcdef"))
    assert split.returncode == 0, split.stderr
    shown = await anyio.to_thread.run_sync(lambda: _mcpkit(env, "hub", "upstream", "get",
                                                           "split"))
    assert any(line.split() == ["catalog", "auth:", "X-Catalog:", "…cdef,", "bearer", "…cdef"]
               for line in shown.stdout.splitlines()), shown.stdout
    assert CATALOG_TOKEN not in split.stdout + shown.stdout


def _mcpkit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpkit", *args], env=env,
                          capture_output=True, text=True, timeout=90, check=False)


async def test_a_dead_upstream_is_unhealthy_not_needs_auth(hub: Hub) -> None:
    _, api = await fresh_user(hub)
    created = await api.create_upstream(name="gone", url=closed_port_url(),
                                        connect_timeout_s=3)
    refreshed = await api.post(f"{UPSTREAMS}/{created['id']}/refresh")
    assert refreshed.status == 502 and refreshed.error["code"] == "upstream_unavailable"
    assert "oauth/start" not in refreshed.error["message"]
    shown = (await api.get(f"{UPSTREAMS}/{created['id']}")).body
    assert shown["health_status"] == "unhealthy" and shown["login"] is None


# --- separate catalog credentials ---------------------------------------------------------------


async def test_catalog_credentials_serve_the_catalog_and_call_credentials_the_calls(
    hub: Hub
) -> None:
    _, api = await fresh_user(hub)
    with guarded_upstream({CATALOG_TOKEN, CALL_TOKEN}) as guard:
        created = await api.create_upstream(name="split", url=guard.url,
                                            bearer_token=CALL_TOKEN,
                                            catalog_bearer_token=CATALOG_TOKEN)
        assert created["has_catalog_bearer"] and created["catalog_bearer_token_hint"] == "…cdef"
        assert CATALOG_TOKEN not in str(created) and CALL_TOKEN not in str(created)

        refreshed = await api.post(f"{UPSTREAMS}/{created['id']}/refresh")
        assert refreshed.status == 200 and refreshed.body["health_status"] == "healthy"
        async with hub_client(hub, api) as client:
            result = await client.call_tool("split__echo", {"text": "hello"})
            assert text(result) == "hello"
        assert "tools/list" in guard.methods_with(CATALOG_TOKEN)
        assert "tools/call" not in guard.methods_with(CATALOG_TOKEN)
        assert "tools/call" in guard.methods_with(CALL_TOKEN)
        assert "tools/list" not in guard.methods_with(CALL_TOKEN)

        guard.seen.clear()  # a health check: the catalog token too
        async with await open_store(hub) as store:
            checker = HealthChecker(HubContext(hub.settings, store, hub.box))
            assert await checker.check(await store.upstreams.get(api.user_id, created["id"]))
        assert "tools/list" in guard.methods_with(CATALOG_TOKEN)
        assert not guard.methods_with(CALL_TOKEN)

        # the call token revoked: the next call says what to do, the upstream needs_auth
        guard.tokens.discard(CALL_TOKEN)
        async with hub_client(hub, api) as client:
            refused = await client.call_tool("split__echo", {"text": "again"})
        assert refused.is_error
        assert "needs authorization" in text(refused)
        assert login_path(created["id"]) in text(refused)
        shown = (await api.get(f"{UPSTREAMS}/{created['id']}")).body
        assert shown["health_status"] == "needs_auth"
        assert "refused the stored credentials" in shown["last_error"]
        async with hub_client(hub, api) as client:  # a prompt: a JSON-RPC error naming it
            with pytest.raises(ServerError) as failed:
                await client.get_prompt("split__greet")
        assert "needs authorization" in failed.value.message
        assert failed.value.data == {"upstream": "split", "login": login_path(created["id"])}

        # cleared: the catalog falls back to the call credentials
        guard.tokens.add(CALL_TOKEN)
        cleared = await api.patch(f"{UPSTREAMS}/{created['id']}", {"catalog_bearer_token": None})
        assert cleared.status == 200 and not cleared.body["has_catalog_bearer"]
        guard.seen.clear()
        assert (await api.post(f"{UPSTREAMS}/{created['id']}/refresh")).status == 200
        assert "tools/list" in guard.methods_with(CALL_TOKEN)
        assert not guard.methods_with(CATALOG_TOKEN)


async def test_an_oauth_upstream_without_its_owners_login_needs_auth_before_any_request(
    hub: Hub
) -> None:
    """Catalog credentials do not stand in for the owner's login: without one the catalog
    is not fetched (nothing reaches the upstream) and the upstream is needs_auth."""
    _, api = await fresh_user(hub)
    with guarded_upstream({CATALOG_TOKEN}) as guard:
        created = await api.create_upstream(name="mine", url=guard.url, auth_mode="oauth",
                                            catalog_bearer_token=CATALOG_TOKEN)
        refreshed = await api.post(f"{UPSTREAMS}/{created['id']}/refresh")
        assert refreshed.status == 502 and refreshed.error["code"] == "upstream_needs_auth"
        assert refreshed.error["message"] == (
            f"mine: needs its owner's OAuth login (no login): POST {login_path(created['id'])}")
        shown = (await api.get(f"{UPSTREAMS}/{created['id']}")).body
        assert shown["health_status"] == "needs_auth"
        assert shown["login"]["path"] == login_path(created["id"])
        assert guard.seen == []


async def test_catalog_headers_are_checked_like_headers(hub: Hub) -> None:
    _, api = await fresh_user(hub)
    created = await api.create_upstream(name="checked", url=closed_port_url(),
                                        catalog_headers={"X-Catalog-Key": "secret-value-123456"})
    assert created["catalog_headers"] == {"X-Catalog-Key": "…3456"}
    assert created["has_catalog_bearer"] is False
    for bad, field in (({"Host": "x"}, "catalog_headers.Host"),
                       ({"X-A": "1", "x-a": "2"}, "catalog_headers.x-a")):
        reply = await api.patch(f"{UPSTREAMS}/{created['id']}", {"catalog_headers": bad})
        assert reply.status == 422, reply.text
        assert reply.error["field"] == field
    bad_bearer = await api.patch(f"{UPSTREAMS}/{created['id']}",
                                 {"catalog_bearer_token": "two words"})
    assert bad_bearer.status == 422


async def test_the_store_gives_each_purpose_its_credentials(store: Store) -> None:
    """Catalog credentials replace the call ones as a whole (nothing mixed), an update keeps
    them sealed as they are, clearing them falls back; sealed at rest."""
    from mcpkit.hub.store import Invalid, UpstreamChanges

    user = await store.users.create(f"creds-{free_port()}")
    created = await store.upstreams.create(user.id, UpstreamSpec(
        name="split", transport="http", url=closed_port_url(), headers={"X-Call": "c"},
        bearer=CALL_TOKEN, catalog_headers={"X-Catalog": "k"}))
    assert created.has_catalog_headers and not created.has_catalog_bearer
    call = await store.upstreams.credentials(user.id, created.id)
    catalog = await store.upstreams.credentials(user.id, created.id, purpose="catalog")
    assert (dict(call.headers), call.bearer) == ({"X-Call": "c"}, CALL_TOKEN)
    assert (dict(catalog.headers), catalog.bearer) == ({"X-Catalog": "k"}, None)

    query = "SELECT catalog_headers_encrypted FROM upstreams WHERE id = :id"
    sealed = (await raw(store, query, id=created.id))[0][0]
    assert "X-Catalog" not in sealed
    renamed = await store.upstreams.update(user.id, created.id, UpstreamChanges(name="moved"))
    assert renamed.has_catalog_headers
    assert (await raw(store, query, id=created.id))[0][0] == sealed  # kept, not re-sealed
    kept = await store.upstreams.credentials(user.id, created.id, purpose="catalog")
    assert dict(kept.headers) == {"X-Catalog": "k"}

    await store.upstreams.update(user.id, created.id, UpstreamChanges(catalog_headers=None))
    fallback = await store.upstreams.credentials(user.id, created.id, purpose="catalog")
    assert (dict(fallback.headers), fallback.bearer) == ({"X-Call": "c"}, CALL_TOKEN)

    with pytest.raises(Invalid) as refused:
        await store.upstreams.update(user.id, created.id,
                                     UpstreamChanges(catalog_bearer="two words"))
    assert refused.value.field == "catalog_bearer"
    await store.upstreams.set_health(user.id, created.id, "needs_auth", error="docs: 401")
    assert (await store.upstreams.health_counts())["needs_auth"] >= 1


# --- the health checker -----------------------------------------------------------------------


async def test_a_token_that_expires_between_passes_makes_the_upstream_needs_auth(
    store: Store, box: SecretBox, oauth_upstream: AuthServer
) -> None:
    token = f"issued-{free_port()}-0123456789"
    oauth_upstream.access[token] = Issued(scopes=["mcp:read"], expires_at=time.time() + 3600)
    user = await store.users.create(f"health-{free_port()}")
    protected = await _register(store, user.id, "docs", oauth_upstream.resource, bearer=token)
    dead = await _register(store, user.id, "dead", closed_port_url())
    context = HubContext(HubSettings(allow_private_upstreams=True, health_interval_s=0.01),
                         store, box)
    checker = HealthChecker(context)

    assert await checker.run_pass() == 2
    assert (await store.upstreams.get(user.id, protected.id)).health_status == "healthy"
    assert (await store.upstreams.get(user.id, dead.id)).health_status == "unhealthy"

    oauth_upstream.access[token].expires_at = time.time() - 1  # expired at the AS
    await _until_checked_again(checker, store, protected)
    record = await store.upstreams.get(user.id, protected.id)
    assert record.health_status == "needs_auth"
    assert record.last_error is not None and login_path(protected.id) in record.last_error
    assert token not in record.last_error
    assert (await store.upstreams.get(user.id, dead.id)).health_status == "unhealthy"
    samples = _samples(context)
    assert samples[("mcpkit_hub_upstreams", ("needs_auth",))] >= 1
    assert samples[("mcpkit_hub_upstream_checks_total", ("needs_auth",))] >= 1


async def _register(store: Store, user_id: int, name: str, url: str,
                    bearer: str | None = None) -> UpstreamRecord:
    return await store.upstreams.create(user_id, UpstreamSpec(
        name=name, transport="http", url=url, bearer=bearer, connect_timeout_s=3,
        call_timeout_s=5))


async def _until_checked_again(checker: HealthChecker, store: Store,
                               upstream: UpstreamRecord) -> None:
    """Passes until `upstream` was checked after its current check (bounded)."""
    before = (await store.upstreams.get(upstream.user_id, upstream.id)).last_checked_at
    for _ in range(200):
        await checker.run_pass()
        after = (await store.upstreams.get(upstream.user_id, upstream.id)).last_checked_at
        if after != before:
            return
    raise AssertionError("the upstream was not checked again")


def _samples(context: HubContext) -> dict[tuple[str, tuple[str, ...]], float]:
    rendered = context.metrics.render()[0].decode()
    return {(s.name, tuple(s.labels.values())): s.value
            for family in text_string_to_metric_families(rendered) for s in family.samples}


# --- the detection ------------------------------------------------------------------------------


def _record() -> UpstreamRecord:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return UpstreamRecord(
        id="00000000-0000-4000-8000-000000000024", user_id=1, name="up", transport="http",
        url="http://127.0.0.1:1/mcp", command=None, has_headers=False, has_bearer=False,
        enabled=True, enabled_tools=None, disabled_tools=(), connect_timeout_s=5.0,
        call_timeout_s=5.0, health_status="unknown", last_error=None, last_checked_at=None,
        tool_count=0, catalog_updated_at=None, created_at=now, updated_at=now, version=1)


def _wrapped(error: BaseException) -> UpstreamUnavailable:
    """`error` as fetch_catalog's callers see it: the cause of another exception."""
    try:
        raise UpstreamUnavailable("up: failed") from error
    except UpstreamUnavailable as outer:
        return outer


@given(st.text(max_size=400))
def test_any_401_is_an_authorization_refusal_whatever_its_challenge(value: str) -> None:
    error = _wrapped(HttpStatusError(401, b"no", {"WWW-Authenticate": value}))
    found = authorization_refusal(error)
    assert found is not None and found.status == 401
    refused = refusal(_record(), error, sent_credentials=False)
    assert isinstance(refused, UpstreamNeedsAuth)
    assert str(refused).startswith("up: it asks for ")
    assert refused.login_path == login_path(_record().id)


@pytest.mark.parametrize(("error", "needs_auth"), [
    (HttpStatusError(401, b"", {"www-authenticate": 'Bearer resource_metadata="https://x/y"'}),
     True),
    (AuthorizationFailed("https://x/mcp", AuthorizationNotConfigured("no client id")), True),
    (AuthorizationFailed("https://x/mcp", AuthorizationError("the AS said no")), False),
    (HttpStatusError(403, b"", {"www-authenticate": 'Bearer error="insufficient_scope"'}),
     False),
    (HttpStatusError(500, b"boom"), False),
    (ConnectionRefusedError("refused"), False),
])
def test_which_failures_are_needs_auth(error: BaseException, needs_auth: bool) -> None:
    assert (refusal(_record(), _wrapped(error), sent_credentials=True) is not None) is needs_auth
