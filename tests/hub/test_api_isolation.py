"""Who may see and reach what, over real HTTP: user B's token gets exactly the 404 of a missing
upstream on every endpoint for user A's upstream ids and never sees them in a list; admin
routes are 403 for non-admins; and upstream URLs are checked against SSRF at registration
(every refused address a `url` error) and again at connect time (DNS rebinding)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from tests.hub.hub_helpers import (
    ADMIN_USERS,
    UPSTREAMS,
    Api,
    Hub,
    Upstream,
    call,
    database_for,
    echo_server,
    fresh_user,
    running_hub,
)

from mcpkit import netguard
from mcpkit.hub.api.context import resolve_host
from mcpkit.hub.catalog import UpstreamUnavailable, fetch_catalog
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Credentials, UpstreamRecord

pytestmark = pytest.mark.anyio

MISSING_ID = "00000000-0000-4000-8000-000000000000"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    url = database_for(request, request.param, tmp_path_factory.mktemp("hub"))
    with running_hub(url, allow_private_upstreams=True) as running:
        yield running


@pytest.fixture(scope="module")
def echo() -> Iterator[Upstream]:
    with echo_server() as upstream:
        yield upstream


def endpoints(upstream_id: str) -> list[tuple[str, str, Any]]:
    path = f"{UPSTREAMS}/{upstream_id}"
    return [
        ("GET", path, None),
        ("PATCH", path, {"enabled": False}),
        ("PATCH", path, {"name": "stolen", "url": "http://127.0.0.1:1/mcp"}),
        ("DELETE", path, None),
        ("DELETE", path + "?version=1", None),
        ("GET", path + "/tools", None),
        ("GET", path + "/tools?refresh=true", None),
        ("POST", path + "/refresh", None),
    ]


async def test_another_users_upstream_is_exactly_a_missing_one(hub: Hub, echo: Upstream) -> None:
    _alice_id, alice = await fresh_user(hub)
    _bob_id, bob = await fresh_user(hub)
    theirs = await alice.create_upstream(name="private", url=echo.url, bearer_token="tok-" * 8)
    assert (await alice.get(f"{UPSTREAMS}/{theirs['id']}/tools?refresh=true")).status == 200
    before = (await alice.get(f"{UPSTREAMS}/{theirs['id']}")).body

    for (method, path, body), (_, missing_path, _) in zip(
        endpoints(theirs["id"]), endpoints(MISSING_ID), strict=True
    ):
        foreign = await bob.request(method, path, json=body)
        missing = await bob.request(method, missing_path, json=body)
        assert foreign.status == 404, (method, path, foreign.text)
        assert (foreign.status, foreign.body) == (missing.status, missing.body), (method, path)
        assert theirs["id"] not in foreign.text and "private" not in foreign.text

    # nothing changed, nothing was refreshed on bob's behalf
    assert (await alice.get(f"{UPSTREAMS}/{theirs['id']}")).body == before
    # bob's lists never show it; the name is free for bob (names are per user)
    assert (await bob.get(UPSTREAMS)).body == {"items": [], "next_cursor": None}
    assert (await bob.get(UPSTREAMS + "?enabled=true&limit=100")).body["items"] == []
    mine = await bob.create_upstream(name="private", url=echo.url)
    assert mine["id"] != theirs["id"]
    assert [u["id"] for u in (await bob.get(UPSTREAMS)).body["items"]] == [mine["id"]]
    assert [u["id"] for u in (await alice.get(UPSTREAMS)).body["items"]] == [theirs["id"]]
    # a cursor of alice's listing gives bob only his own rows
    for _ in range(3):
        await alice.create_upstream(name=f"a-{_}", url=echo.url)
    cursor = (await alice.get(UPSTREAMS + "?limit=1")).body["next_cursor"]
    assert cursor is not None
    page = await bob.get(UPSTREAMS + f"?cursor={cursor}")
    assert all(item["id"] == mine["id"] for item in page.body["items"])


async def test_an_admin_is_not_an_owner_of_other_users_upstreams(
    hub: Hub, echo: Upstream
) -> None:
    _alice_id, alice = await fresh_user(hub)
    theirs = await alice.create_upstream(name="mine", url=echo.url)
    root = Api(hub, hub.admin_token)
    for method, path, body in endpoints(theirs["id"]):
        reply = await root.request(method, path, json=body)
        assert reply.status == 404, (method, path)
    assert theirs["id"] not in (await root.get(UPSTREAMS)).text


async def test_admin_routes_are_forbidden_to_users_and_closed_to_strangers(hub: Hub) -> None:
    user_id, user = await fresh_user(hub)
    routes = [
        ("GET", ADMIN_USERS, None),
        ("POST", ADMIN_USERS, {"name": "mallory", "is_admin": True}),
        ("GET", f"{ADMIN_USERS}/{user_id}", None),
        ("PATCH", f"{ADMIN_USERS}/{user_id}", {"is_admin": True}),
        ("GET", f"{ADMIN_USERS}/{user_id}/tokens", None),
        ("POST", f"{ADMIN_USERS}/{user_id}/tokens", {"name": "x"}),
        ("DELETE", f"{ADMIN_USERS}/{user_id}/tokens/1", None),
        ("GET", f"{ADMIN_USERS}/1", None),
    ]
    for method, path, body in routes:
        forbidden = await user.request(method, path, json=body)
        assert forbidden.status == 403, (method, path, forbidden.text)
        assert forbidden.error["code"] == "forbidden"
        stranger = await call(method, hub.url + path, json=body)
        assert stranger.status == 401, (method, path)
    me = await user.get("/api/v1/users/me")
    assert me.body["is_admin"] is False  # nothing above promoted anyone
    names = [u["name"] for u in (await Api(hub, hub.admin_token).get(
        ADMIN_USERS + "?limit=200")).body["items"]]
    assert "mallory" not in names


async def test_every_upstream_route_needs_a_token(hub: Hub) -> None:
    for method, path, body in [*endpoints(MISSING_ID), ("GET", UPSTREAMS, None),
                               ("POST", UPSTREAMS, {"name": "x", "url": "http://a.b/"}),
                               ("GET", "/api/v1/users/me", None)]:
        for token in (None, "mcphub_forged", "not even a token"):
            reply = await call(method, hub.url + path, json=body, token=token)
            assert reply.status == 401, (method, path, token)


# --- SSRF -----------------------------------------------------------------------------------

FAKE_DNS = {
    "public.example": ["93.184.216.34"],
    "internal.example": ["10.1.2.3"],
    "mixed.example": ["93.184.216.34", "127.0.0.1"],
    "v6.example": ["2606:2800:220:1:248:1893:25c8:1946", "fd00::1"],
    "meta.example": ["169.254.169.254"],
}


async def fake_resolve(host: str, port: int) -> list[str]:
    """The fake names above; numeric spellings go to the real resolver, which parses them
    without asking DNS (inet_aton); anything else does not resolve. No query leaves."""
    if host in FAKE_DNS:
        return FAKE_DNS[host]
    if all(c in "0123456789abcdefxABCDEFX." for c in host) and any(c.isdigit() for c in host):
        infos = await asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        return sorted({str(info[4][0]) for info in infos})
    raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")


@pytest.fixture(scope="module")
def guarded_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """A hub that refuses private upstreams (the default), with the fake DNS above."""
    path = tmp_path_factory.mktemp("ssrf") / "hub.db"
    with running_hub(f"sqlite+aiosqlite:///{path}", resolve=fake_resolve,
                     dns_timeout_s=2.0) as running:
        yield running


REFUSED = [
    ("http://127.0.0.1:{port}/mcp", "loopback"),
    ("http://localhost/mcp", "loopback name"),
    ("http://LOCALHOST./mcp", "loopback name"),
    ("http://app.localhost/mcp", "loopback name"),
    ("http://169.254.169.254/latest/meta-data/", "metadata"),
    ("http://[::1]/mcp", "loopback"),
    ("http://[::ffff:127.0.0.1]/mcp", "loopback"),
    ("http://10.0.0.1/mcp", "private"),
    ("http://192.168.1.1/mcp", "private"),
    ("http://172.16.0.1/mcp", "private"),
    ("http://100.64.0.1/mcp", "CGNAT"),
    ("http://0.0.0.0/mcp", "unspecified"),
    ("http://[fe80::1]/mcp", "link-local"),
    ("http://metadata.google.internal/", "metadata name"),
    ("ws://127.0.0.1/mcp", "loopback"),
    ("https://internal.example/mcp", "resolves to 10.1.2.3"),
    ("https://mixed.example/mcp", "resolves to 127.0.0.1"),
    ("https://v6.example/mcp", "resolves to fd00::1"),
    ("https://meta.example/mcp", "metadata"),
    ("http://2130706433/mcp", "resolves to 127.0.0.1"),  # 127.0.0.1 as one number
    ("http://0x7f.1/mcp", "resolves to 127.0.0.1"),
    ("http://nowhere.invalid/mcp", "does not resolve"),
]


async def test_private_and_internal_hosts_are_refused_at_registration(
    guarded_hub: Hub, echo: Upstream
) -> None:
    _user_id, api = await fresh_user(guarded_hub)
    port = echo.url.rsplit(":", 1)[1].split("/")[0]
    for template, reason in REFUSED:
        url = template.format(port=port)
        transport = "ws" if url.startswith("ws") else "http"
        reply = await api.post(UPSTREAMS, {"name": "x", "url": url, "transport": transport})
        assert reply.status == 422, (url, reply.text)
        assert reply.error["field"] == "url", (url, reply.error)
        assert reason in reply.error["message"], (url, reply.error)
    assert (await api.get(UPSTREAMS)).body["items"] == []
    # public hosts are accepted (nothing connects to them: no refresh here)
    for name, url in (("by-name", "https://public.example/mcp"),
                      ("by-ip", "http://93.184.216.34/mcp")):
        assert (await api.post(UPSTREAMS, {"name": name, "url": url})).status == 201
    # a PATCH to a private URL is refused the same way
    upstream = (await api.get(UPSTREAMS + "?limit=1")).body["items"][0]
    moved = await api.patch(f"{UPSTREAMS}/{upstream['id']}", {"url": "http://10.0.0.1/mcp"})
    assert moved.status == 422 and moved.error["field"] == "url"
    assert (await api.get(f"{UPSTREAMS}/{upstream['id']}")).body["version"] == 1


async def test_dns_is_checked_again_at_connect_time(
    guarded_hub: Hub, echo: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A name that was public at registration and points at loopback later (DNS rebinding):
    the refresh is refused by the connect-time resolver, and the error is stored."""
    _user_id, api = await fresh_user(guarded_hub)
    port = int(echo.url.rsplit(":", 1)[1].split("/")[0])
    upstream = await api.create_upstream(name="rebind", url=f"http://public.example:{port}/mcp")

    class Rebound:
        async def resolve(self, host: str, port: int = 0, family: Any = 0) -> list[Any]:
            return [{"hostname": host, "host": "127.0.0.1", "port": port,
                     "family": socket.AF_INET, "proto": 0, "flags": 0}]

        async def close(self) -> None:
            return None

    monkeypatch.setattr(netguard.aiohttp, "DefaultResolver", Rebound)
    refused = await api.post(f"{UPSTREAMS}/{upstream['id']}/refresh")
    assert refused.status == 502, refused.text
    assert refused.error["code"] == "upstream_unavailable"
    assert "127.0.0.1" in refused.error["message"]
    assert "loopback" in refused.error["message"]
    state = (await api.get(f"{UPSTREAMS}/{upstream['id']}")).body
    assert state["health_status"] == "unhealthy" and "loopback" in state["last_error"]


