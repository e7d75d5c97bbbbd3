"""Per-user OAuth logins to upstreams, end to end: the real oidc-provider is the upstream's
authorization server, a real protected MCP server (whoami_upstream.py: mcpkit's resource
server) the upstream, and its `whoami` tool shows at the upstream whose login a call carried.

One provider and one protected upstream per module; one hub (SQLite) for the single-replica
tests; the replica test brings two hubs on PostgreSQL and Redis."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from tests.auth_e2e.logins import FormLogin
from tests.auth_e2e.stack import Stack, running_stack
from tests.hub.hostile_auth_server import hostile_server
from tests.hub.hub_helpers import UPSTREAMS, Api, Hub, fresh_user
from tests.hub.upstream_login_support import (
    CALLBACK,
    age_login,
    alter_login,
    authorize,
    connect,
    expire_pending,
    land,
    mcp_session,
    outcome,
    raw_call,
    refresh_at_provider,
    register_oauth,
    router_hubs,
    seed_admin_async,
    start,
    state_of,
    whoami,
    whoami_upstream,
)
from tests.services_fixtures import redis_server

from mcpkit.hub.crypto import SecretBox, generate_key

pytestmark = pytest.mark.anyio
__all__ = ["redis_server"]  # a fixture


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("oidc")) as running:
        yield running


@pytest.fixture(scope="module")
def upstream_url(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with whoami_upstream(stack, tmp_path_factory.mktemp("whoami")) as url:
        yield url


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    database_url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('hub') / 'hub.db'}"
    with router_hubs(database_url, SecretBox([generate_key()])) as hubs:
        yield hubs[0]


async def test_two_users_on_one_upstream_each_see_only_their_own_identity(
        hub: Hub, upstream_url: str) -> None:
    (_, ada), (_, bob) = await fresh_user(hub), await fresh_user(hub)
    upstream_a = await register_oauth(ada, "who", upstream_url)
    upstream_b = await register_oauth(bob, "who", upstream_url)
    assert upstream_a["auth_mode"] == "oauth"
    await connect(ada, upstream_a["id"], "ada-account")
    await connect(bob, upstream_b["id"], "bob-account")
    assert ada.token is not None and bob.token is not None
    assert await whoami(hub, ada.token, "who__whoami") == "ada-account"
    assert await whoami(hub, bob.token, "who__whoami") == "bob-account"


async def test_two_replicas_refresh_one_expired_login_with_one_grant(
        stack: Stack, upstream_url: str, postgres_db: Any, redis_server: Any) -> None:
    """Two hub replicas (one PostgreSQL, one Redis) find the same stored login expired at
    the same moment: the provider sees exactly one refresh_token grant, both calls succeed."""
    box = SecretBox([generate_key()])
    admin = await seed_admin_async(postgres_db.url, box)
    with router_hubs(postgres_db.url, box, 2, redis_url=redis_server.url,
                     admin_token=admin) as (first, second):
        user_id, api = await fresh_user(first)
        upstream = await register_oauth(api, "shared", upstream_url)
        await connect(api, upstream["id"], "carol-account")
        await age_login(first, user_id, upstream["id"])
        mark = stack.mark()
        seen: list[str] = []

        async def one(replica: Hub) -> None:
            assert api.token is not None
            seen.append(await whoami(replica, api.token, "shared__whoami"))

        async with anyio.create_task_group() as group:
            group.start_soon(one, first)
            group.start_soon(one, second)
        assert seen == ["carol-account", "carol-account"]
        assert len(stack.events_since(mark, "grant.success", grant_type="refresh_token")) == 1
        assert stack.events_since(mark, "grant.error") == []


async def test_a_revoked_refresh_family_drops_the_login_and_shows_needs_login(
        hub: Hub, stack: Stack, upstream_url: str) -> None:
    user_id, api = await fresh_user(hub)
    upstream = await register_oauth(api, "family", upstream_url)
    await connect(api, upstream["id"], "dave-account")
    stored = await age_login(hub, user_id, upstream["id"])
    assert await refresh_at_provider(stored) == 200  # a copy used first: rotated away
    mark = stack.mark()
    assert api.token is not None
    answer = await outcome(hub, api.token, "family__whoami")
    assert "needs its owner's OAuth login" in answer and "/oauth/start" in answer, answer
    # the provider saw the reuse and revoked the family; the hub dropped the login
    assert stack.events_since(mark, "grant.error", grant_type="refresh_token",
                              error="invalid_grant")
    assert stack.events_since(mark, "grant.revoked")
    shown = await api.get(f"{UPSTREAMS}/{upstream['id']}")
    assert shown.body["oauth_connected"] is False
    # the dead login shows as needs_auth (not unhealthy), with the way back in
    assert shown.body["health_status"] == "needs_auth"
    assert shown.body["login"]["path"] == f"{UPSTREAMS}/{upstream['id']}/oauth/start"
    refreshed = await api.post(f"{UPSTREAMS}/{upstream['id']}/refresh")
    assert refreshed.status == 502 and "needs its owner's OAuth login" in refreshed.text
    assert refreshed.error["code"] == "upstream_needs_auth"
    # and a new login puts it right
    await connect(api, upstream["id"], "dave-account")
    assert await whoami(hub, api.token, "family__whoami") == "dave-account"


async def test_an_access_token_the_upstream_refuses_is_refreshed_and_the_call_goes_on(
        hub: Hub, stack: Stack, upstream_url: str) -> None:
    user_id, api = await fresh_user(hub)
    upstream = await register_oauth(api, "renew", upstream_url)
    await connect(api, upstream["id"], "hana-account")
    # not expired as far as the hub knows, but the upstream answers it 401
    await alter_login(hub, user_id, upstream["id"], access_token="not-a-token-any-more")
    mark = stack.mark()
    assert api.token is not None
    assert await whoami(hub, api.token, "renew__whoami") == "hana-account"
    assert len(stack.events_since(mark, "grant.success", grant_type="refresh_token")) == 1


async def test_logout_revokes_at_the_provider_and_forgets(
        hub: Hub, stack: Stack, upstream_url: str) -> None:
    _, api = await fresh_user(hub)
    upstream = await register_oauth(api, "leaving", upstream_url)
    await connect(api, upstream["id"], "erin-account")
    mark = stack.mark()
    gone = await api.delete(f"{UPSTREAMS}/{upstream['id']}/oauth")
    assert gone.status == 200 and gone.body["removed"] is True, gone.text
    assert gone.body["revoked"] >= 1
    assert stack.events_since(mark, "refresh_token.destroyed")
    assert (await api.get(f"{UPSTREAMS}/{upstream['id']}")).body["oauth_connected"] is False
    assert (await api.delete(f"{UPSTREAMS}/{upstream['id']}/oauth")).body["removed"] is False


async def test_no_combination_lets_one_user_call_with_anothers_upstream_login(
        hub: Hub, upstream_url: str) -> None:
    """Ada and Bob each log in to an upstream named `shared` (same URL); Ada also to `aonly`,
    which Bob registers too (same name and URL) and logs out of (its catalog stays: its tool
    is listed, and needs a login), and Bob has `bnolog`, never logged in to.
    Every mix of hub tokens, MCP session ids, tool (upstream) names, and upstream ids on the
    REST API: nothing Bob sends ever reaches the upstream with Ada's login (the upstream would
    name her account)."""
    (_, ada), (_, bob) = await fresh_user(hub), await fresh_user(hub)
    assert ada.token is not None and bob.token is not None
    ada_shared = await register_oauth(ada, "shared", upstream_url)
    ada_only = await register_oauth(ada, "aonly", upstream_url)
    bob_shared = await register_oauth(bob, "shared", upstream_url)
    bob_only = await register_oauth(bob, "aonly", upstream_url)
    await register_oauth(bob, "bnolog", upstream_url)
    await connect(ada, ada_shared["id"], "ada-iso")
    await connect(ada, ada_only["id"], "ada-iso")
    await connect(bob, bob_shared["id"], "bob-iso")
    await connect(bob, bob_only["id"], "bob-iso")
    assert await whoami(hub, bob.token, "aonly__whoami") == "bob-iso"  # a live connection…
    assert (await bob.delete(f"{UPSTREAMS}/{bob_only['id']}/oauth")).body["removed"]
    sessions = {"ada": await mcp_session(hub, ada.token), "bob": await mcp_session(hub, bob.token)}
    tools = ["shared__whoami", "aonly__whoami", "bnolog__whoami"]
    answers: dict[tuple[str, str, str], str] = {}
    for (who, token), session, tool in itertools.product(
            (("ada", ada.token), ("bob", bob.token)), ("ada", "bob", None), tools):
        answers[(who, session or "-", tool)] = await raw_call(
            hub, token, sessions[session] if session else None, tool)
    for (who, _, _tool), answer in answers.items():
        if who == "bob":
            assert "ada-iso" not in answer, answer
    for tool in tools:  # the modern era (no session) through mcpkit's client too
        assert "ada-iso" not in await outcome(hub, bob.token, tool)
    # the probe can see each identity where it belongs
    assert "bob-iso" in answers[("bob", "bob", "shared__whoami")]
    assert "ada-iso" in answers[("ada", "ada", "aonly__whoami")]
    # … whose logout took effect at once: a login is needed, and Ada's is never used
    assert "needs its owner's OAuth login" in answers[("bob", "bob", "aonly__whoami")]
    # Bob's token on Ada's upstream ids: every upstream route answers 404
    for upstream in (ada_shared, ada_only):
        base = f"{UPSTREAMS}/{upstream['id']}"
        for method, path in (("GET", base), ("PATCH", base), ("GET", base + "/tools"),
                             ("POST", base + "/refresh"), ("POST", base + "/oauth/start"),
                             ("DELETE", base + "/oauth"), ("DELETE", base)):
            reply = await bob.request(method, path, json={} if method == "PATCH" else None)
            assert reply.status == 404, (method, path, reply.text)
    assert (await ada.get(f"{UPSTREAMS}/{ada_only['id']}")).body["oauth_connected"] is True
    assert await whoami(hub, ada.token, "aonly__whoami") == "ada-iso"


# --- adversarial --------------------------------------------------------------------------


async def callback_page(api: Api, query: str) -> tuple[int, str]:
    """The callback with `query`, in the user's browser (signed in to the hub)."""
    reply = await land(api, f"{api.hub.settings.issuer}{CALLBACK}?{query}")
    return reply.status, reply.text


