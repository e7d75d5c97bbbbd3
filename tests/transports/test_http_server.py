"""Streamable HTTP against a real server process (the conformance fixture server)."""

from __future__ import annotations

import io
import json
from typing import Any

import aiohttp
import anyio
import pytest

from mcpkit.protocol.sse import EventParser

pytestmark = pytest.mark.anyio

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
}
BASE_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
TIMEOUT = aiohttp.ClientTimeout(total=10)


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**BASE_HEADERS, "mcp-protocol-version": VERSION, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return headers


async def read_messages(response: aiohttp.ClientResponse) -> list[dict[str, Any]]:
    """The JSON-RPC messages of a JSON or SSE response body."""
    if response.content_type == "application/json":
        return [await response.json()]
    assert response.content_type == "text/event-stream"
    parser = EventParser()
    out: list[dict[str, Any]] = []
    async for chunk in response.content.iter_any():
        out += [json.loads(e.data) for e in parser.feed(chunk) if e.data]
    return out


@pytest.fixture
async def client() -> Any:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        yield session


async def test_modern_post(client: aiohttp.ClientSession, http_server: Any) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}, "_meta": META},
    }
    async with client.post(
        http_server.url, json=body, headers=modern_headers("tools/call", "test_simple_text")
    ) as resp:
        assert resp.status == 200
        assert "mcp-session-id" not in resp.headers
        (message,) = await read_messages(resp)
    assert message["id"] == 1 and message["result"]["resultType"] == "complete"


async def test_modern_header_mismatch(client: aiohttp.ClientSession, http_server: Any) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}, "_meta": META},
    }
    async with client.post(
        http_server.url, json=body, headers=modern_headers("tools/call", "other")
    ) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == -32020
    async with client.post(
        http_server.url, json=body, headers=modern_headers("tools/list")
    ) as resp:
        assert resp.status == 400
        assert (await resp.json())["error"]["code"] == -32020


async def test_modern_unsupported_version(client: aiohttp.ClientSession, http_server: Any) -> None:
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}
    body = {"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta}}
    headers = {**modern_headers("tools/list"), "mcp-protocol-version": "2099-01-01"}
    async with client.post(http_server.url, json=body, headers=headers) as resp:
        assert resp.status == 400
        error = (await resp.json())["error"]
    assert error["code"] == -32022 and error["data"]["requested"] == "2099-01-01"


async def test_modern_unknown_method_is_404(
    client: aiohttp.ClientSession, http_server: Any
) -> None:
    body = {"jsonrpc": "2.0", "id": 4, "method": "nope/x", "params": {"_meta": META}}
    async with client.post(http_server.url, json=body, headers=modern_headers("nope/x")) as resp:
        assert resp.status == 404
        assert (await resp.json())["error"]["code"] == -32601


async def test_modern_progress_stream(client: aiohttp.ClientSession, http_server: Any) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 5,
        "method": "tools/call",
        "params": {
            "name": "test_tool_with_progress",
            "arguments": {},
            "_meta": {**META, "progressToken": "pt"},
        },
    }
    async with client.post(
        http_server.url, json=body, headers=modern_headers("tools/call", "test_tool_with_progress")
    ) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        messages = await read_messages(resp)
    progress = [
        m["params"]["progress"] for m in messages if m.get("method") == "notifications/progress"
    ]
    assert progress == [0, 50, 100]
    assert messages[-1]["id"] == 5 and messages[-1]["result"]["resultType"] == "complete"


async def _initialize(client: aiohttp.ClientSession, url: str) -> str:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "tests", "version": "0"},
        },
    }
    async with client.post(url, json=body, headers=BASE_HEADERS) as resp:
        assert resp.status == 200
        session_id = resp.headers["mcp-session-id"]
        (message,) = await read_messages(resp)
    assert message["result"]["protocolVersion"] == "2025-11-25"
    assert session_id and session_id.isascii()
    return session_id


