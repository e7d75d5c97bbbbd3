"""The Engine's seam (server/engine.py): what a server transport calls, and the method table
an aggregating server swaps handlers in. The transports themselves are tested over real
stdio pipes and real HTTP in tests/transports; these drive the seam directly."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import MODERN_VERSION, MemoryChannel, modern_meta

from mcpkit.errors import UsageError
from mcpkit.protocol import errors, jsonrpc
from mcpkit.server.call import Call
from mcpkit.server.connection import Connection
from mcpkit.server.engine import Engine
from mcpkit.server.server import Server

pytestmark = pytest.mark.anyio


def make_server() -> Server:
    server = Server("seam", "1.0.0")

    @server.tool()
    def hello(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    return server


def request(method: str, params: dict[str, Any] | None = None, id: int = 1) -> jsonrpc.Request:
    raw = jsonrpc.encode_request(id, method, params) if params is not None else (
        jsonrpc.encode_request(id, method))
    message = jsonrpc.decode_message(raw)
    assert isinstance(message, jsonrpc.Request)
    return message


def modern(method: str, version: str = MODERN_VERSION, **params: Any) -> jsonrpc.Request:
    return request(method, {**params, "_meta": modern_meta(version)})


def http_headers(method: str, version: str = MODERN_VERSION, **extra: str) -> dict[str, str]:
    return {"mcp-protocol-version": version, "mcp-method": method, **extra}


def admit(engine: Engine, message: jsonrpc.Request, hdrs: dict[str, str] | None) -> Call:
    return engine.admit(message, hdrs, Connection(), MemoryChannel(), "alice")


def refusal(engine: Engine, message: jsonrpc.Request, hdrs: dict[str, str] | None) -> int:
    with pytest.raises(errors.McpError) as caught:
        admit(engine, message, hdrs)
    return caught.value.code


def test_is_modern_is_the_era_decision() -> None:
    engine = make_server().engine
    assert engine.is_modern(modern("tools/list"))
    assert not engine.is_modern(request("tools/list"))
    assert not engine.is_modern(request("tools/list", {"_meta": {"progressToken": 1}}))


def test_admit_builds_the_call_of_a_modern_request() -> None:
    engine = make_server().engine
    call = admit(engine, modern("tools/list"), http_headers("tools/list"))
    assert call.modern and call.method == "tools/list" and call.request_id == 1
    assert call.protocol_version == MODERN_VERSION and call.principal == "alice"
    assert call.client_info == {"name": "tests", "version": "0"}


def test_admit_checks_headers_in_the_spec_order() -> None:
    engine = make_server().engine
    # _meta first (-32602), then the version header (-32020) before the version (-32022)
    broken_meta = request("tools/list", {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN_VERSION}})
    assert refusal(engine, broken_meta, http_headers("tools/list", "2020-01-01")) == -32602
    old = modern("tools/list", "2099-01-01")
    assert refusal(engine, old, http_headers("tools/list")) == errors.HEADER_MISMATCH
    assert refusal(engine, old, http_headers("tools/list", "2099-01-01")) == (
        errors.UNSUPPORTED_PROTOCOL_VERSION)
    # the method (-32601) before Mcp-Method (-32020)
    assert refusal(engine, modern("nope/nope"), http_headers("other")) == (
        errors.METHOD_NOT_FOUND)
    assert refusal(engine, modern("tools/list"), http_headers("tools/call")) == (
        errors.HEADER_MISMATCH)


def test_without_headers_admit_checks_none() -> None:
    """stdio, WebSocket, HTTP+SSE: no HTTP headers to check."""
    engine = make_server().engine
    assert admit(engine, modern("tools/list"), None).modern


def test_admit_refuses_a_legacy_request_without_a_session() -> None:
    engine = make_server().engine
    assert refusal(engine, request("tools/list"), None) == errors.INVALID_PARAMS
    assert not admit(engine, request("ping"), None).modern


def test_check_legacy_headers() -> None:
    engine = make_server().engine
    engine.check_legacy_headers({})
    engine.check_legacy_headers({"mcp-protocol-version": "2025-06-18"})
    with pytest.raises(errors.McpError) as caught:
        engine.check_legacy_headers({"mcp-protocol-version": MODERN_VERSION})
    assert caught.value.code == errors.INVALID_REQUEST


def test_negotiate_session() -> None:
    engine = make_server().engine
    offered = request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                     "clientInfo": {"name": "c"}})
    session = engine.negotiate_session(offered)
    assert session is not None and session.protocol_version == "2025-06-18"
    assert engine.negotiate_session(request("initialize", {"protocolVersion": 3})) is None


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.sampled_from([*modern_meta(), "x"]),
                       st.one_of(st.none(), st.integers(), st.text(max_size=12),
                                 st.lists(st.integers(), max_size=2),
                                 st.dictionaries(st.text(max_size=5), st.integers(),
                                                 max_size=2))),
       st.dictionaries(st.sampled_from(["mcp-protocol-version", "mcp-method", "mcp-name"]),
                       st.text(max_size=12)))
def test_admit_raises_only_mcp_errors(meta_value: dict[str, Any], hdrs: dict[str, str]) -> None:
    """Whatever a modern request's `_meta` and headers hold, admit makes a Call or raises
    the McpError to answer with."""
    engine = make_server().engine
    message = request("tools/call", {"name": "hello", "_meta": meta_value})
    try:
        call = admit(engine, message, hdrs)
    except errors.McpError as exc:
        assert exc.code < 0
    else:
        assert call.method == "tools/call"


# --- session hooks ----------------------------------------------------------------------------


async def test_an_open_session_gets_notifications_until_closed() -> None:
    server = make_server()
    engine = server.engine
    channel = MemoryChannel()
    connection = Connection(channel)
    connection.legacy = engine.negotiate_session(request("initialize", {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}}))
    assert connection.legacy is not None
    connection.legacy.initialized = True
    engine.open_session(connection)
    await server.notify_list_changed("tools")
    await channel.wait_for(lambda m: m.get("method") == "notifications/tools/list_changed")
    engine.close_session(connection)
    await server.notify_list_changed("prompts")
    assert not channel.notifications("notifications/prompts/list_changed")


# --- the method table -------------------------------------------------------------------------


async def test_replaced_handlers_keep_their_eras_and_capability() -> None:
    async def only_this(server: Server, call: Call) -> dict[str, Any]:
        return {"tools": [{"name": "swapped", "inputSchema": {"type": "object"}}]}

    server = make_server()
    engine = Engine(server, handlers={"tools/list": only_this})
    channel = MemoryChannel()
    body = await engine.handle_request(modern("tools/list"), Connection(channel), channel)
    assert body is not None
    assert json.loads(body)["result"]["tools"][0]["name"] == "swapped"
    assert engine.methods["tools/list"][1:] == server.engine.methods["tools/list"][1:]
    server.remove_tool("hello")  # the capability it needs is gone: -32601, as before
    body = await engine.handle_request(modern("tools/list"), Connection(channel), channel)
    assert body is not None and json.loads(body)["error"]["code"] == errors.METHOD_NOT_FOUND


def test_replacing_an_unknown_method_is_a_usage_error() -> None:
    engine = make_server().engine

    async def handler(server: Server, call: Call) -> dict[str, Any]:
        return {}

    with pytest.raises(UsageError, match="no/such"):
        engine.replace_handlers({"no/such": handler})
    with pytest.raises(UsageError):
        Engine(make_server(), handlers={"no/such": handler})
