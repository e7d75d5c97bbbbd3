"""`Client` against Streamable HTTP servers that misbehave (small Starlette apps served by
uvicorn in a thread on 127.0.0.1), and against mcpkit's own app, including a server that
only speaks the HTTP+SSE transport of 2024-11-05."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from mcpkit.client import (
    Behaviour,
    Client,
    ConnectOptions,
    HttpStatusError,
    Notifications,
    RequestTimeout,
    Responders,
    SessionExpired,
    Timeouts,
    TransportError,
)
from mcpkit.protocol.versions import Era
from mcpkit.server.context import Context
from mcpkit.server.server import Server

from .support import LEGACY, MODERN, eventually, free_port, serve_in_thread

pytestmark = pytest.mark.anyio

TOOLS = [{"name": "work", "inputSchema": {"type": "object"}}]


def rpc_result(message: dict[str, Any], value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": value}


def sse(data: dict[str, Any] | None = None, *, id: str | None = None,
        retry_ms: int | None = None) -> bytes:
    out = ""
    if id is not None:
        out += f"id: {id}\n"
    if retry_ms is not None:
        out += f"retry: {retry_ms}\n"
    out += f"data: {json.dumps(data) if data is not None else ''}\n\n"
    return out.encode()


class FaultServer:
    """A scripted Streamable HTTP server at /mcp. Legacy by default: the modern probe gets
    400 with a plain (non-modern) JSON-RPC error; `initialize` opens a session. Subclasses
    override `on_request`. Everything it sees is kept (thread-safe enough for tests)."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []  # {"http": "POST"|"GET"|"DELETE", ...}
        self.sessions: set[str] = set()
        self.session_count = 0
        self.events: list[tuple[str, float]] = []
        self.lock = threading.Lock()
        self.app = Starlette(routes=[
            Route("/mcp", self.endpoint, methods=["GET", "POST", "DELETE"]),
        ])

    def note(self, what: str) -> None:
        with self.lock:
            self.events.append((what, time.monotonic()))

    def at(self, what: str) -> float:
        return next(t for w, t in self.events if w == what)

    def posted(self, method: str) -> list[dict[str, Any]]:
        return [s for s in self.seen if s["http"] == "POST" and s["body"].get("method") == method]

    async def endpoint(self, request: Request) -> Response:
        headers = {k.lower(): v for k, v in request.headers.items()}
        if request.method == "GET":
            self.seen.append({"http": "GET", "headers": headers})
            return await self.on_get(request, headers)
        if request.method == "DELETE":
            self.seen.append({"http": "DELETE", "headers": headers})
            return Response(status_code=200)
        body = json.loads(await request.body())
        self.seen.append({"http": "POST", "headers": headers, "body": body})
        method = body.get("method")
        if "id" not in body:  # a notification or a response
            return Response(status_code=202)
        if method == "server/discover":
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Bad Request: no session"}}, status_code=400)
        if method == "initialize":
            with self.lock:
                self.session_count += 1
                session = f"session-{self.session_count}"
                self.sessions.add(session)
            return JSONResponse(rpc_result(body, {
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fault", "version": "0"}}),
                headers={"Mcp-Session-Id": session})
        if headers.get("mcp-session-id") not in self.sessions:
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Session not found"}}, status_code=404)
        return await self.on_request(request, body, headers)

    async def on_get(self, request: Request, headers: dict[str, str]) -> Response:
        return Response(status_code=405)  # no standalone stream

    async def on_request(self, request: Request, body: dict[str, Any],
                         headers: dict[str, str]) -> Response:
        if body["method"] == "tools/list":
            return JSONResponse(rpc_result(body, {"tools": TOOLS}))
        if body["method"] in ("ping", "resources/subscribe", "resources/unsubscribe"):
            return JSONResponse(rpc_result(body, {}))
        if body["method"] == "tools/call":
            return JSONResponse(rpc_result(body, {"content": [{"type": "text",
                                                               "text": "called"}]}))
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "error": {
            "code": -32601, "message": "Method not found"}})


# --- an SSE stream closed mid-response is resumed ------------------------------------------


