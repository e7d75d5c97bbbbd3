"""The WebSocket transport over real sockets, against the fixture server (aiohttp client)."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import anyio
import pytest

from .conftest import inprocess_uvicorn

pytestmark = pytest.mark.anyio

INIT_PARAMS = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "tests", "version": "0"},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _receive(ws: aiohttp.ClientWebSocketResponse) -> dict[str, Any]:
    with anyio.fail_after(10):
        msg = await ws.receive()
    assert msg.type == aiohttp.WSMsgType.TEXT, msg
    message: dict[str, Any] = json.loads(msg.data)
    return message


async def _session_round_trip(ws: aiohttp.ClientWebSocketResponse) -> None:
    assert ws.protocol == "mcp"
    await ws.send_str(json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}))
    init = await _receive(ws)
    assert init["id"] == 1
    assert init["result"]["protocolVersion"] == "2025-06-18"
    await ws.send_str(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    await ws.send_str(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    tools = await _receive(ws)
    assert tools["id"] == 2
    assert "test_simple_text" in {t["name"] for t in tools["result"]["tools"]}
    await ws.send_str(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                                  "params": {"name": "test_simple_text", "arguments": {}}}))
    call = await _receive(ws)
    assert call["id"] == 3
    assert call["result"]["content"][0]["text"].startswith("This is a simple text")
    await ws.send_str("{broken")
    error = await _receive(ws)
    assert error["error"]["code"] == -32700


@pytest.mark.parametrize("path", ["/mcp", "/ws"])
async def test_round_trip(fixture_server: str, path: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.ws_connect(fixture_server + path, protocols=("mcp",)) as ws:
            await _session_round_trip(ws)


async def test_sessions_are_per_socket(fixture_server: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.ws_connect(fixture_server + "/ws", protocols=("mcp",)) as ws:
            await ws.send_str(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            reply = await _receive(ws)
            assert reply["error"]["code"] == -32602  # no initialize on this socket


async def test_handshake_without_subprotocol_is_refused(fixture_server: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await http.ws_connect(fixture_server + "/mcp")
        assert 400 <= info.value.status < 500
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await http.ws_connect(fixture_server + "/ws", protocols=("other",))
        assert 400 <= info.value.status < 500


async def test_bad_origin_is_refused(fixture_server: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        with pytest.raises(aiohttp.WSServerHandshakeError) as info:
            await http.ws_connect(fixture_server + "/mcp", protocols=("mcp",),
                                  origin="http://evil.example")
        assert info.value.status == 403


async def test_binary_frame_closes_with_1003(fixture_server: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.ws_connect(fixture_server + "/ws", protocols=("mcp",)) as ws:
            await ws.send_bytes(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
            with anyio.fail_after(10):
                msg = await ws.receive()
            assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
            assert ws.close_code == 1003


async def test_server_notifications_reach_the_socket(fixture_server: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.ws_connect(fixture_server + "/ws", protocols=("mcp",)) as ws:
            await ws.send_str(json.dumps(
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}))
            assert (await _receive(ws))["id"] == 1
            await ws.send_str(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            params = {"name": "test_trigger_tool_change", "arguments": {}}
            await ws.send_str(json.dumps(
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": params}))
            seen = [await _receive(ws), await _receive(ws)]
            assert {m.get("method") for m in seen} == {"notifications/tools/list_changed", None}
            assert any(m.get("id") == 2 and "result" in m for m in seen)


async def test_oversized_message_closes_with_1009() -> None:
    async with inprocess_uvicorn(max_body_bytes=1024) as base:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
            async with http.ws_connect(base + "/prefix/mcp", protocols=("mcp",)) as ws:
                await ws.send_str(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
                assert (await _receive(ws)) == {"jsonrpc": "2.0", "id": 1, "result": {}}
                await ws.send_str(json.dumps(
                    {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": "a" * 2048}}))
                with anyio.fail_after(10):
                    msg = await ws.receive()
                assert msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
                assert ws.close_code == 1009
