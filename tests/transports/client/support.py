"""Shared pieces of the client transport tests: a collecting `Inbound`, a transport opened
in its own task group, and small aiohttp.web servers on 127.0.0.1 for faults."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from aiohttp import web

from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client.base import ClientTransport, Outgoing

LIMIT_S = 5.0


class Collector:
    """An `Inbound` that keeps everything it is told, with bounded waits."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.failures: dict[RequestId, Exception] = {}
        self.closed_with: list[Exception | None] = []
        self._changed = anyio.Event()

    def receive(self, data: bytes, related: Any = None) -> None:
        self.messages.append(json.loads(data))
        self._wake()

    def request_failed(self, request_id: RequestId, error: Exception) -> None:
        self.failures[request_id] = error
        self._wake()

    def closed(self, error: Exception | None) -> None:
        self.closed_with.append(error)
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, check: Callable[[], Any], limit_s: float = LIMIT_S) -> Any:
        """Wait until `check()` is truthy; return its value."""
        with anyio.fail_after(limit_s):
            while not (found := check()):
                await self._changed.wait()
            return found

    def response_to(self, request_id: RequestId) -> dict[str, Any] | None:
        for message in self.messages:
            if "method" not in message and message.get("id") == request_id:
                return message
        return None

    async def response(self, request_id: RequestId) -> dict[str, Any]:
        found: dict[str, Any] = await self.until(
            lambda: self.response_to(request_id) or self.failures.get(request_id)
        )
        assert isinstance(found, dict), f"request {request_id} failed: {found!r}"
        return found

    async def failure(self, request_id: RequestId) -> Exception:
        found: Exception = await self.until(lambda: self.failures.get(request_id))
        return found

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("method") == method and "id" not in m]


@asynccontextmanager
async def opened(transport: ClientTransport) -> AsyncIterator[Collector]:
    """`transport` opened with a fresh Collector; closed (and its tasks ended) on exit."""
    inbound = Collector()
    tg = anyio.create_task_group()
    async with tg:
        try:
            await transport.open(inbound, tg)
            yield inbound
        finally:
            with anyio.fail_after(LIMIT_S, shield=True):
                await transport.close()
            # Anything the transport left running would hold the test: fail fast instead.
            tg.cancel_scope.deadline = anyio.current_time() + LIMIT_S
    assert not tg.cancel_scope.cancelled_caught, "close() left transport tasks running"


def request(request_id: RequestId, method: str, params: dict[str, Any] | None = None,
            **headers: str) -> Outgoing:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    return Outgoing(json.dumps(message).encode(), method, request_id,
                    {k.replace("_", "-"): v for k, v in headers.items()})


def notification(method: str, params: dict[str, Any] | None = None) -> Outgoing:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return Outgoing(json.dumps(message).encode(), method)


@asynccontextmanager
async def web_server(routes: list[web.RouteDef]) -> AsyncIterator[str]:
    """An aiohttp.web app on a free 127.0.0.1 port, in this event loop; yields its base URL."""
    app = web.Application()
    app.add_routes(routes)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    host, port = runner.addresses[0][:2]
    try:
        yield f"http://{host}:{port}"
    finally:
        with anyio.CancelScope(shield=True):
            await runner.cleanup()


def sse_event(data: str = "", *, id: str | None = None, event: str | None = None,
              retry_ms: int | None = None) -> bytes:
    out = ""
    if id is not None:
        out += f"id: {id}\n"
    if event is not None:
        out += f"event: {event}\n"
    if retry_ms is not None:
        out += f"retry: {retry_ms}\n"
    return (out + f"data: {data}\n\n").encode()


async def sse_response(request: web.Request, *chunks: bytes) -> web.StreamResponse:
    """Start an SSE response and write `chunks`; the caller may write more, then return."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    for chunk in chunks:
        await resp.write(chunk)
    return resp


def result(request_id: RequestId, value: Any = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": value or {}})


async def open_error(transport: ClientTransport) -> Exception:
    """The exception `transport.open()` raises (it must raise, and start nothing)."""
    async with anyio.create_task_group() as tg:
        try:
            await transport.open(Collector(), tg)
        except Exception as exc:
            await transport.close()
            return exc
        await transport.close()
    raise AssertionError(f"opening {transport.describe()} succeeded")