class DroppingServer(FaultServer):
    """Answers tools/call on an SSE stream that ends after a progress event (id e1, retry
    400 ms); the response comes on the resumed stream (GET + Last-Event-ID: e1)."""

    RETRY_MS = 400

    async def on_request(self, request: Request, body: dict[str, Any],
                         headers: dict[str, str]) -> Response:
        if body["method"] != "tools/call":
            return await super().on_request(request, body, headers)
        token = body["params"].get("_meta", {}).get("progressToken")
        self.pending = body

        async def stream() -> AsyncIterator[bytes]:
            yield sse(id="e0", retry_ms=self.RETRY_MS)  # priming event
            yield sse({"jsonrpc": "2.0", "method": "notifications/progress",
                       "params": {"progressToken": token, "progress": 1}}, id="e1")
            self.note("dropped")  # the stream ends here, before the response

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def on_get(self, request: Request, headers: dict[str, str]) -> Response:
        if "last-event-id" not in headers:
            return Response(status_code=405)
        self.note("resumed")

        async def stream() -> AsyncIterator[bytes]:
            yield sse(rpc_result(self.pending, {"content": [{"type": "text",
                                                             "text": "resumed"}]}), id="e2")

        return StreamingResponse(stream(), media_type="text/event-stream")


async def test_stream_closed_mid_response_is_resumed_after_retry() -> None:
    fault = DroppingServer()
    progress: list[float] = []
    with serve_in_thread(fault.app) as base:
        async with Client(f"{base}/mcp", timeouts=Timeouts(timeout=5)) as client:
            assert client.era is Era.LEGACY
            result = await client.call_tool("work", on_progress=lambda p, t, m: progress.append(p))
            assert result.content[0].text == "resumed"  # type: ignore[union-attr]
    gets = [s for s in fault.seen if s["http"] == "GET" and "last-event-id" in s["headers"]]
    assert len(gets) == 1
    assert gets[0]["headers"]["last-event-id"] == "e1"
    assert gets[0]["headers"]["mcp-session-id"] == "session-1"
    assert gets[0]["headers"]["mcp-protocol-version"] == LEGACY
    delay = fault.at("resumed") - fault.at("dropped")
    assert 0.35 <= delay < 0.9  # the server's retry (400 ms), not the 1 s default
    assert progress == [1.0]


# --- a server that forgets the session -----------------------------------------------------


async def test_forgotten_session_is_reinitialized_and_the_request_retried() -> None:
    fault = FaultServer()
    with serve_in_thread(fault.app) as base:
        async with Client(f"{base}/mcp", timeouts=Timeouts(timeout=5)) as client:
            assert [t.name for t in await client.list_tools()] == ["work"]
            await client.subscribe("mem://watched")
            fault.sessions.clear()  # the server restarted
            result = await client.call_tool("work")
            assert result.content[0].text == "called"  # type: ignore[union-attr]
            await client.ping()
    assert len(fault.posted("initialize")) == 2
    assert len(fault.posted("notifications/initialized")) == 2
    calls = fault.posted("tools/call")
    assert [c["headers"].get("mcp-session-id") for c in calls] == ["session-1", "session-2"]
    assert calls[0]["body"]["params"] == calls[1]["body"]["params"]
    deletes = [s for s in fault.seen if s["http"] == "DELETE"]
    assert [d["headers"]["mcp-session-id"] for d in deletes] == ["session-2"]
    # the new session is subscribed again to what the old one was
    subscribes = fault.posted("resources/subscribe")
    assert [s["headers"]["mcp-session-id"] for s in subscribes] == ["session-1", "session-2"]
    assert all(s["body"]["params"] == {"uri": "mem://watched"} for s in subscribes)


class LoggingFaultServer(FaultServer):
    """A FaultServer that offers `logging` and takes `logging/setLevel`."""

    async def endpoint(self, request: Request) -> Response:
        response = await super().endpoint(request)
        if isinstance(response, JSONResponse) and b'"protocolVersion"' in response.body:
            answer = json.loads(response.body)
            answer["result"]["capabilities"]["logging"] = {}
            response = JSONResponse(answer, headers={
                "Mcp-Session-Id": response.headers["mcp-session-id"]})
        return response

    async def on_request(self, request: Request, body: dict[str, Any],
                         headers: dict[str, str]) -> Response:
        if body["method"] == "logging/setLevel":
            return JSONResponse(rpc_result(body, {}))
        return await super().on_request(request, body, headers)


