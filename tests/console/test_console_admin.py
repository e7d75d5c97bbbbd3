"""The operators' pages and their API over real HTTP (a hub under uvicorn on 127.0.0.1): only
admins reach them (the API's 403 whatever URL a user types), every state change carries the
session's CSRF token from the hub's origin, every filter is checked (a hostile value is a 422,
never a 500), and the audit log pages by keyset through 10,000 rows."""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.console.support import CSRF_ATTEMPTS, ConsoleBrowser, console_hub, forged
from tests.hub.hub_browser import set_password
from tests.hub.hub_helpers import (
    ADMIN_USERS,
    Api,
    Hub,
    fresh_user,
    mcp_status,
    open_store,
    unique,
)

from mcpkit.hub.store.records import AuditEntry

pytestmark = pytest.mark.anyio
AUDIT = "/api/v1/admin/audit"
ALL_UPSTREAMS = "/api/v1/admin/upstreams"
AUDIT_ROWS = 10_000
PAGE_LOAD_BOUND_S = 5.0
"""A liveness bound for one audit page over 10,000 rows (a keyset page takes milliseconds)."""


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    tmp: Path = tmp_path_factory.mktemp("console-admin")
    with console_hub(f"sqlite+aiosqlite:///{tmp / 'hub.db'}",
                     oauth_revocation_check_s=0.001,  # revocations reach the checks at once
                     rate_limit_burst=100_000) as running:  # the fuzzing is many calls
        yield running


async def browser_of(hub: Hub, *, admin: bool) -> tuple[ConsoleBrowser, int, Api]:
    user_id, api = await fresh_user(hub, admin=admin)
    name, password = await set_password(hub, user_id)
    browser = ConsoleBrowser(hub)
    back = await browser.sign_in(name, password)
    assert back.status == 303, back.text
    return browser, user_id, api


def query(path: str, params: dict[str, str]) -> str:
    return f"{path}?{urllib.parse.urlencode(params)}"


async def user_state(hub: Hub, user_id: int) -> dict[str, object]:
    reply = await Api(hub, hub.admin_token).get(f"{ADMIN_USERS}/{user_id}")
    assert reply.status == 200, reply.text
    return dict(reply.body)


# --- who may -------------------------------------------------------------------------------


async def test_every_admin_api_route_refuses_a_non_admin_with_403(hub: Hub) -> None:
    victim, _ = await fresh_user(hub)
    _, api = await fresh_user(hub)
    token = (await Api(hub, hub.admin_token).post(
        f"{ADMIN_USERS}/{victim}/tokens", {"name": "t"})).body["token"]["id"]
    routes = [
        ("GET", ADMIN_USERS, None), ("POST", ADMIN_USERS, {"name": unique("x")}),
        ("GET", f"{ADMIN_USERS}/{victim}", None),
        ("PATCH", f"{ADMIN_USERS}/{victim}", {"disabled": True}),
        ("GET", f"{ADMIN_USERS}/{victim}/tokens", None),
        ("POST", f"{ADMIN_USERS}/{victim}/tokens", {"name": "t2"}),
        ("DELETE", f"{ADMIN_USERS}/{victim}/tokens/{token}", None),
        ("GET", AUDIT, None), ("GET", AUDIT + "?outcome=ok&tool=x", None),
        ("GET", ALL_UPSTREAMS, None), ("GET", ALL_UPSTREAMS + "?health_status=needs_auth", None),
    ]
    for method, path, body in routes:
        reply = await api.request(method, path, json=body)
        assert reply.status == 403, f"{method} {path}: {reply.status} {reply.text}"
    assert (await user_state(hub, victim))["disabled"] is False


