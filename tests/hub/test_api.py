"""The hub's REST API over real HTTP on 127.0.0.1 (uvicorn, the app's own lifespan), on a real
SQLite file and a real PostgreSQL database, with real upstream MCP servers (processes):
every endpoint's success and error paths, the error shape, masking of secrets, pagination,
optimistic versions, catalog refresh (and its failure), and the admin routes."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text
from tests.hub.hub_helpers import (
    ADMIN_USERS,
    UPSTREAMS,
    Api,
    Hub,
    Upstream,
    call,
    database_for,
    echo_server,
    fixture_server,
    fresh_user,
    open_store,
    running_hub,
    serve_app,
    unique,
)
from tests.procs import free_port

from mcpkit.hub.settings import HubSettings
from mcpkit.server.server import Server

pytestmark = pytest.mark.anyio

MISSING_ID = "00000000-0000-4000-8000-000000000000"
BEARER = "upstream-bearer-SECRET-0123456789"
HEADER_SECRET = "header-SECRET-value-abcdef"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def hub(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    url = database_for(request, request.param, tmp_path_factory.mktemp("hub"))
    with running_hub(url, allow_private_upstreams=True, max_page_size=100) as running:
        yield running


@pytest.fixture(scope="module")
def echo() -> Iterator[Upstream]:
    with echo_server() as upstream:
        yield upstream


@pytest.fixture(scope="module")
def fx() -> Iterator[Upstream]:
    with fixture_server("fx") as upstream:
        yield upstream


@pytest.fixture
async def api(hub: Hub) -> Api:
    _user_id, user_api = await fresh_user(hub)
    return user_api


# --- operations and authentication -----------------------------------------------------------


async def test_health_openapi_and_docs(hub: Hub) -> None:
    assert (await call("GET", hub.url + "/healthz")).body == {"status": "ok"}
    assert (await call("GET", hub.url + "/readyz")).body == {"status": "ready"}
    document = (await call("GET", hub.url + "/openapi.json")).body
    paths = document["paths"]
    assert set(paths[UPSTREAMS]) == {"get", "post"}
    assert set(paths[UPSTREAMS + "/{upstream_id}"]) == {"get", "patch", "delete"}
    assert set(paths[UPSTREAMS + "/{upstream_id}/tools"]) == {"get"}
    assert set(paths[UPSTREAMS + "/{upstream_id}/tools/{tool_name}"]) == {"get"}
    assert set(paths[UPSTREAMS + "/{upstream_id}/refresh"]) == {"post"}
    assert "/api/v1/users/me" in paths and ADMIN_USERS + "/{user_id}/tokens/{token_id}" in paths
    # every error is documented with the one error shape, FastAPI's own 422 body is gone
    create = paths[UPSTREAMS]["post"]["responses"]
    assert {"201", "400", "401", "409", "413", "415", "422"} <= set(create)
    assert create["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorOut")
    assert "HTTPValidationError" not in document["components"]["schemas"]
    assert "bearer_token" not in document["components"]["schemas"]["UpstreamOut"]["properties"]
    docs = await call("GET", hub.url + "/docs")
    assert docs.status == 200 and "swagger" in docs.text.lower()


async def test_a_token_is_required_and_checked(hub: Hub, api: Api) -> None:
    me = hub.url + "/api/v1/users/me"
    missing = await call("GET", me)
    assert missing.status == 401
    assert missing.headers["WWW-Authenticate"] == 'Bearer realm="mcpkit-hub"'
    assert missing.error["code"] == "unauthorized"
    for header in ({"Authorization": "Bearer mcphub_not-a-real-token"},
                   {"Authorization": "Bearer "}, {"Authorization": "Basic dXNlcjpwdw=="},
                   {"Authorization": "Bearer " + "x" * 5000}):
        refused = await call("GET", me, headers=header)
        assert refused.status == 401, header
        assert refused.headers["WWW-Authenticate"].startswith("Bearer")
        assert "mcphub_not-a-real-token" not in refused.text
    invalid = await call("GET", me, token="mcphub_not-a-real-token")
    assert 'error="invalid_token"' in invalid.headers["WWW-Authenticate"]
    mine = await api.get("/api/v1/users/me")
    assert mine.status == 200
    assert set(mine.body) == {"id", "name", "is_admin", "disabled", "created_at"}
    assert mine.body["is_admin"] is False


# --- upstreams: the happy path -------------------------------------------------------------


async def test_register_read_update_delete(api: Api, echo: Upstream) -> None:
    created = await api.post(UPSTREAMS, {"name": "echo", "url": echo.url})
    assert created.status == 201, created.text
    upstream = created.body
    assert created.headers["Location"] == f"{UPSTREAMS}/{upstream['id']}"
    assert upstream["name"] == "echo" and upstream["transport"] == "http"
    assert upstream["url"] == echo.url and upstream["command"] is None
    assert upstream["headers"] is None and upstream["has_bearer"] is False
    assert upstream["bearer_token_hint"] is None
    assert upstream["enabled"] is True and upstream["enabled_tools"] is None
    assert upstream["disabled_tools"] == [] and upstream["version"] == 1
    assert upstream["connect_timeout_s"] == 10.0 and upstream["call_timeout_s"] == 60.0
    assert upstream["health_status"] == "unknown" and upstream["tool_count"] == 0
    assert upstream["last_error"] is None and upstream["last_checked_at"] is None
    path = f"{UPSTREAMS}/{upstream['id']}"

    assert (await api.get(path)).body == upstream
    listing = await api.get(UPSTREAMS)
    assert listing.body == {"items": [upstream], "next_cursor": None}

    patched = await api.patch(path, {"enabled": False, "disabled_tools": ["echo"],
                                     "call_timeout_s": 5, "version": 1})
    assert patched.status == 200, patched.text
    assert patched.body["enabled"] is False and patched.body["disabled_tools"] == ["echo"]
    assert patched.body["call_timeout_s"] == 5.0 and patched.body["version"] == 2
    assert patched.body["url"] == echo.url  # absent fields are kept
    renamed = await api.patch(path, {"name": "echo-2", "transport": "sse"})
    assert renamed.body["name"] == "echo-2" and renamed.body["transport"] == "sse"
    assert renamed.body["version"] == 3

    deleted = await api.delete(path + "?version=3")
    assert deleted.status == 204 and deleted.text == ""
    gone = await api.get(path)
    assert gone.status == 404 and gone.error == {"code": "not_found",
                                                 "message": "no upstream with this id"}
    assert (await api.delete(path)).status == 404
    assert (await api.get(UPSTREAMS)).body == {"items": [], "next_cursor": None}


async def test_secrets_are_stored_but_never_returned(hub: Hub, api: Api, echo: Upstream) -> None:
    created = await api.post(UPSTREAMS, {
        "name": "secret", "url": echo.url, "bearer_token": BEARER,
        "headers": {"Authorization": f"Token {HEADER_SECRET}", "X-Short": "abc123"},
    })
    assert created.status == 201
    path = f"{UPSTREAMS}/{created.body['id']}"
    replies = [created, await api.get(path), await api.get(UPSTREAMS),
               await api.patch(path, {"enabled": False}), await api.post(path + "/refresh")]
    for reply in replies:
        assert BEARER not in reply.text and HEADER_SECRET not in reply.text, reply.text
        assert "abc123" not in reply.text
    body = replies[1].body
    assert body["has_bearer"] is True and body["bearer_token_hint"] == "…6789"
    assert body["headers"] == {"Authorization": "…cdef", "X-Short": "…"}

    store = await open_store(hub)  # stored, and encrypted at rest
    try:
        credentials = await store.upstreams.credentials(api.user_id, created.body["id"])
        assert credentials.bearer == BEARER
        assert credentials.headers["Authorization"] == f"Token {HEADER_SECRET}"
        assert store.engine is not None
        async with store.engine.connect() as connection:
            rows = (await connection.execute(text("SELECT * FROM upstreams"))).all()
        assert BEARER not in repr(rows) and HEADER_SECRET not in repr(rows)
    finally:
        await store.close()

    cleared = await api.patch(path, {"bearer_token": None, "headers": None})
    assert cleared.body["has_bearer"] is False and cleared.body["headers"] is None
    assert cleared.body["bearer_token_hint"] is None
    replaced = await api.patch(path, {"bearer_token": "short"})
    assert replaced.body["bearer_token_hint"] == "…"


async def test_lists_are_paged(api: Api, echo: Upstream) -> None:
    names = [f"up-{i}" for i in range(5)]
    for index, name in enumerate(reversed(names)):
        await api.create_upstream(name=name, url=echo.url, enabled=index % 2 == 0)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        query = "?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = await api.get(UPSTREAMS + query)
        assert page.status == 200 and len(page.body["items"]) <= 2
        seen += [item["name"] for item in page.body["items"]]
        pages += 1
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
    assert seen == names and pages == 3
    enabled = await api.get(UPSTREAMS + "?enabled=true")
    assert [item["name"] for item in enabled.body["items"]] == ["up-0", "up-2", "up-4"]
    disabled = await api.get(UPSTREAMS + "?enabled=false&limit=1")
    assert [item["name"] for item in disabled.body["items"]] == ["up-1"]
    for query, field in (("?limit=0", "limit"), ("?limit=101", "limit"),
                         ("?limit=abc", "limit"), ("?cursor=%%%", "cursor"),
                         ("?cursor=AAAA", "cursor"), ("?enabled=maybe", "enabled"),
                         ("?cursor=" + "A" * 600, "cursor")):
        bad = await api.get(UPSTREAMS + query)
        assert bad.status == 422 and bad.error["field"] == field, (query, bad.text)


# --- upstreams: bad input -----------------------------------------------------------------

INVALID = [
    ({"url": "http://127.0.0.1/mcp"}, "name", "is required"),
    ({"name": "Bad Name", "url": "http://127.0.0.1/mcp"}, "name", "pattern"),
    ({"name": "x" * 64, "url": "http://127.0.0.1/mcp"}, "name", "at most 63"),
    ({"name": 7, "url": "http://127.0.0.1/mcp"}, "name", "string"),
    ({"name": "a", "url": "http://127.0.0.1/mcp", "colour": "red"}, "colour", "not a known"),
    ({"name": "a"}, "url", "needs a URL"),
    ({"name": "a", "url": "ws://127.0.0.1/mcp"}, "url", "http or https"),
    ({"name": "a", "transport": "ws", "url": "http://127.0.0.1/mcp"}, "url", "ws or wss"),
    ({"name": "a", "transport": "sse", "url": "ftp://127.0.0.1/"}, "url", "http or https"),
    ({"name": "a", "transport": "smoke", "url": "http://127.0.0.1/"}, "transport", "Input"),
    ({"name": "a", "transport": "stdio", "command": ["x"]}, "transport", "--allow-stdio"),
    ({"name": "a", "url": "http://u:p@127.0.0.1/"}, "url", "credentials"),
    ({"name": "a", "url": "http:///path"}, "url", "no host"),
    ({"name": "a", "url": "http://127.0.0.1/a b"}, "url", "whitespace"),
    ({"name": "a", "url": "http://127.0.0.1:99999/"}, "url", "not a valid URL"),
    ({"name": "a", "url": "http://x/" + "a" * 2048}, "url", "at most 2048"),
    ({"name": "a", "url": "http://127.0.0.1/", "command": ["x"]}, "command", "only stdio"),
    ({"name": "a", "url": "http://127.0.0.1/", "headers": {"X-A": "1\r\nX-B: 2"}},
     "headers.X-A", "pattern"),
    ({"name": "a", "url": "http://127.0.0.1/", "headers": {"Bad Name": "1"}},
     "headers.Bad Name", "pattern"),
    ({"name": "a", "url": "http://127.0.0.1/", "headers": {"Host": "evil"}},
     "headers.Host", "set by the hub"),
    ({"name": "a", "url": "http://127.0.0.1/", "headers": {"X-A": "1", "x-a": "2"}},
     "headers.x-a", "twice"),
    ({"name": "a", "url": "http://127.0.0.1/", "headers": {f"X-{i}": "v" for i in range(51)}},
     "headers", "at most 50"),
    ({"name": "a", "url": "http://127.0.0.1/", "headers": {"X-A": "v" * 8193}},
     "headers.X-A", "at most 8192"),
    ({"name": "a", "url": "http://127.0.0.1/", "bearer_token": "has space"},
     "bearer_token", "pattern"),
    ({"name": "a", "url": "http://127.0.0.1/", "bearer_token": ""}, "bearer_token", "at least"),
    ({"name": "a", "url": "http://127.0.0.1/", "connect_timeout_s": 0}, "connect_timeout_s",
     "greater than 0"),
    ({"name": "a", "url": "http://127.0.0.1/", "call_timeout_s": 3601}, "call_timeout_s",
     "less than or equal"),
    ({"name": "a", "url": "http://127.0.0.1/", "call_timeout_s": "10"}, "call_timeout_s",
     "number"),
    ({"name": "a", "url": "http://127.0.0.1/", "enabled": "yes"}, "enabled", "boolean"),
    ({"name": "a", "url": "http://127.0.0.1/", "enabled_tools": "echo"}, "enabled_tools",
     "list"),
    ({"name": "a", "url": "http://127.0.0.1/", "disabled_tools": ["ok", ""]},
     "disabled_tools[1]", "at least 1"),
    ({"name": "a", "url": "http://127.0.0.1/", "enabled_tools": ["t"] * 1001},
     "enabled_tools", "at most 1000"),
    ({"name": "a", "url": "http://127.0.0.1/", "disabled_tools": None}, "disabled_tools",
     "list"),
]


async def test_bad_input_names_the_field_and_the_reason(api: Api) -> None:
    for body, field, reason in INVALID:
        reply = await api.post(UPSTREAMS, body)
        assert reply.status == 422, (body, reply.text)
        assert reply.error["code"] == "invalid"
        assert reply.error["field"] == field, (body, reply.error)
        assert reason in reply.error["message"], (body, reply.error)
    assert (await api.get(UPSTREAMS)).body["items"] == []
    # a wrong body is never echoed back (a secret sent in the wrong place stays unseen)
    leaked = await api.post(UPSTREAMS, {"name": "a", "url": "http://127.0.0.1/",
                                        "bearer_token": "SECRET with space"})
    assert "SECRET" not in leaked.text


async def test_malformed_wrong_type_oversized_and_unknown_requests(hub: Hub, api: Api) -> None:
    malformed = await api.post(UPSTREAMS, data=b'{"name": ', headers={
        "Content-Type": "application/json"})
    assert malformed.status == 400
    assert malformed.error == {"code": "malformed_json", "message": "the body is not valid JSON",
                               "field": "body"}
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {"Content-Type": content_type} if content_type else {}
        wrong = await api.post(UPSTREAMS, data=b'{"name": "a"}', headers=headers)
        assert wrong.status == 415, (content_type, wrong.text)
        assert wrong.error["code"] == "unsupported_media_type"
    big = json.dumps({"name": "a", "url": "http://127.0.0.1/",
                      "headers": {"X-A": "v" * 8000}, "x": "y" * hub.settings.max_body_bytes})
    too_large = await api.post(UPSTREAMS, data=io.BytesIO(big.encode()),
                               headers={"Content-Type": "application/json",
                                        "Content-Length": str(len(big))})
    assert too_large.status == 413 and too_large.error["code"] == "payload_too_large"

    async def chunks() -> Any:  # no Content-Length: counted as it streams
        for _ in range(40):
            yield b" " * 32768

    chunked = await api.post(UPSTREAMS, data=chunks(),
                             headers={"Content-Type": "application/json"})
    assert chunked.status == 413 and chunked.error["code"] == "payload_too_large"
    not_a_route = await api.get("/api/v1/nothing-here")
    assert not_a_route.status == 404 and not_a_route.error["code"] == "not_found"
    wrong_method = await api.request("PUT", UPSTREAMS, json={})
    assert wrong_method.status == 405 and wrong_method.error["code"] == "method_not_allowed"
    assert "GET" in wrong_method.headers["Allow"]
    assert (await api.post(UPSTREAMS)).error["field"] == "body"  # no body at all
    array = await api.post(UPSTREAMS, [1, 2])
    assert array.status == 422 and array.error["field"] == "body"


async def test_conflicts_versions_and_nulls(api: Api, echo: Upstream) -> None:
    first = await api.create_upstream(name="one", url=echo.url)
    await api.create_upstream(name="two", url=echo.url)
    path = f"{UPSTREAMS}/{first['id']}"
    taken = await api.post(UPSTREAMS, {"name": "one", "url": echo.url})
    assert taken.status == 409 and taken.error["field"] == "name"
    assert taken.error["code"] == "conflict"
    rename = await api.patch(path, {"name": "two"})
    assert rename.status == 409 and rename.error["field"] == "name"
    stale = await api.patch(path, {"enabled": False, "version": 7})
    assert stale.status == 409 and stale.error["field"] == "version"
    assert "version 1" in stale.error["message"]
    assert (await api.delete(path + "?version=2")).status == 409
    assert (await api.delete(path + "?version=0")).error["field"] == "version"
    for field in ("name", "transport", "enabled", "disabled_tools", "connect_timeout_s",
                  "version"):
        null = await api.patch(path, {field: None})
        assert null.status == 422 and null.error["field"] == field, null.text
    to_ws = await api.patch(path, {"transport": "ws"})  # the http URL does not fit ws
    assert to_ws.status == 422 and to_ws.error["field"] == "url"
    no_url = await api.patch(path, {"url": None})
    assert no_url.status == 422 and no_url.error["field"] == "url"
    to_stdio = await api.patch(path, {"transport": "stdio", "command": ["x"]})
    assert to_stdio.status == 422 and to_stdio.error["field"] == "transport"
    assert (await api.patch(path, {"bogus": 1})).error["field"] == "bogus"
    unchanged = await api.get(path)
    assert unchanged.body["version"] == 1 and unchanged.body["name"] == "one"
    ok = await api.patch(path, {"version": 1, "url": echo.url.replace("127.0.0.1", "localhost")})
    assert ok.status == 200 and ok.body["version"] == 2
    for bad_id in (MISSING_ID, "not-a-uuid", "x" * 300, "%00", MISSING_ID.upper()):
        for method in ("GET", "PATCH", "DELETE"):
            missing = await api.request(method, f"{UPSTREAMS}/{bad_id}",
                                        json={} if method == "PATCH" else None)
            assert missing.status == 404, (bad_id, method, missing.text)


# --- catalogs -----------------------------------------------------------------------------


async def test_tools_from_the_store_and_from_the_upstream(api: Api, echo: Upstream) -> None:
    upstream = await api.create_upstream(name="echo", url=echo.url)
    tools = f"{UPSTREAMS}/{upstream['id']}/tools"
    stored = await api.get(tools)
    assert stored.body == {"items": [], "next_cursor": None}  # never refreshed yet
    fresh = await api.get(tools + "?refresh=true")
    assert fresh.status == 200, fresh.text
    [echo_tool] = fresh.body["items"]
    assert echo_tool["name"] == "echo" and echo_tool["allowed"] is True
    assert echo_tool["mcp_name"] is None  # this app serves no /mcp (the router's tests do)
    assert echo_tool["description"] == "Return the text unchanged."
    assert echo_tool["input_schema"]["properties"]["text"]["type"] == "string"
    after = (await api.get(f"{UPSTREAMS}/{upstream['id']}")).body
    assert after["health_status"] == "healthy" and after["tool_count"] == 1
    assert after["last_checked_at"] and after["catalog_updated_at"] and after["last_error"] is None
    assert after["version"] == 1  # a refresh is not the user's edit
    assert (await api.get(tools)).body == fresh.body  # now stored
    await api.patch(f"{UPSTREAMS}/{upstream['id']}", {"disabled_tools": ["echo"]})
    switched_off = (await api.get(tools)).body["items"][0]
    assert switched_off["allowed"] is False
    await api.patch(f"{UPSTREAMS}/{upstream['id']}",
                    {"disabled_tools": [], "enabled_tools": ["other"]})
    assert (await api.get(tools)).body["items"][0]["allowed"] is False
    assert (await api.get(tools + "?refresh=maybe")).error["field"] == "refresh"
    one = await api.get(tools + "/echo")
    assert one.status == 200 and one.body == (await api.get(tools)).body["items"][0]
    for missing in ("nope", "echo/x", "ech%6F%00", "x" * 300):
        assert (await api.get(f"{tools}/{missing}")).status == 404, missing
    assert (await api.get(tools + "?cursor=bad")).error["field"] == "cursor"


async def test_refresh_stores_the_whole_catalog_and_pages_tools(
    hub: Hub, api: Api, fx: Upstream
) -> None:
    upstream = await api.create_upstream(name="fx", url=fx.url, transport="http")
    refreshed = await api.post(f"{UPSTREAMS}/{upstream['id']}/refresh")
    assert refreshed.status == 200, refreshed.text
    assert refreshed.body["health_status"] == "healthy" and refreshed.body["tool_count"] == 8
    names: list[str] = []
    cursor = None
    while True:
        page = await api.get(f"{UPSTREAMS}/{upstream['id']}/tools?limit=3"
                             + (f"&cursor={cursor}" if cursor else ""))
        names += [tool["name"] for tool in page.body["items"]]
        cursor = page.body["next_cursor"]
        if cursor is None:
            break
    assert names == ["echo", "write_note", "env", "crash", "flaky_read", "flaky_write",
                     "add_tool", "big"]
    read_only = (await api.get(f"{UPSTREAMS}/{upstream['id']}/tools?limit=1")).body["items"][0]
    assert read_only["annotations"] == {"readOnlyHint": True}
    store = await open_store(hub)
    try:
        catalog = await store.catalog.get(api.user_id, upstream["id"])
    finally:
        await store.close()
    assert [p["name"] for p in catalog.prompts] == ["greeting"]
    assert [r["uri"] for r in catalog.resources] == ["fixture://fx/about"]


async def test_a_failing_upstream_is_502_and_recorded(api: Api, echo: Upstream) -> None:
    upstream = await api.create_upstream(name="flaky", url=echo.url, connect_timeout_s=5)
    path = f"{UPSTREAMS}/{upstream['id']}"
    assert (await api.post(path + "/refresh")).status == 200
    dead_port = free_port()
    await api.patch(path, {"url": f"http://127.0.0.1:{dead_port}/mcp"})
    for failing in (api.post(path + "/refresh"), api.get(path + "/tools?refresh=true")):
        reply = await failing
        assert reply.status == 502, reply.text
        assert reply.error["code"] == "upstream_unavailable"
        assert reply.error["message"].startswith("flaky: ")
        assert str(dead_port) in reply.error["message"]
    state = (await api.get(path)).body
    assert state["health_status"] == "unhealthy" and str(dead_port) in state["last_error"]
    kept = await api.get(path + "/tools")  # the last good catalog stays
    assert [tool["name"] for tool in kept.body["items"]] == ["echo"]
    await api.patch(path, {"url": echo.url})
    assert (await api.post(path + "/refresh")).body["health_status"] == "healthy"
    assert (await api.get(path)).body["last_error"] is None
    assert (await api.post(f"{UPSTREAMS}/{MISSING_ID}/refresh")).status == 404
    assert (await api.get(f"{UPSTREAMS}/{MISSING_ID}/tools")).status == 404


async def test_the_upstream_gets_its_own_credentials_never_the_callers_token(
    api: Api,
) -> None:
    seen: list[dict[str, str]] = []
    server = Server("recorder", "1.0")

    def ping() -> str:
        """Answer."""
        return "pong"

    server.add_tool(ping)
    inner = server.asgi_app()

    async def recording(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            seen.append({k.decode().lower(): v.decode() for k, v in scope["headers"]})
        await inner(scope, receive, send)

    with serve_app(recording) as base:
        upstream = await api.create_upstream(
            name="rec", url=base + "/mcp", bearer_token=BEARER,
            headers={"X-Api-Key": HEADER_SECRET, "Authorization": "Token ignored"})
        reply = await api.get(f"{UPSTREAMS}/{upstream['id']}/tools?refresh=true")
        assert reply.status == 200, reply.text
        assert [tool["name"] for tool in reply.body["items"]] == ["ping"]
    assert seen
    assert api.token is not None
    for headers in seen:
        assert headers.get("authorization") == f"Bearer {BEARER}"  # the bearer wins
        assert headers.get("x-api-key") == HEADER_SECRET
        assert api.token not in json.dumps(headers)


# --- stdio (operator-enabled) -----------------------------------------------------------------


@pytest.fixture(scope="module")
def stdio_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    path = tmp_path_factory.mktemp("stdio") / "hub.db"
    with running_hub(f"sqlite+aiosqlite:///{path}", allow_stdio=True) as hub:
        yield hub


async def test_stdio_upstreams_need_the_operator_flag(stdio_hub: Hub) -> None:
    command = [sys.executable, "-m", "mcpkit.testing.echo_server", "--transport", "stdio"]
    _user_id, api = await fresh_user(stdio_hub)
    created = await api.post(UPSTREAMS, {"name": "local", "transport": "stdio",
                                         "command": command})
    assert created.status == 201, created.text
    assert created.body["command"] == command and created.body["url"] is None
    tools = await api.get(f"{UPSTREAMS}/{created.body['id']}/tools?refresh=true")
    assert tools.status == 200, tools.text
    assert [tool["name"] for tool in tools.body["items"]] == ["echo"]
    for body, field in (({"name": "b", "transport": "stdio"}, "command"),
                        ({"name": "b", "transport": "stdio", "command": []}, "command"),
                        ({"name": "b", "transport": "stdio", "command": [""]}, "command[0]"),
                        ({"name": "b", "transport": "stdio", "command": ["x"],
                          "url": "http://127.0.0.1/"}, "url")):
        bad = await api.post(UPSTREAMS, body)
        assert bad.status == 422 and bad.error["field"] == field, bad.text
    path = f"{UPSTREAMS}/{created.body['id']}"
    # this hub refuses private upstreams: switching to a loopback URL is checked too
    private = await api.patch(path, {"transport": "http", "url": "http://127.0.0.1:9/mcp"})
    assert private.status == 422 and private.error["field"] == "url"
    public = await api.patch(path, {"transport": "http", "url": "http://93.184.216.34/mcp"})
    assert public.status == 200 and public.body["command"] is None  # nothing connects


# --- admin --------------------------------------------------------------------------------


async def test_admins_manage_users_and_tokens(hub: Hub) -> None:
    root = Api(hub, hub.admin_token)
    name = unique("carol")
    created = await root.post(ADMIN_USERS, {"name": name})
    assert created.status == 201 and created.body["is_admin"] is False
    user_id = created.body["id"]
    assert created.headers["Location"] == f"{ADMIN_USERS}/{user_id}"
    assert (await root.post(ADMIN_USERS, {"name": name})).status == 409
    assert (await root.post(ADMIN_USERS, {"name": "Not A Slug"})).error["field"] == "name"
    assert (await root.get(f"{ADMIN_USERS}/{user_id}")).body == created.body
    listed: list[str] = []
    cursor = None
    while True:
        page = await root.get(ADMIN_USERS + "?limit=2" + (f"&cursor={cursor}" if cursor else ""))
        listed += [user["name"] for user in page.body["items"]]
        if (cursor := page.body["next_cursor"]) is None:
            break
    assert name in listed and "root" in listed and listed == sorted(listed)

    token = await root.post(f"{ADMIN_USERS}/{user_id}/tokens",
                            {"name": "laptop", "expires_in_days": 30})
    assert token.status == 201
    secret = token.body["secret"]
    assert secret.startswith("mcphub_") and token.body["token"]["active"] is True
    assert token.body["token"]["expires_at"] is not None
    carol = Api(hub, secret)
    assert (await carol.get("/api/v1/users/me")).body["name"] == name
    tokens = await root.get(f"{ADMIN_USERS}/{user_id}/tokens")
    assert [t["name"] for t in tokens.body["items"]] == ["laptop"]
    assert secret not in tokens.text and tokens.body["items"][0]["prefix"] == secret[:12]

    disabled = await root.patch(f"{ADMIN_USERS}/{user_id}", {"disabled": True})
    assert disabled.body["disabled"] is True
    assert (await carol.get("/api/v1/users/me")).status == 401
    await root.patch(f"{ADMIN_USERS}/{user_id}", {"disabled": False})
    assert (await carol.get("/api/v1/users/me")).status == 200
    promoted = await root.patch(f"{ADMIN_USERS}/{user_id}", {"is_admin": True})
    assert promoted.body["is_admin"] is True
    assert (await carol.get(ADMIN_USERS)).status == 200
    await root.patch(f"{ADMIN_USERS}/{user_id}", {"is_admin": False})
    assert (await carol.get(ADMIN_USERS)).status == 403
    assert (await root.patch(f"{ADMIN_USERS}/{user_id}", {"disabled": None})).status == 422
    root_id = (await root.get("/api/v1/users/me")).body["id"]
    for change, field in (({"disabled": True}, "disabled"), ({"is_admin": False}, "is_admin")):
        lockout = await root.patch(f"{ADMIN_USERS}/{root_id}", change)  # no self-lockout
        assert lockout.status == 422 and lockout.error["field"] == field, lockout.text
    assert (await root.get("/api/v1/users/me")).body["is_admin"] is True

    token_id = token.body["token"]["id"]
    other_id, _ = await fresh_user(hub)
    assert (await root.delete(f"{ADMIN_USERS}/{other_id}/tokens/{token_id}")).status == 404
    revoked = await root.delete(f"{ADMIN_USERS}/{user_id}/tokens/{token_id}")
    assert revoked.status == 200 and revoked.body["revoked_at"] is not None
    assert revoked.body["active"] is False
    assert (await carol.get("/api/v1/users/me")).status == 401
    again = await root.delete(f"{ADMIN_USERS}/{user_id}/tokens/{token_id}")
    assert again.body["revoked_at"] == revoked.body["revoked_at"]

    for path in (f"{ADMIN_USERS}/999999", f"{ADMIN_USERS}/999999/tokens"):
        assert (await root.get(path)).status == 404
    assert (await root.post(f"{ADMIN_USERS}/999999/tokens", {})).status == 404
    assert (await root.delete(f"{ADMIN_USERS}/{user_id}/tokens/999999")).status == 404
    for path, field in ((f"{ADMIN_USERS}/0", "user_id"), (f"{ADMIN_USERS}/abc", "user_id"),
                        (f"{ADMIN_USERS}/{2**40}", "user_id"),
                        (f"{ADMIN_USERS}/{user_id}/tokens/-1", "token_id")):
        method = "DELETE" if "/tokens/" in path else "GET"
        bad = await root.request(method, path)
        assert bad.status == 422 and bad.error["field"] == field, bad.text
    bad_token = await root.post(f"{ADMIN_USERS}/{user_id}/tokens",
                                {"name": "x", "expires_in_days": 0})
    assert bad_token.error["field"] == "expires_in_days"
    assert (await root.post(f"{ADMIN_USERS}/{user_id}/tokens", {"name": " "})).status == 422


@pytest.fixture
def capped_hub(tmp_path: Path) -> Iterator[Hub]:
    """A hub whose users may register 3 upstreams each."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    with running_hub(url, allow_private_upstreams=True, max_upstreams_per_user=3) as running:
        yield running


async def test_a_user_registers_at_most_max_upstreams_per_user(
        capped_hub: Hub, echo: Upstream) -> None:
    """One user's registrations cannot grow without end (each is stored, health-checked and
    listed): past the cap a create is 409 naming it, other users are not touched, and a
    removal makes room again."""
    _, alice = await fresh_user(capped_hub)
    _, bob = await fresh_user(capped_hub)
    made = [await alice.create_upstream(name=f"up{i}", url=echo.url) for i in range(3)]
    refused = await alice.post(UPSTREAMS, {"name": "up3", "url": echo.url})
    assert refused.status == 409 and refused.error["field"] == "upstreams"
    assert "(3)" in refused.error["message"]
    await bob.create_upstream(name="up0", url=echo.url)
    assert (await alice.delete(f"{UPSTREAMS}/{made[0]['id']}")).status == 204
    await alice.create_upstream(name="up3", url=echo.url)
    assert HubSettings.from_env({}).max_upstreams_per_user == 100
    assert HubSettings.from_env(
        {"MCPKIT_HUB_MAX_UPSTREAMS_PER_USER": "7"}).max_upstreams_per_user == 7