async def test_a_new_session_gets_the_log_level_again() -> None:
    """Renewing a forgotten session re-sends the client's log level inside the renewal
    (it used to wait for the renewal it was part of: anyio refused the re-entered lock)."""
    fault = LoggingFaultServer()
    with serve_in_thread(fault.app) as base:
        async with Client(f"{base}/mcp", timeouts=Timeouts(timeout=5),
                          behaviour=Behaviour(log_level="debug")) as client:
            fault.sessions.clear()  # the server restarted
            with anyio.fail_after(10):
                await client.ping()
    levels = fault.posted("logging/setLevel")
    assert [s["headers"]["mcp-session-id"] for s in levels] == ["session-1", "session-2"]
    assert all(s["body"]["params"] == {"level": "debug"} for s in levels)


async def test_concurrent_requests_share_one_reinitialization() -> None:
    fault = FaultServer()
    with serve_in_thread(fault.app) as base:
        async with Client(f"{base}/mcp", timeouts=Timeouts(timeout=5)) as client:
            await client.list_tools()
            fault.sessions.clear()
            outcomes: list[Any] = [None] * 3

            async def call(i: int) -> None:
                try:
                    outcomes[i] = (await client.call_tool("work", {"i": i})).content[0].text
                except Exception as exc:
                    outcomes[i] = exc

            async with anyio.create_task_group() as tg:
                for i in range(3):
                    tg.start_soon(call, i)
    assert outcomes == ["called"] * 3
    assert len(fault.posted("initialize")) == 2
    retried = fault.posted("tools/call")[3:]
    assert {r["headers"].get("mcp-session-id") for r in retried} == {"session-2"}


class AmnesiacServer(FaultServer):
    """Forgets every session as soon as a tools/call arrives."""

    async def on_request(self, request: Request, body: dict[str, Any],
                         headers: dict[str, str]) -> Response:
        if body["method"] == "tools/call":
            self.sessions.clear()
            return JSONResponse({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": "Session not found"}}, status_code=404)
        return await super().on_request(request, body, headers)


async def test_a_second_404_is_reported() -> None:
    fault = AmnesiacServer()
    with serve_in_thread(fault.app) as base:
        async with Client(f"{base}/mcp", timeouts=Timeouts(timeout=5)) as client:
            with pytest.raises(SessionExpired) as info:
                await client.call_tool("work")
            assert info.value.status == 404
    assert len(fault.posted("initialize")) == 2  # re-initialized once, not in a loop
    assert len(fault.posted("tools/call")) == 2


# --- a slow answer past the timeout (modern) -----------------------------------------------


class SlowModernServer(FaultServer):
    """Modern: answers server/discover; tools/call takes 5 s to answer with JSON and notes
    when the client closes the connection."""

    async def endpoint(self, request: Request) -> Response:
        if request.method != "POST":
            return Response(status_code=405)
        body = json.loads(await request.body())
        headers = {k.lower(): v for k, v in request.headers.items()}
        self.seen.append({"http": "POST", "headers": headers, "body": body})
        if "id" not in body:
            return Response(status_code=202)
        method = body["method"]
        if method == "server/discover":
            return JSONResponse(rpc_result(body, {
                "resultType": "complete", "supportedVersions": [MODERN],
                "capabilities": {"tools": {}}, "serverInfo": {"name": "slow", "version": "0"}}))
        if method == "tools/list":
            return JSONResponse(rpc_result(body, {"tools": TOOLS}))
        self.note("call started")
        for _ in range(100):
            await asyncio.sleep(0.05)
            if await request.is_disconnected():
                self.note("client went away")
                return Response(status_code=499)
        return JSONResponse(rpc_result(body, {"content": []}))


async def test_slow_answer_times_out_and_the_server_sees_the_connection_close() -> None:
    fault = SlowModernServer()
    with serve_in_thread(fault.app) as base:
        async with Client(f"{base}/mcp", timeouts=Timeouts(timeout=0.5)) as client:
            assert client.era is Era.MODERN
            started = time.monotonic()
            with pytest.raises(RequestTimeout):
                await client.call_tool("work")
            assert 0.5 <= time.monotonic() - started < 1.2
            await eventually(lambda: any(w == "client went away" for w, _ in fault.events))
            assert fault.at("client went away") - fault.at("call started") < 1.5
    # modern Streamable HTTP: closing the stream is the cancellation; nothing else is sent
    assert fault.posted("notifications/cancelled") == []
    call = fault.posted("tools/call")[0]["headers"]
    assert call["mcp-method"] == "tools/call" and call["mcp-name"] == "work"
    assert call["mcp-protocol-version"] == MODERN


# --- mcpkit's own app ----------------------------------------------------------------------


def make_server() -> Server:
    server = Server("http-demo", "1.0.0")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @server.tool()
    async def ask(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", {"type": "object",
                                            "properties": {"name": {"type": "string"}}},
                                  key="n")
        return f"hi {answer['content']['name']}"

    @server.tool()
    async def touch(ctx: Context) -> str:
        await ctx.info("touching")
        await ctx.server.notify_list_changed("tools")
        await ctx.server.notify_resource_updated("mem://doc")
        return "touched"

    server.add_resource("text", "mem://doc")
    return server


async def answer(params: Any) -> dict[str, Any]:
    return {"action": "accept", "content": {"name": "Ann"}}


@pytest.mark.parametrize("validate_output", [True, False])
async def test_header_annotated_arguments_are_mirrored_in_headers(validate_output: bool
                                                                  ) -> None:
    """Modern Streamable HTTP: the app rejects a call whose `Mcp-Param-*` headers do not
    mirror the annotated arguments, so the client must learn the annotations (it fetches
    the catalog itself before the first call)."""
    server = make_server()

    def where(region: str) -> str:
        return f"in {region}"

    server.add_tool(where, input_schema={
        "type": "object", "required": ["region"],
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}})
    assert server.tools["where"].header_params == {"Region": ("region",)}
    with serve_in_thread(server.asgi_app()) as base:
        async with Client(
            f"{base}/mcp",
            behaviour=Behaviour(validate_output=validate_output),
        ) as client:
            assert client.era is Era.MODERN
            result = await client.call_tool("where", {"region": "eu-west"})
            assert result.content[0].text == "in eu-west"  # type: ignore[union-attr]


