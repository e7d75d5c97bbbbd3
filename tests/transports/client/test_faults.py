"""The client transports against small misbehaving servers (aiohttp.web on 127.0.0.1)."""

from __future__ import annotations

import json
import time
from typing import Any

import anyio
import pytest
from aiohttp import web

from mcpkit.transports.client._aiohttp import MessageTooLarge
from mcpkit.transports.client.base import (
    ConnectionClosed,
    HttpStatusError,
    SessionExpired,
    TransportError,
)
from mcpkit.transports.client.http import StreamableHttpTransport, answers
from mcpkit.transports.client.sse import LegacySseTransport
from mcpkit.transports.client.websocket import WebSocketTransport

from .support import (
    notification,
    open_error,
    opened,
    request,
    result,
    sse_event,
    sse_response,
    web_server,
)

pytestmark = pytest.mark.anyio

PROGRESS = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": 1, "progress": 1}})


async def _request_id(req: web.Request) -> Any:
    return (await req.json())["id"]


# --- Streamable HTTP: resumption -------------------------------------------------------------


async def test_stream_resumed_after_retry_with_last_event_id() -> None:
    seen: dict[str, Any] = {}

    async def post(req: web.Request) -> web.StreamResponse:
        seen["id"] = await _request_id(req)
        resp = await sse_response(req, sse_event(id="s.0", retry_ms=200),
                                  sse_event(PROGRESS, id="s.1"))
        seen["post_ended"] = time.monotonic()
        return resp  # ends the stream without the response

    async def get(req: web.Request) -> web.StreamResponse:
        seen["get_at"] = time.monotonic()
        seen["last_event_id"] = req.headers.get("Last-Event-ID")
        seen["get_accept"] = req.headers.get("Accept")
        seen["get_auth"] = req.headers.get("Authorization")
        return await sse_response(req, sse_event(result(seen["id"]), id="s.2"))

    async with web_server([web.post("/mcp", post), web.get("/mcp", get)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp", default_retry_s=0.01,
                                            bearer_token="t")
        async with opened(transport) as inbound:
            await transport.send(request(7, "tools/call"))
            assert (await inbound.response(7))["result"] == {}
            assert inbound.notifications("notifications/progress")
            assert not inbound.failures
    assert seen["last_event_id"] == "s.1"
    assert seen["get_accept"] == "text/event-stream" and seen["get_auth"] == "Bearer t"
    assert seen["get_at"] - seen["post_ended"] >= 0.2  # the server's retry, not the default


async def test_stream_without_event_id_fails_the_request() -> None:
    async def post(req: web.Request) -> web.StreamResponse:
        return await sse_response(req, sse_event(PROGRESS))

    async with web_server([web.post("/mcp", post)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp", default_retry_s=0.01)
        async with opened(transport) as inbound:
            await transport.send(request(1, "tools/call"))
            error = await inbound.failure(1)
            assert type(error) is TransportError
            assert "no event id" in str(error)
            assert inbound.notifications("notifications/progress")  # delivered all the same


async def test_reconnects_run_out() -> None:
    gets: list[str | None] = []

    async def post(req: web.Request) -> web.StreamResponse:
        return await sse_response(req, sse_event(id="a", retry_ms=10))

    async def get(req: web.Request) -> web.StreamResponse:
        gets.append(req.headers.get("Last-Event-ID"))
        return await sse_response(req)  # nothing new, ends at once

    async with web_server([web.post("/mcp", post), web.get("/mcp", get)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp", max_reconnects=3)
        async with opened(transport) as inbound:
            await transport.send(request(1, "tools/call"))
            error = await inbound.failure(1)
            assert "gave up after 3 reconnect" in str(error)
    assert gets == ["a", "a", "a"]


async def test_resume_refused_fails_the_request() -> None:
    async def post(req: web.Request) -> web.StreamResponse:
        return await sse_response(req, sse_event(id="a", retry_ms=10))

    async def get(req: web.Request) -> web.Response:
        return web.Response(status=400, text="no resumption here")

    async with web_server([web.post("/mcp", post), web.get("/mcp", get)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp")
        async with opened(transport) as inbound:
            await transport.send(request(1, "tools/call"))
            error = await inbound.failure(1)
            assert type(error) is TransportError
            assert "could not resume" in str(error) and "HTTP 400" in str(error)


# --- Streamable HTTP: statuses and limits ----------------------------------------------------


async def test_404_on_a_session_is_session_expired() -> None:
    async def post(req: web.Request) -> web.Response:
        if req.headers.get("Mcp-Session-Id") == "old":
            return web.json_response({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Session not found"}}, status=404)
        return web.json_response({"jsonrpc": "2.0", "id": 1, "result": {}},
                                 headers={"Mcp-Session-Id": "old"})

    async with web_server([web.post("/mcp", post)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp")
        async with opened(transport) as inbound:
            await transport.send(request(1, "initialize"))
            await inbound.response(1)
            assert transport.session_id == "old"
            await transport.send(request(2, "tools/list"))
            error = await inbound.failure(2)
            assert isinstance(error, SessionExpired) and error.status == 404
            with pytest.raises(SessionExpired):
                await transport.send(notification("notifications/initialized"))


async def test_400_with_a_non_json_body_is_an_http_status_error() -> None:
    async def post(req: web.Request) -> web.Response:
        return web.Response(status=400, text="bad things", headers={"X-Why": "test"})

    async with web_server([web.post("/mcp", post)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp")
        async with opened(transport) as inbound:
            await transport.send(request(1, "tools/list"))
            error = await inbound.failure(1)
            assert isinstance(error, HttpStatusError) and not isinstance(error, SessionExpired)
            assert error.status == 400 and error.body == b"bad things"
            assert error.headers["X-Why"] == "test"
            assert base in str(error)
            with pytest.raises(HttpStatusError):
                await transport.send(notification("notifications/initialized"))


async def test_202_to_a_request_and_unknown_content_type() -> None:
    async def post(req: web.Request) -> web.Response:
        if await _request_id(req) == 1:
            return web.Response(status=202)
        return web.Response(text="hello")

    async with web_server([web.post("/mcp", post)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp")
        async with opened(transport) as inbound:
            await transport.send(request(1, "tools/list"))
            assert "202" in str(await inbound.failure(1))
            await transport.send(request(2, "tools/list"))
            assert "text/plain" in str(await inbound.failure(2))


async def test_oversized_messages() -> None:
    async def post(req: web.Request) -> web.StreamResponse:
        request_id = await _request_id(req)
        big = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {"x": "y" * 5000}})
        if request_id == 1:
            return await sse_response(req, sse_event(big, id="1"))
        return web.Response(text=big, content_type="application/json")

    async with web_server([web.post("/mcp", post)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp", max_message_bytes=1000)
        async with opened(transport) as inbound:
            for request_id in (1, 2):
                await transport.send(request(request_id, "tools/list"))
                error = await inbound.failure(request_id)
                assert isinstance(error, MessageTooLarge), error
                assert "1000-byte limit" in str(error)
            assert not inbound.messages


async def test_connection_refused_fails_the_request() -> None:
    async with web_server([]) as base:
        pass  # the port is free again
    transport = StreamableHttpTransport(f"{base}/mcp", connect_timeout=2.0)
    async with opened(transport) as inbound:
        await transport.send(request(1, "tools/list"))
        error = await inbound.failure(1)
        assert type(error) is TransportError and base in str(error)
        with pytest.raises(TransportError):
            await transport.send(notification("notifications/initialized"))


async def test_headers_sent() -> None:
    seen: list[dict[str, str]] = []

    async def post(req: web.Request) -> web.Response:
        seen.append(dict(req.headers))
        body = await req.json()
        if "id" not in body:
            return web.Response(status=202)
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": {}},
                                 headers={"Mcp-Session-Id": "sid-1"})

    async with web_server([web.post("/mcp", post)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp", headers={"X-Extra": "1"},
                                            bearer_token="tok")
        async with opened(transport) as inbound:
            await transport.send(request(1, "initialize"))
            await inbound.response(1)
            transport.protocol_version = "2025-03-26"  # no MCP-Protocol-Version header
            await transport.send(notification("notifications/initialized"))
            transport.protocol_version = "2025-06-18"
            await transport.send(request(2, "tools/list", Mcp_Name="x"))
            await inbound.response(2)
    first, second, third = seen
    assert first["Content-Type"] == "application/json"
    assert first["Accept"] == "application/json, text/event-stream"
    assert first["Authorization"] == "Bearer tok" and first["X-Extra"] == "1"
    assert "Mcp-Session-Id" not in first and "MCP-Protocol-Version" not in first
    assert second["Mcp-Session-Id"] == "sid-1" and "MCP-Protocol-Version" not in second
    assert third["MCP-Protocol-Version"] == "2025-06-18" and third["Mcp-Name"] == "x"


async def test_close_deletes_the_session_and_tolerates_405() -> None:
    deletes: list[str | None] = []

    async def post(req: web.Request) -> web.Response:
        return web.json_response({"jsonrpc": "2.0", "id": 1, "result": {}},
                                 headers={"Mcp-Session-Id": "sid-2"})

    async def delete(req: web.Request) -> web.Response:
        deletes.append(req.headers.get("Mcp-Session-Id"))
        return web.Response(status=405)

    async with web_server([web.post("/mcp", post), web.delete("/mcp", delete)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp")
        async with opened(transport) as inbound:
            await transport.send(request(1, "initialize"))
            await inbound.response(1)
        await transport.close()  # idempotent
    assert deletes == ["sid-2"]


async def test_abandon_closes_the_connection() -> None:
    arrived = anyio.Event()
    gone = anyio.Event()

    async def post(req: web.Request) -> web.StreamResponse:
        resp = await sse_response(req, sse_event(id="1"))
        arrived.set()
        with anyio.move_on_after(5):
            while req.transport is not None and not req.transport.is_closing():  # noqa: ASYNC110 (aiohttp exposes no disconnect event)
                await anyio.sleep(0.01)
            gone.set()
        return resp

    async with web_server([web.post("/mcp", post)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp")
        async with opened(transport) as inbound:
            await transport.send(request(1, "tools/call"))
            with anyio.fail_after(5):
                await arrived.wait()
            await transport.abandon(1)
            await transport.abandon(99)  # unknown: nothing happens
            with anyio.fail_after(2):
                await gone.wait()
            await anyio.sleep(0.05)
            assert not inbound.failures  # an abandoned request reports nothing


async def test_standalone_stream_refused_and_resumed() -> None:
    gets: list[str | None] = []

    async def get(req: web.Request) -> web.StreamResponse:
        gets.append(req.headers.get("Last-Event-ID"))
        if req.headers.get("Mcp-Session-Id") is None:
            return web.Response(status=405)
        if len(gets) == 2:  # first GET with a session id: one message, then it ends
            return await sse_response(req, sse_event(PROGRESS, id="g1", retry_ms=10))
        return await sse_response(req, sse_event(PROGRESS, id="g2"))

    async with web_server([web.get("/mcp", get)]) as base:
        transport = StreamableHttpTransport(f"{base}/mcp", max_reconnects=1)
        async with opened(transport) as inbound:
            assert not await transport.open_standalone_stream()
            transport.session_id = "s"
            assert await transport.open_standalone_stream()
            await inbound.until(lambda: len(inbound.notifications("notifications/progress")) == 2)
    assert gets[:3] == [None, None, "g1"]


def test_answers() -> None:
    assert answers(b'{"jsonrpc":"2.0","id":1,"result":{}}', 1)
    assert not answers(b'{"jsonrpc":"2.0","id":"1","result":{}}', 1)
    assert not answers(b'{"jsonrpc":"2.0","id":true,"result":{}}', 1)
    assert not answers(b'{"jsonrpc":"2.0","id":1,"method":"x"}', 1)
    assert not answers(b'{"jsonrpc":"2.0","id":1,"result":{}}', 1, errors_only=True)
    assert answers(b'[{"jsonrpc":"2.0","id":2,"error":{"code":1,"message":""}}]', 2)
    assert not answers(b"not json", 1)


# --- HTTP+SSE ---------------------------------------------------------------------------------


async def test_legacy_sse_endpoint_rules_and_stream_end() -> None:
    async def stream(req: web.Request) -> web.StreamResponse:
        kind = req.match_info["kind"]
        if kind == "refused":
            return web.Response(status=401, text="who are you")
        if kind == "foreign":
            return await sse_response(req, sse_event("http://evil.example/messages",
                                                     event="endpoint"))
        resp = await sse_response(req, sse_event("/post?x=1", event="endpoint"))
        await anyio.sleep(0.2)
        await resp.write(sse_event(PROGRESS, event="message"))
        return resp  # then the stream ends

    async def post(req: web.Request) -> web.Response:
        return web.Response(status=202 if req.query.get("x") == "1" else 500)

    routes = [web.get("/sse/{kind}", stream), web.post("/post", post)]
    async with web_server(routes) as base:
        refused = await open_error(LegacySseTransport(f"{base}/sse/refused"))
        assert isinstance(refused, HttpStatusError) and refused.status == 401
        assert refused.body == b"who are you"
        foreign = await open_error(LegacySseTransport(f"{base}/sse/foreign"))
        assert type(foreign) is TransportError and "another origin" in str(foreign)
        transport = LegacySseTransport(f"{base}/sse/ok")
        async with opened(transport) as inbound:
            assert transport.endpoint == f"{base}/post?x=1"
            await transport.send(notification("notifications/initialized"))
            await inbound.until(lambda: inbound.closed_with)
            assert inbound.notifications("notifications/progress")
            (error,) = inbound.closed_with
            assert isinstance(error, ConnectionClosed) and "ended" in str(error)


async def test_legacy_sse_endpoint_timeout() -> None:
    async def stream(req: web.Request) -> web.StreamResponse:
        resp = await sse_response(req, b": nothing yet\n\n")
        await anyio.sleep(2)
        return resp

    async with web_server([web.get("/sse", stream)]) as base:
        error = await open_error(LegacySseTransport(f"{base}/sse", endpoint_timeout=0.2))
        assert "no `endpoint` event within 0.2 s" in str(error)


# --- WebSocket --------------------------------------------------------------------------------


async def test_websocket_server_closing_is_reported() -> None:
    protocols: list[str | None] = []

    async def handler(req: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(protocols=("mcp",))
        await ws.prepare(req)
        protocols.append(ws.ws_protocol)
        msg = await ws.receive()
        request_id = json.loads(msg.data)["id"]
        await ws.send_bytes(result(request_id).encode())  # binary frames are accepted too
        await ws.close(code=4000, message=b"bye")
        return ws

    async with web_server([web.get("/ws", handler)]) as base:
        transport = WebSocketTransport(f"{base.replace('http', 'ws')}/ws")
        async with opened(transport) as inbound:
            await transport.send(request(1, "ping"))
            assert (await inbound.response(1))["result"] == {}
            await inbound.until(lambda: inbound.closed_with)
            (error,) = inbound.closed_with
            assert isinstance(error, ConnectionClosed) and "4000" in str(error)
            with pytest.raises(ConnectionClosed):
                await transport.send(notification("notifications/initialized"))
    assert protocols == ["mcp"]


async def test_websocket_handshake_refused() -> None:
    async def handler(req: web.Request) -> web.Response:
        return web.Response(status=403, text="no")

    async with web_server([web.get("/ws", handler)]) as base:
        refused = await open_error(WebSocketTransport(f"{base.replace('http', 'ws')}/ws"))
        assert isinstance(refused, HttpStatusError) and refused.status == 403