def legacy_headers(session_id: str) -> dict[str, str]:
    return {**BASE_HEADERS, "mcp-session-id": session_id, "mcp-protocol-version": "2025-11-25"}


async def test_legacy_session_lifecycle(client: aiohttp.ClientSession, http_server: Any) -> None:
    url = http_server.url
    sid = await _initialize(client, url)
    headers = legacy_headers(sid)
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with client.post(url, json=note, headers=headers) as resp:
        assert resp.status == 202
        assert await resp.read() == b""
    ping = {"jsonrpc": "2.0", "id": 2, "method": "ping"}
    async with client.post(url, json=ping, headers=headers) as resp:
        assert resp.status == 200
        assert (await read_messages(resp))[0]["result"] == {}
    call = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "test_simple_text", "arguments": {}},
    }
    async with client.post(url, json=call, headers=headers) as resp:
        messages = await read_messages(resp)
        assert messages[-1]["result"]["content"][0]["type"] == "text"
    async with client.delete(url, headers=headers) as resp:
        assert resp.status in (200, 204)
    async with client.post(url, json=ping, headers=headers) as resp:
        assert resp.status == 404
    async with client.delete(url, headers=headers) as resp:
        assert resp.status == 404


async def test_legacy_request_without_session(
    client: aiohttp.ClientSession, http_server: Any
) -> None:
    ping = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    async with client.post(
        http_server.url, json=ping, headers=legacy_headers("no-such-session")
    ) as resp:
        assert resp.status == 404
    async with client.get(
        http_server.url,
        headers={"accept": "text/event-stream", "mcp-session-id": "no-such-session"},
    ) as resp:
        assert resp.status == 404


async def test_origin_and_host_checks(client: aiohttp.ClientSession, http_server: Any) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    evil_origin = {**modern_headers("tools/list"), "origin": "http://evil.example.com"}
    async with client.post(http_server.url, json=body, headers=evil_origin) as resp:
        assert resp.status == 403
    evil_host = {**modern_headers("tools/list"), "host": "evil.example.com"}
    async with client.post(http_server.url, json=body, headers=evil_host) as resp:
        assert resp.status == 403
    local_origin = {
        **modern_headers("tools/list"),
        "origin": f"http://localhost:{http_server.port}",
    }
    async with client.post(http_server.url, json=body, headers=local_origin) as resp:
        assert resp.status == 200


async def test_body_too_large(client: aiohttp.ClientSession, http_server: Any) -> None:
    big = (
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
        + b"x" * (4 * 1024 * 1024 + 10)
        + b'"}}'
    )
    try:
        async with client.post(
            http_server.url, data=io.BytesIO(big), headers=modern_headers("ping")
        ) as resp:
            assert resp.status == 413
    except aiohttp.ClientOSError:
        pytest.fail("the server reset the connection instead of answering 413")


async def test_resume_with_last_event_id(client: aiohttp.ClientSession, http_server: Any) -> None:
    url = http_server.url
    sid = await _initialize(client, url)
    headers = legacy_headers(sid)
    call = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "test_reconnection", "arguments": {}},
    }
    parser = EventParser()
    events = []
    async with client.post(url, json=call, headers=headers) as resp:
        assert resp.status == 200 and resp.content_type == "text/event-stream"
        async for chunk in resp.content.iter_any():
            events += parser.feed(chunk)
    last_id = parser.last_event_id
    assert last_id is not None
    assert not any(e.data and json.loads(e.data).get("id") == 7 for e in events)
    assert any(e.retry_ms for e in events)
    resume = {
        "accept": "text/event-stream",
        "mcp-session-id": sid,
        "mcp-protocol-version": "2025-11-25",
        "last-event-id": last_id,
    }
    result = None
    with anyio.fail_after(8):
        async with client.get(url, headers=resume) as resp:
            assert resp.status == 200
            parser = EventParser()
            async for chunk in resp.content.iter_any():
                for event in parser.feed(chunk):
                    if event.data and json.loads(event.data).get("id") == 7:
                        result = json.loads(event.data)
                if result is not None:
                    break
    assert result["result"]["content"][0]["text"] == "Reconnection test completed"
    async with client.delete(url, headers=headers) as resp:
        assert resp.status in (200, 204)