@pytest.mark.parametrize("era", ["auto", "legacy"])
async def test_mcpkit_streamable_http(era: str) -> None:
    with serve_in_thread(make_server().asgi_app()) as base:
        async with Client(
            f"{base}/mcp",
            era=era,
            responders=Responders(elicitation=answer),
        ) as client:
            assert client.era is (Era.MODERN if era == "auto" else Era.LEGACY)
            assert client.session.transport.kind == "http"
            added = await client.call_tool("add", {"a": 2, "b": 40})
            assert added.structured_content == {"result": 42}
            asked = await client.call_tool("ask")
            assert asked.content[0].text == "hi Ann"  # type: ignore[union-attr]


async def test_falls_back_to_http_sse_for_an_old_server() -> None:
    """POST to the URL is refused (405) and GET gives an `endpoint` event: the 2024-11-05
    HTTP+SSE transport (mcpkit's app serves it at /sse and /messages)."""
    with serve_in_thread(make_server().asgi_app()) as base:
        async with Client(
            f"{base}/sse",
            timeouts=Timeouts(timeout=5),
            responders=Responders(elicitation=answer),
        ) as client:
            assert client.era is Era.LEGACY
            assert client.session.transport.kind == "sse"
            assert client.session.transport.endpoint.startswith(  # type: ignore[attr-defined]
                f"{base}/messages")
            assert [t.name for t in await client.list_tools()] == ["add", "ask", "touch"]
            added = await client.call_tool("add", {"a": 1, "b": 2})
            assert added.structured_content == {"result": 3}
            asked = await client.call_tool("ask")  # a server→client request on the stream
            assert asked.content[0].text == "hi Ann"  # type: ignore[union-attr]
        with anyio.fail_after(3):
            async with Client(f"{base}/sse") as again:  # the era is cached; still works
                await again.ping()