async def test_a_non_admin_sees_no_admin_links_and_gets_403_on_every_admin_page(
        hub: Hub) -> None:
    browser, _, _ = await browser_of(hub, admin=False)
    victim, _ = await fresh_user(hub)
    home = await browser.request("GET", "/")
    assert home.status == 200 and "/console/admin/" not in home.text
    assert 'href="/metrics"' not in home.text
    for path in ("/console/admin/users", f"/console/admin/users/{victim}/tokens",
                 "/console/admin/audit", "/console/admin/audit?outcome=ok",
                 "/console/admin/health", "/console/admin/health?health_status=unhealthy"):
        page = await browser.request("GET", path)
        assert page.status == 403, f"{path}: {page.status}"
    csrf = browser.session().csrf
    for path, fields in ((f"/console/admin/users/{victim}/disabled", {"value": "1"}),
                         (f"/console/admin/users/{victim}/admin", {"value": "1"}),
                         ("/console/admin/users", {"name": unique("sneak")})):
        refused = await browser.post(path, {"csrf_token": csrf, **fields})
        assert refused.status == 403, f"{path}: {refused.status}"
    state = await user_state(hub, victim)
    assert state["disabled"] is False and state["is_admin"] is False


async def test_an_admin_sees_the_operators_links(hub: Hub) -> None:
    browser, _, _ = await browser_of(hub, admin=True)
    home = await browser.request("GET", "/")
    for link in ("/console/admin/users", "/console/admin/audit", "/console/admin/health",
                 "/metrics", "/docs"):
        assert f'href="{link}"' in home.text, link


# --- users ---------------------------------------------------------------------------------


async def test_an_admin_adds_disables_enables_and_promotes_a_user(hub: Hub) -> None:
    browser, admin_id, _ = await browser_of(hub, admin=True)
    csrf = browser.session().csrf
    bad = await browser.post("/console/admin/users", {"csrf_token": csrf, "name": "Not Ok!"})
    assert bad.status == 422 and 'id="name-error"' in bad.text, bad.text[-800:]
    name = unique("added")
    added = await browser.post("/console/admin/users", {"csrf_token": csrf, "name": name})
    assert added.status == 303, added.text
    listed = await Api(hub, hub.admin_token).get(
        f"{ADMIN_USERS}?limit={hub.settings.max_page_size}")
    user_id = next(u["id"] for u in listed.body["items"] if u["name"] == name)
    for path, value, key, expected in (("disabled", "1", "disabled", True),
                                       ("disabled", "0", "disabled", False),
                                       ("admin", "1", "is_admin", True),
                                       ("admin", "0", "is_admin", False)):
        done = await browser.post(f"/console/admin/users/{user_id}/{path}",
                                  {"csrf_token": csrf, "value": value, "name": name})
        assert done.status == 303, done.text
        assert (await user_state(hub, user_id))[key] is expected
    # an admin cannot lock themselves out: the API's message, shown
    own = await browser.post(f"/console/admin/users/{admin_id}/disabled",
                             {"csrf_token": csrf, "value": "1"})
    assert own.status == 422 and "cannot disable themselves" in own.text
    assert (await user_state(hub, admin_id))["disabled"] is False


async def test_a_disabled_users_session_and_api_token_fail_at_their_next_request(
        hub: Hub) -> None:
    """Without a browser (the Chromium test does the same by clicking): the caches of this
    replica (hub tokens at /api/v1, API tokens at /mcp) drop the user at once."""
    admin, _, _ = await browser_of(hub, admin=True)
    victim, victim_id, victim_api = await browser_of(hub, admin=False)
    assert victim_api.token is not None
    assert (await victim.request("GET", "/")).status == 200
    assert await mcp_status(hub.url, victim_api.token) == 200  # both now cached as valid
    done = await admin.post(f"/console/admin/users/{victim_id}/disabled",
                            {"csrf_token": admin.session().csrf, "value": "1"})
    assert done.status == 303, done.text
    refused = await victim.request("GET", "/")
    assert refused.status == 303 and refused.headers["Location"].startswith(
        "/console/sign-in"), refused.text
    assert await mcp_status(hub.url, victim_api.token) == 401


async def test_an_admin_revokes_a_users_token(hub: Hub) -> None:
    browser, _, _ = await browser_of(hub, admin=True)
    user_id, api = await fresh_user(hub)
    assert (await api.get("/api/v1/users/me")).status == 200
    tokens = await browser.request("GET", f"/console/admin/users/{user_id}/tokens")
    assert tokens.status == 200
    token_id = (await Api(hub, hub.admin_token).get(
        f"{ADMIN_USERS}/{user_id}/tokens")).body["items"][0]["id"]
    assert f"/tokens/{token_id}/revoke" in tokens.text
    revoked = await browser.post(f"/console/admin/users/{user_id}/tokens/{token_id}/revoke",
                                 {"csrf_token": browser.session().csrf})
    assert revoked.status == 303
    assert revoked.headers["Location"].startswith(f"/console/admin/users/{user_id}/tokens?")
    assert (await api.get("/api/v1/users/me")).status == 401