async def test_resume_of_an_unknown_request_stream_fails_fast(
    client: aiohttp.ClientSession, http_server: Any
) -> None:
    """A Last-Event-ID naming a request stream this server does not have (it ended, or was
    served by a replica that is gone) is refused at once, not answered with the standalone
    stream - on which the response would never come. The session itself is fine."""
    url = http_server.url
    sid = await _initialize(client, url)
    resume = {
        "accept": "text/event-stream",
        "mcp-session-id": sid,
        "mcp-protocol-version": "2025-11-25",
    }
    for unknown in ("r-gone.3", "no-dot-at-all"):
        with anyio.fail_after(5):
            async with client.get(url, headers={**resume, "last-event-id": unknown}) as resp:
                assert resp.status == 410
                error = (await resp.json())["error"]
        assert error["code"] == -32600 and "send the request again" in error["message"]
    with anyio.fail_after(5):  # the standalone stream is still free to attach
        async with client.get(url, headers=resume) as resp:
            assert resp.status == 200 and resp.content_type == "text/event-stream"
    async with client.delete(url, headers=legacy_headers(sid)) as resp:
        assert resp.status in (200, 204)


async def test_get_not_allowed_for_modern(client: aiohttp.ClientSession, http_server: Any) -> None:
    async with client.get(http_server.url, headers={"accept": "text/event-stream"}) as resp:
        assert resp.status in (400, 404, 405)


async def test_wrong_content_type_and_accept(
    client: aiohttp.ClientSession, http_server: Any
) -> None:
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    )
    headers = {**modern_headers("tools/list"), "content-type": "text/plain"}
    async with client.post(http_server.url, data=body, headers=headers) as resp:
        assert resp.status == 415
    headers = {**modern_headers("tools/list"), "accept": "text/html"}
    async with client.post(http_server.url, data=body, headers=headers) as resp:
        assert resp.status == 406


async def _standalone_messages(
    client: aiohttp.ClientSession, url: str, sid: str, count: int
) -> list[dict[str, Any]]:
    """Open the session's GET stream and return its first `count` messages."""
    headers = {"accept": "text/event-stream", "mcp-session-id": sid,
               "mcp-protocol-version": "2025-11-25"}
    messages: list[dict[str, Any]] = []
    with anyio.fail_after(8):
        async with client.get(url, headers=headers) as resp:
            assert resp.status == 200
            parser = EventParser()
            async for chunk in resp.content.iter_any():
                messages += [json.loads(e.data) for e in parser.feed(chunk) if e.data]
                if len(messages) >= count:
                    return messages
    raise AssertionError(f"the GET stream ended after {len(messages)} messages")


async def test_standalone_messages_wait_for_the_next_get(
    client: aiohttp.ClientSession, http_server: Any
) -> None:
    """List changes announced while no GET stream is open are delivered by the next GET."""
    url = http_server.url
    sid = await _initialize(client, url)
    headers = legacy_headers(sid)
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    async with client.post(url, json=note, headers=headers) as resp:
        assert resp.status == 202
    for call_id in (2, 3):  # adds, then removes, the dynamic tool: two announcements
        call = {"jsonrpc": "2.0", "id": call_id, "method": "tools/call",
                "params": {"name": "test_trigger_tool_change", "arguments": {}}}
        async with client.post(url, json=call, headers=headers) as resp:
            assert (await read_messages(resp))[-1]["id"] == call_id
    messages = await _standalone_messages(client, url, sid, 2)
    assert [m["method"] for m in messages] == ["notifications/tools/list_changed"] * 2
    async with client.delete(url, headers=headers) as resp:
        assert resp.status in (200, 204)
