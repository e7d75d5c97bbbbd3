"""The HTTP+SSE transport (2024-11-05) over real sockets: raw aiohttp and the official SDK."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import anyio
import pytest

from mcpkit.protocol.sse import Event, EventParser

from .conftest import inprocess_uvicorn

pytestmark = pytest.mark.anyio

INIT_PARAMS = {
    "protocolVersion": "2024-11-05",
    "capabilities": {},
    "clientInfo": {"name": "tests", "version": "0"},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SseStream:
    """Reads events from an open GET /sse response."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.parser = EventParser()
        self.pending: list[Event] = []

    async def next_event(self) -> Event:
        with anyio.fail_after(10):
            while not self.pending:
                chunk = await self.response.content.readany()
                if not chunk:
                    raise EOFError("SSE stream ended")
                self.pending.extend(self.parser.feed(chunk))
            return self.pending.pop(0)

    async def next_message(self) -> dict[str, Any]:
        event = await self.next_event()
        assert event.event == "message"
        message: dict[str, Any] = json.loads(event.data)
        return message


@asynccontextmanager
async def open_session(
    http: aiohttp.ClientSession, base: str, sse_path: str = "/sse"
) -> AsyncIterator[tuple[SseStream, str]]:
    async with http.get(base + sse_path, headers={"Accept": "text/event-stream"}) as response:
        assert response.status == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        stream = SseStream(response)
        first = await stream.next_event()
        assert first.event == "endpoint"
        yield stream, first.data


async def test_raw_session_round_trip(fixture_server: str) -> None:
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        async with open_session(http, fixture_server) as (stream, endpoint):
            assert endpoint.startswith("/messages?session_id=")
            url = fixture_server + endpoint

            async def post(message: dict[str, Any]) -> None:
                async with http.post(url, json=message) as response:
                    assert response.status == 202

            await post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS})
            init = await stream.next_message()
            assert init["id"] == 1
            assert init["result"]["protocolVersion"] == "2024-11-05"
            assert init["result"]["serverInfo"]["name"] == "mcpkit-conformance-server"
            await post({"jsonrpc": "2.0", "method": "notifications/initialized"})

            await post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
            tools = await stream.next_message()
            assert tools["id"] == 2
            assert "test_simple_text" in {t["name"] for t in tools["result"]["tools"]}

            await post({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                        "params": {"name": "test_simple_text", "arguments": {}}})
            call = await stream.next_message()
            assert call["id"] == 3
            assert call["result"]["content"][0]["text"].startswith("This is a simple text")

            # another client cannot use a session id that does not exist
            async with http.post(fixture_server + "/messages?session_id=nope",
                                 json={"jsonrpc": "2.0", "id": 4, "method": "ping"}) as resp:
                assert resp.status == 404
            async with http.post(url, data=b"{not json",
                                 headers={"content-type": "application/json"}) as resp:
                assert resp.status == 400

        # the GET is gone: the session ends (the server notices the disconnect asynchronously)
        with anyio.fail_after(5):
            while True:
                async with http.post(url, json={"jsonrpc": "2.0", "id": 5,
                                                "method": "ping"}) as resp:
                    if resp.status == 404:
                        break
                    assert resp.status == 202
                await anyio.sleep(0.05)


async def test_official_sdk_sse_client(fixture_server: str) -> None:
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client

    with anyio.fail_after(30):
        async with sse_client(fixture_server + "/sse") as (read, write):
            async with ClientSession(read, write) as session:
                init = await session.initialize()
                assert init.server_info.name == "mcpkit-conformance-server"
                tools = await session.list_tools()
                assert "test_simple_text" in {tool.name for tool in tools.tools}
                result = await session.call_tool("test_simple_text", {})
                assert not result.is_error
                text = result.content[0]
                assert getattr(text, "text", "").startswith("This is a simple text")


async def test_mounted_under_prefix_and_checks() -> None:
    async with inprocess_uvicorn(max_body_bytes=2048) as base:
        timeout = aiohttp.ClientTimeout(total=30)
        async with aiohttp.ClientSession(timeout=timeout) as http:
            async with open_session(http, base, "/prefix/sse") as (stream, endpoint):
                assert endpoint.startswith("/prefix/messages?session_id=")
                url = base + endpoint
                async with http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}) as r:
                    assert r.status == 202
                assert (await stream.next_message()) == {"jsonrpc": "2.0", "id": 1, "result": {}}
                big = {"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": "a" * 4096}}
                async with http.post(url, json=big) as r:
                    assert r.status == 413
                async with http.post(url, json={"jsonrpc": "2.0", "id": 3, "method": "ping"},
                                     headers={"Origin": "http://evil.example"}) as r:
                    assert r.status == 403
            async with http.get(base + "/prefix/sse",
                                headers={"Origin": "http://evil.example"}) as r:
                assert r.status == 403
            async with http.get(base + "/prefix/sse", headers={"Host": "evil.example"}) as r:
                assert r.status == 403


async def test_server_notifications_come_as_message_events(fixture_server: str) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with open_session(http, fixture_server) as (stream, endpoint):
            url = fixture_server + endpoint
            for message in (
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
            ):
                async with http.post(url, json=message) as response:
                    assert response.status == 202
            assert (await stream.next_message())["id"] == 1
            params = {"name": "test_trigger_tool_change", "arguments": {}}
            async with http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                            "params": params}) as response:
                assert response.status == 202
            seen = [await stream.next_message(), await stream.next_message()]
            assert {m.get("method") for m in seen} == {"notifications/tools/list_changed", None}
            assert any(m.get("id") == 2 and "result" in m for m in seen)