async def test_forged_reused_expired_and_refused_callbacks_store_nothing(
        hub: Hub, stack: Stack, upstream_url: str) -> None:
    user_id, api = await fresh_user(hub)
    upstream = await register_oauth(api, "guarded", upstream_url)
    path = f"{UPSTREAMS}/{upstream['id']}"
    # forged: a state the hub never issued
    status, page = await callback_page(api, "state=forged&code=whatever")
    assert status == 400 and "unknown or was already used" in page
    # reused: the same redirect twice; the second finds nothing
    landed = await authorize(api, upstream["id"], "frank-account")
    assert (await land(api, landed)).status == 200
    again = await land(api, landed)
    assert again.status == 400 and "unknown or was already used" in again.text
    # expired: finished after the pending login's lifetime
    landed = await authorize(api, upstream["id"], "frank-account")
    await expire_pending(hub)
    late = await land(api, landed)
    assert late.status == 400 and "expired" in late.text
    # the authorization server refused (an error param): the state is spent with it
    started = await start(api, upstream["id"])
    state = state_of(started.body["authorization_url"])
    status, page = await callback_page(
        api, f"state={state}&error=access_denied&iss={stack.issuer}")
    assert status == 400 and "access_denied" in page
    status, page = await callback_page(api, f"state={state}&code=c&iss={stack.issuer}")
    assert status == 400 and "unknown or was already used" in page
    # malformed: a repeated parameter, an oversized one, none at all
    for query in (f"state={state}&state=other", "state=" + "s" * 5000, ""):
        status, _ = await callback_page(api, query)
        assert status == 400, query[:80]
    # through all of it, the first (good) login is the only one, and it is the user's
    assert (await api.get(path)).body["oauth_connected"] is True
    del user_id