async def test_unsupported_version_over_http_is_retried(monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    """The app answers a version it does not know with 400 and -32022: the client (here
    preferring a newer version) retries with one from `supported`, staying modern."""
    from mcpkit.client import era as eras
    from mcpkit.client import negotiation as client_module

    monkeypatch.setattr(client_module, "MODERN_VERSIONS", ("2027-01-01", MODERN))
    monkeypatch.setattr(eras, "MODERN_VERSIONS", ("2027-01-01", MODERN))
    with serve_in_thread(make_server().asgi_app()) as base:
        async with Client(f"{base}/mcp") as client:
            assert client.era is Era.MODERN
            assert client.protocol_version == MODERN
            assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {
                "result": 2}


# --- failures that must end a call at once, not at its timeout -----------------------------


class BrokenServer(FaultServer):
    async def on_request(self, request: Request, body: dict[str, Any],
                         headers: dict[str, str]) -> Response:
        name = body.get("params", {}).get("name")
        if name == "crash":
            return Response(b"Internal Server Error", status_code=500,
                            media_type="text/plain")
        if name == "cut":

            async def stream() -> AsyncIterator[bytes]:
                yield sse({"jsonrpc": "2.0", "method": "notifications/message",
                           "params": {"level": "info", "data": "working"}})
                # ends without the response and without an event id to resume from

            return StreamingResponse(stream(), media_type="text/event-stream")
        return await super().on_request(request, body, headers)


async def test_http_failures_end_the_call_at_once() -> None:
    fault = BrokenServer()
    logs: list[str] = []
    with serve_in_thread(fault.app) as base:
        async with Client(
            f"{base}/mcp",
            timeouts=Timeouts(timeout=30),
            notifications=Notifications(on_log=lambda m: logs.append(str(m.data))),
        ) as client:
            started = time.monotonic()
            with pytest.raises(HttpStatusError) as info:
                await client.call_tool("crash")
            assert info.value.status == 500
            with pytest.raises(TransportError, match="no event id"):
                await client.call_tool("cut")
            assert time.monotonic() - started < 2.0
            assert logs == ["working"]
            await client.ping()  # the session survives both


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_notifications_over_streamable_http(era: str) -> None:
    """Legacy: on the session's standalone GET stream (and the request's own stream).
    Modern: on the subscriptions/listen stream."""
    changed: list[str] = []
    updated: list[str] = []
    logs: list[str] = []
    with serve_in_thread(make_server().asgi_app()) as base:
        async with Client(
            f"{base}/mcp",
            era=era,
            behaviour=Behaviour(log_level="info"),
            notifications=Notifications(
                on_list_changed=changed.append,
                on_resource_updated=updated.append,
                on_log=lambda m: logs.append(str(m.data)),
            ),
        ) as client:
            await client.listen()
            await client.subscribe("mem://doc")
            result = await client.call_tool("touch")
            assert result.content[0].text == "touched"  # type: ignore[union-attr]
            await eventually(lambda: changed and updated)
    assert changed == ["tools"]
    assert updated == ["mem://doc"]
    assert logs == ["touching"]


class SlowLegacyServer(FaultServer):
    async def on_request(self, request: Request, body: dict[str, Any],
                         headers: dict[str, str]) -> Response:
        if body["method"] != "tools/call":
            return await super().on_request(request, body, headers)
        for _ in range(100):
            await asyncio.sleep(0.05)
            if await request.is_disconnected():
                self.note("client went away")
                return Response(status_code=499)
        return JSONResponse(rpc_result(body, {"content": []}))


async def test_legacy_timeout_is_a_cancellation_notification() -> None:
    """In a legacy session a disconnect is not a cancellation: the client POSTs
    notifications/cancelled (and stops reading the request's stream)."""
    fault = SlowLegacyServer()
    with serve_in_thread(fault.app) as base:
        async with Client(f"{base}/mcp", timeouts=Timeouts(timeout=0.4)) as client:
            assert client.era is Era.LEGACY
            with pytest.raises(RequestTimeout):
                await client.call_tool("work")
            cancelled = await eventually(lambda: fault.posted("notifications/cancelled"))
            call = fault.posted("tools/call")[0]
            assert cancelled[0]["body"]["params"]["requestId"] == call["body"]["id"]
            assert cancelled[0]["headers"]["mcp-session-id"] == "session-1"
            await client.ping()


async def test_nothing_listening_fails_fast() -> None:
    started = time.monotonic()
    with pytest.raises(TransportError, match=r"127\.0\.0\.1"):
        async with Client(
            f"http://127.0.0.1:{free_port()}/mcp",
            connect=ConnectOptions(connect_timeout=5),
        ):
            pass
    assert time.monotonic() - started < 1.0


async def test_wrong_path_is_reported() -> None:
    with serve_in_thread(make_server().asgi_app()) as base:
        started = time.monotonic()
        with pytest.raises(HttpStatusError) as info:
            async with Client(f"{base}/nope", connect=ConnectOptions(connect_timeout=5)):
                pass
        assert time.monotonic() - started < 1.0
    assert info.value.status == 404