@pytest.mark.parametrize("attempt", CSRF_ATTEMPTS)
async def test_every_admin_state_change_needs_the_csrf_token_from_the_hubs_origin(
        hub: Hub, attempt: str) -> None:
    browser, _, _ = await browser_of(hub, admin=True)
    victim, victim_api = await fresh_user(hub)
    token_id = (await Api(hub, hub.admin_token).get(
        f"{ADMIN_USERS}/{victim}/tokens")).body["items"][0]["id"]
    csrf = browser.session().csrf
    changes = [(f"/console/admin/users/{victim}/disabled", {"value": "1"}),
               (f"/console/admin/users/{victim}/admin", {"value": "1"}),
               (f"/console/admin/users/{victim}/tokens/{token_id}/revoke", {}),
               ("/console/admin/users", {"name": unique("csrf")})]
    for path, fields in changes:
        form, origin = forged({**fields, "csrf_token": csrf}, attempt)
        refused = await browser.post(path, form, origin=origin)
        assert refused.status == 403, f"{path}: {refused.status}"
    state = await user_state(hub, victim)
    assert state["disabled"] is False and state["is_admin"] is False
    assert (await victim_api.get("/api/v1/users/me")).status == 200


# --- audit and health: filters, pages ------------------------------------------------------


HOSTILE = [
    ("user_id", "0"), ("user_id", "-1"), ("user_id", "99999999999999999999"),
    ("user_id", "1 OR 1=1"), ("upstream", "../../etc"), ("upstream", "A" * 64),
    ("upstream", "x'; DROP TABLE audit_events;--"), ("tool", "t" * 257), ("tool", ""),
    ("outcome", "everything"), ("since", "yesterday"), ("since", "0001-01-01T00:00:00"),
    ("until", "9999-99-99"), ("cursor", "!!!"), ("cursor", "LTE"), ("cursor", "x" * 65),
    ("limit", "0"), ("limit", "100000"),
]


@pytest.mark.parametrize(("name", "value"), HOSTILE)
async def test_a_hostile_audit_filter_is_a_422_naming_it(hub: Hub, name: str,
                                                          value: str) -> None:
    reply = await Api(hub, hub.admin_token).get(query(AUDIT, {name: value}))
    assert reply.status == 422, f"{name}={value!r}: {reply.status} {reply.text[:200]}"


async def test_a_hostile_filter_on_the_audit_page_shows_the_apis_message(hub: Hub) -> None:
    browser, _, _ = await browser_of(hub, admin=True)
    page = await browser.request("GET", "/console/admin/audit?outcome=everything&tool=x")
    assert page.status == 422 and 'role="alert"' in page.text and "outcome" in page.text
    health = await browser.request("GET", "/console/admin/health?health_status=dead")
    assert health.status == 422 and 'role="alert"' in health.text


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["user_id", "upstream", "tool", "outcome", "since", "until",
                             "cursor", "limit", "health_status"]),
       value=st.text(max_size=80))
async def test_any_filter_value_is_answered_200_or_422_never_a_500(
        hub: Hub, name: str, value: str) -> None:
    root = Api(hub, hub.admin_token)
    for path in (AUDIT, ALL_UPSTREAMS):
        reply = await root.get(query(path, {name: value}))
        assert reply.status in (200, 422), f"{path} {name}={value!r}: {reply.text[:200]}"