async def test_the_real_resolver_reads_numeric_spellings_without_dns() -> None:
    assert await resolve_host("2130706433", 80) == ["127.0.0.1"]
    assert await resolve_host("0x7f.1", 80) == ["127.0.0.1"]


async def test_fetch_refuses_private_literals_before_connecting(echo: Upstream) -> None:
    settings = HubSettings(allow_private_upstreams=False)
    port = echo.url.rsplit(":", 1)[1].split("/")[0]
    for url in (echo.url, f"http://localhost:{port}/mcp", f"http://[::1]:{port}/mcp"):
        record = _record(url)
        with pytest.raises(UpstreamUnavailable, match="loopback"):
            await fetch_catalog(record, Credentials(), settings)
    allowed = await fetch_catalog(_record(echo.url), Credentials(),
                                  HubSettings(allow_private_upstreams=True))
    assert [tool["name"] for tool in allowed.tools] == ["echo"]


def _record(url: str) -> UpstreamRecord:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return UpstreamRecord(
        id=MISSING_ID, user_id=1, name="t", transport="http", url=url, command=None,
        has_headers=False, has_bearer=False, enabled=True, enabled_tools=None,
        disabled_tools=(), connect_timeout_s=5.0, call_timeout_s=5.0, health_status="unknown",
        last_error=None, last_checked_at=None, tool_count=0, catalog_updated_at=None,
        created_at=now, updated_at=now, version=1,
    )
