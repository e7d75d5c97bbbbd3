"""One behavioural contract, run against every client transport (as trio's `check_streams`
runs one suite against every stream): stdio (a child process), Streamable HTTP, HTTP+SSE and
WebSocket (a real server on 127.0.0.1), and in-memory (a `Server` in this process).

The contract is what `transports/client/base.py` promises the session, driven the way the
session drives it (raw JSON-RPC through `open` / `send` / `abandon` / `close`, answers through
an `Inbound`):

- a request is answered, its response carrying its id;
- the server's notifications reach the inbound side (before the response they precede);
- a notification the client sends reaches the server (`notifications/cancelled` stops a call);
- many concurrent requests are all answered, each with its own id and result;
- a message over the transport's size limit fails its request with `MessageTooLarge`;
- the server going away fails pending and later requests with a `TransportError` (no hang);
- `abandon` ends the wait for one answer and nothing more is reported for it;
- `close()` is idempotent and bounded (with a request in flight), and a send after it
  raises `TransportError`.

The servers are started once per module (the HTTP one serves /mcp, /sse and WebSocket); a
test that kills its server starts one of its own.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from tests.procs import free_port, stop_process, wait_for_port
from tests.transports.contract_server import build

from mcpkit.protocol import jsonrpc
from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client.base import (
    ClientTransport,
    MessageTooLarge,
    Outgoing,
    TransportError,
)
from mcpkit.transports.client.http import StreamableHttpTransport
from mcpkit.transports.client.memory import MemoryTransport
from mcpkit.transports.client.sse import LegacySseTransport
from mcpkit.transports.client.stdio import StdioTransport
from mcpkit.transports.client.websocket import WebSocketTransport

pytestmark = pytest.mark.anyio

SERVER = str(Path(__file__).with_name("contract_server.py"))
KINDS = ["stdio", "http", "sse", "websocket", "memory"]
# The transports with a wire and a server process: the in-memory one frames no messages (so it
# has no size limit) and its server is an object in this process, which cannot go away.
WIRE_KINDS = [kind for kind in KINDS if kind != "memory"]
LIMIT_BYTES = 64 * 1024
"""The size limit every transport that has one is built with (its default is 16 MiB)."""
LIVENESS_S = 10.0
"""A generous bound on any one wait: a transport that hangs fails the test, never stalls it."""
CONCURRENT = 64
CHILD_EXIT_S = 0.5
LEGACY_VERSION = "2025-11-25"
SSE_VERSION = "2024-11-05"  # the HTTP+SSE transport's own protocol version


# --- the two sides ------------------------------------------------------------------------------


class Recorder:
    """The `Inbound` a transport reports to: every message, failure and close, kept."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.failures: dict[RequestId, Exception] = {}
        self.closed_with: Exception | None = None
        self.closed_count = 0
        self._changed = anyio.Event()

    def receive(self, data: bytes, related: RequestId | None = None) -> None:
        decoded = json.loads(data)
        self.messages.extend(decoded if isinstance(decoded, list) else [decoded])
        self._wake()

    def request_failed(self, request_id: RequestId, error: Exception) -> None:
        self.failures[request_id] = error
        self._wake()

    def closed(self, error: Exception | None) -> None:
        self.closed_count += 1
        self.closed_with = error or TransportError("closed without an error")
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def response(self, request_id: RequestId) -> dict[str, Any] | None:
        return next((m for m in self.messages if "method" not in m
                     and m.get("id") == request_id and ("result" in m or "error" in m)), None)

    def notifications(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("method") == method and "id" not in m]

    async def until(self, check: Callable[[], Any]) -> Any:
        """`check()`'s first value that is not None, re-checked on every report."""
        with anyio.fail_after(LIVENESS_S):
            while (found := check()) is None:
                await self._changed.wait()
        return found

    async def outcome(self, request_id: RequestId) -> dict[str, Any] | Exception:
        """The response to `request_id`, or the error the transport reported for it."""
        return await self.until(lambda: self.response(request_id)
                                or self.failures.get(request_id) or self.closed_with)