async def test_10000_audit_rows_page_by_keyset_with_filters(hub: Hub) -> None:
    tool = unique("tool")
    start = datetime(2026, 1, 1, tzinfo=UTC)
    outcomes = ("ok", "tool_error", "error", "denied", "timeout")
    store = await open_store(hub)
    try:
        await store.audit.record_many([
            AuditEntry(user_id=1 + i % 3, upstream_id=None, upstream_name=f"up{i % 4}",
                       tool=tool, duration_ms=float(i % 97), outcome=outcomes[i % 5],
                       at=start + timedelta(seconds=i))
            for i in range(AUDIT_ROWS)])
    finally:
        await store.close()
    root = Api(hub, hub.admin_token)
    seen: list[int] = []
    cursor: str | None = None
    size = hub.settings.max_page_size
    for _ in range(AUDIT_ROWS // size + 2):  # bounded: every full page, then the end
        params = {"tool": tool, "limit": str(size), **({"cursor": cursor} if cursor else {})}
        page = await root.get(query(AUDIT, params))
        assert page.status == 200, page.text
        seen += [row["id"] for row in page.body["items"]]
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == AUDIT_ROWS and len(set(seen)) == AUDIT_ROWS
    assert seen == sorted(seen, reverse=True)  # newest first, no row twice or skipped
    # filters combine: user 2, upstream up1, outcome error, a time range
    filtered = await root.get(query(AUDIT, {
        "tool": tool, "user_id": "2", "upstream": "up1", "outcome": "error",
        "since": (start + timedelta(seconds=1000)).isoformat(),
        "until": (start + timedelta(seconds=2000)).isoformat(),
        "limit": str(hub.settings.max_page_size)}))
    assert filtered.status == 200, filtered.text
    expected = [i for i in range(1000, 2000)
                if 1 + i % 3 == 2 and i % 4 == 1 and outcomes[i % 5] == "error"]
    assert len(filtered.body["items"]) == len(expected) > 0
    assert all(row["user_id"] == 2 and row["upstream_name"] == "up1"
               and row["outcome"] == "error" for row in filtered.body["items"])
    # the console's page over the same rows: a page, the next, and back
    browser, _, _ = await browser_of(hub, admin=True)
    began = time.perf_counter()
    first = await browser.request("GET", f"/console/admin/audit?tool={tool}")
    took = time.perf_counter() - began
    print(f"\naudit console page over {AUDIT_ROWS} rows: {took * 1000:.0f} ms")
    assert first.status == 200 and took < PAGE_LOAD_BOUND_S
    assert first.text.count("<tr>") == hub.settings.page_size + 1  # the header row too
    next_link = first.text.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0]
    second = await browser.request("GET", next_link.replace("&amp;", "&"))
    assert second.status == 200 and 'rel="prev"' in second.text
    back = second.text.split('rel="prev"')[0].rsplit('href="', 1)[1].split('"')[0]
    again = await browser.request("GET", back.replace("&amp;", "&"))
    assert again.status == 200
    assert _rows(again.text) == _rows(first.text) != _rows(second.text)


def _rows(html: str) -> list[str]:
    return [part.split("</time>")[0] for part in html.split('<time datetime="')[1:]]


async def test_health_across_users_filters_by_status(hub: Hub) -> None:
    made: list[tuple[int, str]] = []
    for _ in range(2):
        user_id, api = await fresh_user(hub)
        created = await api.create_upstream(name=unique("h"), url="http://127.0.0.1:9/mcp",
                                            enabled=False)  # the checker leaves it alone
        made.append((user_id, created["id"]))
    store = await open_store(hub)
    try:
        await store.upstreams.set_health(*made[0], "needs_auth", error="login expired")
        await store.upstreams.set_health(*made[1], "unhealthy", error="refused")
    finally:
        await store.close()
    root = Api(hub, hub.admin_token)
    needing = await root.get(query(ALL_UPSTREAMS, {"health_status": "needs_auth",
                                                   "limit": str(hub.settings.max_page_size)}))
    assert needing.status == 200, needing.text
    ids = {item["id"] for item in needing.body["items"]}
    assert made[0][1] in ids and made[1][1] not in ids
    assert all(item["health_status"] == "needs_auth" for item in needing.body["items"])
    browser, _, _ = await browser_of(hub, admin=True)
    page = await browser.request("GET", "/console/admin/health?" + urllib.parse.urlencode(
        {"health_status": "unhealthy"}))
    assert page.status == 200 and "refused" in page.text and "login expired" not in page.text