async def test_a_login_is_started_only_by_the_owner_of_an_oauth_upstream(
        hub: Hub, upstream_url: str) -> None:
    (_, ada), (_, bob) = await fresh_user(hub), await fresh_user(hub)
    oauth = await register_oauth(ada, "mine", upstream_url)
    static = await ada.create_upstream(name="plain", url=upstream_url, transport="http")
    assert (await start(bob, oauth["id"])).status == 404
    refused = await start(ada, static["id"])
    assert refused.status == 422 and refused.error["field"] == "auth_mode"
    foreign = await start(ada, oauth["id"], return_to="https://evil.example/after")
    assert foreign.status == 422 and foreign.error["field"] == "return_to"
    # Ada's login, in her browser, whatever account she uses at the provider, is Ada's
    landed = await authorize(ada, oauth["id"], "another-account-in-ada-browser")
    assert (await land(ada, landed)).status == 200
    assert (await ada.get(f"{UPSTREAMS}/{oauth['id']}")).body["oauth_connected"] is True


async def test_a_return_to_of_the_hub_is_where_the_browser_goes(
        hub: Hub, upstream_url: str) -> None:
    _, api = await fresh_user(hub)
    upstream = await register_oauth(api, "back", upstream_url)
    back = f"{hub.settings.issuer}/docs"
    started = await start(api, upstream["id"], return_to=back)
    login = FormLogin(user="gina-account", redirect_uri=hub.settings.issuer + CALLBACK)
    landed = await login(started.body["authorization_url"])
    reply = await land(api, landed)
    assert reply.status == 303 and reply.headers["Location"] == back


@pytest.mark.parametrize("mode", ["huge-metadata", "malformed-metadata", "bad-registration"])
async def test_oversized_or_malformed_authorization_servers_refuse_the_start(
        hub: Hub, mode: str) -> None:
    _, api = await fresh_user(hub)
    async with hostile_server() as hostile:
        hostile.mode = mode
        upstream = await register_oauth(api, "hostile", hostile.url)
        refused = await start(api, upstream["id"])
        assert refused.status == 502, refused.text
        assert refused.error["code"] == "upstream_login_failed"
        assert "cannot start an OAuth login" in refused.error["message"]


@pytest.mark.parametrize("mode", ["huge-token", "malformed-token", "ok"])
async def test_oversized_or_malformed_token_answers_fail_the_callback(
        hub: Hub, mode: str) -> None:
    _, api = await fresh_user(hub)
    async with hostile_server() as hostile:
        upstream = await register_oauth(api, "hostile", hostile.url)
        started = await start(api, upstream["id"])
        assert started.status == 200, started.text
        hostile.mode = mode
        status, page = await callback_page(
            api, f"state={state_of(started.body['authorization_url'])}&code=abc")
        assert status == 400 and "the login failed" in page, page
        assert (await api.get(f"{UPSTREAMS}/{upstream['id']}")).body["oauth_connected"] is False