class Peer:
    """Raw JSON-RPC over one transport, as the client session would send it."""

    def __init__(self, kind: str, transport: ClientTransport, inbound: Recorder) -> None:
        self.kind = kind
        self.transport = transport
        self.inbound = inbound
        self._ids = itertools.count(1)

    async def request(self, method: str, params: dict[str, Any] | None = None) -> int:
        request_id = next(self._ids)
        data = jsonrpc.encode_request(request_id, method,
                                      msgspec.UNSET if params is None else params)
        await self.transport.send(Outgoing(data, method, request_id))
        return request_id

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        data = jsonrpc.encode_notification(method, msgspec.UNSET if params is None else params)
        await self.transport.send(Outgoing(data, method))

    async def call(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        found = await self.inbound.outcome(await self.request(method, params))
        if isinstance(found, Exception):
            raise found
        assert "result" in found, found
        result: dict[str, Any] = found["result"]
        return result

    async def tool(self, name: str, **arguments: Any) -> Any:
        result = await self.call("tools/call", {"name": name, "arguments": arguments})
        assert result.get("isError") is not True, result
        return result["content"][0]["text"]

    async def start_hang(self) -> int:
        """A `hang` call, once the server says it runs (its progress notification)."""
        token = f"hang-{next(self._ids)}"
        request_id = await self.request("tools/call", {
            "name": "hang", "arguments": {}, "_meta": {"progressToken": token}})
        await self.inbound.until(lambda: next(
            (n for n in self.inbound.notifications("notifications/progress")
             if n["params"]["progressToken"] == token), None))
        return request_id


# --- the servers --------------------------------------------------------------------------------


def _start_http_server() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, SERVER, "http", str(port)],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
    except BaseException:
        stop_process(proc)
        raise
    return proc, f"127.0.0.1:{port}"


@pytest.fixture(scope="module")
def http_address() -> Iterator[str]:
    """HOST:PORT of the module's HTTP server (Streamable HTTP, HTTP+SSE, WebSocket)."""
    proc, address = _start_http_server()
    try:
        yield address
    finally:
        stop_process(proc)


def make_transport(kind: str, address: str) -> ClientTransport:
    """A transport of `kind` to the contract server, its size limit `LIMIT_BYTES`. Two
    waits are shortened to keep the module fast, both bounded either way: the stdio child
    gets `CHILD_EXIT_S` to exit after its stdin closes (it gives calls in flight 5 s), and
    a Streamable HTTP stream that ends early is resumed once (a killed server's streams
    would otherwise be retried 5 times, a second apart)."""
    if kind == "stdio":
        return StdioTransport([sys.executable, SERVER, "stdio"], max_line_bytes=LIMIT_BYTES,
                              close_timeout=CHILD_EXIT_S)
    if kind == "http":
        return StreamableHttpTransport(f"http://{address}/mcp", max_message_bytes=LIMIT_BYTES,
                                       max_reconnects=1)
    if kind == "sse":
        return LegacySseTransport(f"http://{address}/sse", max_message_bytes=LIMIT_BYTES)
    if kind == "websocket":
        return WebSocketTransport(f"ws://{address}/mcp", max_message_bytes=LIMIT_BYTES)
    assert kind == "memory"
    return MemoryTransport(build())


@asynccontextmanager
async def connected(kind: str, address: str) -> AsyncIterator[Peer]:
    """An open transport of `kind`, past `initialize`; closed (bounded) on the way out."""
    transport = make_transport(kind, address)
    inbound = Recorder()
    async with anyio.create_task_group() as tg:
        with anyio.fail_after(LIVENESS_S):
            await transport.open(inbound, tg)
        peer = Peer(kind, transport, inbound)
        try:
            version = SSE_VERSION if kind == "sse" else LEGACY_VERSION
            result = await peer.call("initialize", {
                "protocolVersion": version, "capabilities": {},
                "clientInfo": {"name": "contract", "version": "1"}})
            assert result["protocolVersion"] == version
            transport.protocol_version = version
            await peer.notify("notifications/initialized")
            yield peer
        finally:
            with anyio.fail_after(LIVENESS_S):
                await transport.close()
            tg.cancel_scope.cancel()


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def address(kind: str, request: pytest.FixtureRequest) -> str:
    """The module's HTTP server, for the kinds that need one (started on first use)."""
    if kind in ("http", "sse", "websocket"):
        found: str = request.getfixturevalue("http_address")
        return found
    return ""


# --- the contract -------------------------------------------------------------------------------


async def test_a_request_is_answered_with_its_id(kind: str, address: str) -> None:
    async with connected(kind, address) as peer:
        assert await peer.tool("echo", text="héllo ✓ " * 10) == "héllo ✓ " * 10
        pinged = await peer.request("ping")
        answer = await peer.inbound.outcome(pinged)
        assert answer == {"jsonrpc": "2.0", "id": pinged, "result": {}}


