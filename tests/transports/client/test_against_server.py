"""The client transports against mcpkit's own server (the conformance fixture process):
Streamable HTTP in both eras, HTTP+SSE and WebSocket."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest

from mcpkit.transports.client.base import SessionExpired
from mcpkit.transports.client.http import StreamableHttpTransport
from mcpkit.transports.client.sse import LegacySseTransport
from mcpkit.transports.client.websocket import WebSocketTransport

from .support import notification, opened, request

pytestmark = pytest.mark.anyio

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
INIT_PARAMS = {
    "protocolVersion": LEGACY,
    "capabilities": {},
    "clientInfo": {"name": "tests", "version": "0"},
}


def modern_meta(version: str = MODERN) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


async def _initialize(transport: StreamableHttpTransport, inbound: Any) -> None:
    await transport.send(request(1, "initialize", INIT_PARAMS))
    init = await inbound.response(1)
    assert init["result"]["protocolVersion"] == LEGACY
    assert transport.session_id
    transport.protocol_version = LEGACY
    await transport.send(notification("notifications/initialized"))


async def test_legacy_session_round_trip(http_server: Any) -> None:
    transport = StreamableHttpTransport(http_server.url)
    async with opened(transport) as inbound:
        await _initialize(transport, inbound)
        session_id = transport.session_id
        await transport.send(request(2, "tools/list"))
        tools = await inbound.response(2)
        assert "test_tool_with_progress" in {t["name"] for t in tools["result"]["tools"]}
        call = {"name": "test_tool_with_progress", "arguments": {},
                "_meta": {"progressToken": "p1"}}
        await transport.send(request(3, "tools/call", call))
        answer = await inbound.response(3)
        assert answer["result"]["content"][0]["text"] == "Progress test completed"
        progress = inbound.notifications("notifications/progress")
        assert [p["params"]["progress"] for p in progress] == [0, 50, 100]
    # close() sent DELETE: the session is gone.
    async with aiohttp.ClientSession() as client, client.post(
        http_server.url,
        json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"},
        headers={"mcp-session-id": session_id or "", "mcp-protocol-version": LEGACY,
                 "accept": "application/json, text/event-stream"},
    ) as resp:
        assert resp.status == 404


async def test_legacy_stream_resumed_by_the_server_s_retry(http_server: Any) -> None:
    """`test_reconnection` closes its SSE stream mid-call (retry 500 ms); the transport
    resumes it with GET + Last-Event-ID and gets the result."""
    transport = StreamableHttpTransport(http_server.url, default_retry_s=5.0)
    async with opened(transport) as inbound:
        await _initialize(transport, inbound)
        await transport.send(request(2, "tools/call", {"name": "test_reconnection",
                                                        "arguments": {}}))
        answer = await inbound.response(2)
        assert answer["result"]["content"][0]["text"] == "Reconnection test completed"


async def test_expired_session_is_reported(http_server: Any) -> None:
    transport = StreamableHttpTransport(http_server.url)
    async with opened(transport) as inbound:
        transport.session_id = "no-such-session"
        transport.protocol_version = LEGACY
        await transport.send(request(1, "tools/list"))
        assert isinstance(await inbound.failure(1), SessionExpired)
        with pytest.raises(SessionExpired):
            await transport.send(notification("notifications/initialized"))
        transport.reset_session()
        assert transport.session_id is None


async def test_modern_request(http_server: Any) -> None:
    transport = StreamableHttpTransport(http_server.url)
    transport.protocol_version = MODERN
    async with opened(transport) as inbound:
        await transport.send(request(1, "server/discover", {"_meta": modern_meta()},
                                     Mcp_Method="server/discover"))
        answer = await inbound.response(1)
        assert MODERN in answer["result"]["supportedVersions"]
        assert transport.session_id is None
        assert not inbound.failures


async def test_modern_http_error_is_delivered_as_an_error_response(http_server: Any) -> None:
    """400 with a JSON-RPC error for the request (-32022): the session gets the error."""
    transport = StreamableHttpTransport(http_server.url)
    transport.protocol_version = "2099-01-01"
    async with opened(transport) as inbound:
        await transport.send(request(1, "server/discover", {"_meta": modern_meta("2099-01-01")},
                                     Mcp_Method="server/discover"))
        answer = await inbound.response(1)
        assert answer["error"]["code"] == -32022
        assert not inbound.failures


async def test_standalone_stream(http_server: Any) -> None:
    transport = StreamableHttpTransport(http_server.url)
    async with opened(transport) as inbound:
        assert not await transport.open_standalone_stream()  # no session: 405
        await _initialize(transport, inbound)
        assert await transport.open_standalone_stream()
        assert await transport.open_standalone_stream()  # already open
        for call_id in (2, 3):  # adds, then removes, the dynamic tool: two announcements
            await transport.send(request(call_id, "tools/call", {
                "name": "test_trigger_tool_change", "arguments": {}}))
            await inbound.response(call_id)
        await inbound.until(
            lambda: len(inbound.notifications("notifications/tools/list_changed")) == 2
        )


async def test_legacy_http_sse_round_trip(http_server: Any) -> None:
    base = http_server.url.removesuffix("/mcp")
    transport = LegacySseTransport(f"{base}/sse")
    async with opened(transport) as inbound:
        assert transport.endpoint is not None
        assert transport.endpoint.startswith(f"{base}/messages?session_id=")
        await transport.send(request(1, "initialize", {**INIT_PARAMS,
                                                       "protocolVersion": "2024-11-05"}))
        assert (await inbound.response(1))["result"]["protocolVersion"] == "2024-11-05"
        await transport.send(notification("notifications/initialized"))
        await transport.send(request(2, "tools/list"))
        assert (await inbound.response(2))["result"]["tools"]
        await transport.abandon(2)  # a no-op
    assert not inbound.closed_with  # closed by us: nothing reported


@pytest.mark.parametrize("path", ["/ws", "/mcp"])
async def test_websocket_round_trip(http_server: Any, path: str) -> None:
    url = http_server.url.removesuffix("/mcp").replace("http://", "ws://") + path
    transport = WebSocketTransport(url)
    async with opened(transport) as inbound:
        await transport.send(request(1, "initialize", INIT_PARAMS))
        assert (await inbound.response(1))["result"]["protocolVersion"] == LEGACY
        await transport.send(notification("notifications/initialized"))
        await transport.send(request(2, "tools/call", {"name": "test_simple_text",
                                                        "arguments": {}}))
        assert (await inbound.response(2))["result"]["content"]
    assert not inbound.closed_with