async def test_server_notifications_reach_the_inbound_side(kind: str, address: str) -> None:
    async with connected(kind, address) as peer:
        request_id = await peer.request("tools/call", {
            "name": "progress", "arguments": {"steps": 3}, "_meta": {"progressToken": "p"}})
        answer = await peer.inbound.outcome(request_id)
        assert isinstance(answer, dict) and "result" in answer, answer
        progress = [n["params"] for n in peer.inbound.notifications("notifications/progress")]
        assert [(p["progressToken"], p["progress"], p["total"]) for p in progress] == \
            [("p", 1, 3), ("p", 2, 3), ("p", 3, 3)]
        # delivered before the response they precede
        assert peer.inbound.messages.index(answer) == len(peer.inbound.messages) - 1


async def test_client_notifications_reach_the_server(kind: str, address: str) -> None:
    async with connected(kind, address) as peer:
        before = int(await peer.tool("cancelled"))
        hanging = await peer.start_hang()
        await peer.notify("notifications/cancelled", {"requestId": hanging, "reason": "test"})
        with anyio.fail_after(LIVENESS_S):
            while int(await peer.tool("cancelled")) == before:  # noqa: ASYNC110 (a count
                # in the server process: asked for, not signalled)
                await anyio.sleep(0.02)
        await peer.transport.abandon(hanging)  # as the session does after cancelling


async def test_concurrent_requests_are_all_answered_each_with_its_own_id(
    kind: str, address: str
) -> None:
    async with connected(kind, address) as peer:
        sent: dict[int, str] = {}

        async def echo(number: int) -> None:
            text = f"message {number}"
            request_id = await peer.request(
                "tools/call", {"name": "echo", "arguments": {"text": text}})
            sent[request_id] = text

        async with anyio.create_task_group() as tg:
            for number in range(CONCURRENT):
                tg.start_soon(echo, number)
        answers = {request_id: await peer.inbound.outcome(request_id) for request_id in sent}
        assert len(answers) == CONCURRENT
        for request_id, answer in answers.items():
            assert isinstance(answer, dict), answer
            assert answer["result"]["content"][0]["text"] == sent[request_id]
        assert peer.inbound.failures == {} and peer.inbound.closed_with is None


@pytest.mark.parametrize("kind", WIRE_KINDS, indirect=True)
async def test_a_message_over_the_limit_is_message_too_large(kind: str, address: str) -> None:
    async with connected(kind, address) as peer:
        request_id = await peer.request(
            "tools/call", {"name": "blob", "arguments": {"size": 4 * LIMIT_BYTES}})
        failure = await peer.inbound.outcome(request_id)
        assert isinstance(failure, MessageTooLarge), repr(failure)
        if kind in ("stdio", "http"):  # the next message is read on: the connection stays
            assert await peer.tool("echo", text="still here") == "still here"


@pytest.mark.parametrize("kind", WIRE_KINDS, indirect=True)
async def test_the_server_going_away_fails_pending_and_later_requests(
    kind: str, address: str
) -> None:
    server: subprocess.Popen[bytes] | None = None
    if kind != "stdio":
        server, address = _start_http_server()
    try:
        async with connected(kind, address) as peer:
            hanging = await peer.start_hang()
            if isinstance(peer.transport, StdioTransport):
                os.kill(peer.transport.process.pid, signal.SIGKILL)
            else:
                assert server is not None
                server.kill()
            pending = await peer.inbound.outcome(hanging)
            assert isinstance(pending, TransportError), repr(pending)
            try:
                later: dict[str, Any] | Exception = await peer.inbound.outcome(
                    await peer.request("ping"))
            except TransportError as refused:
                later = refused
            assert isinstance(later, TransportError), repr(later)
    finally:
        if server is not None:
            stop_process(server)


async def test_abandon_ends_the_wait_and_nothing_more_is_reported(
    kind: str, address: str
) -> None:
    async with connected(kind, address) as peer:
        hanging = await peer.start_hang()
        if not peer.transport.per_request_streams:  # as the session cancels on these
            await peer.notify("notifications/cancelled", {"requestId": hanging})
        with anyio.fail_after(LIVENESS_S):
            await peer.transport.abandon(hanging)
            await peer.transport.abandon(10_000)  # an id never sent: nothing to do
        assert await peer.tool("echo", text="after") == "after"
        assert hanging not in peer.inbound.failures and peer.inbound.response(hanging) is None
        assert peer.inbound.closed_with is None


async def test_close_is_idempotent_and_a_send_after_it_fails(kind: str, address: str) -> None:
    async with connected(kind, address) as peer:
        await peer.start_hang()  # closing does not wait for what is in flight
        with anyio.fail_after(LIVENESS_S):
            await peer.transport.close()
            await peer.transport.close()
        with pytest.raises(TransportError):
            await peer.request("ping")
        with pytest.raises(TransportError):
            await peer.notify("notifications/initialized")
