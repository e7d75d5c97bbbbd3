"""Byte bounds at the wire (issue 20, round two), on a real server process
(tests/transports/flood_server.py under uvicorn with httptools), RSS measured around each
attack:

- a request target of 64 MiB, a header of 64 MiB, 1,000 headers: 414 / 431 with a JSON-RPC
  error, at once, the server's memory flat (before: uvicorn kept ~100 MiB per connection for
  the 10 s head timeout, copying the growing URL on every chunk);
- WebSocket messages over the 4 MiB limit: refused from the frame header with 1009 (before:
  uvicorn read up to 16 MiB of each first); partial messages held open on many sockets share
  one in-flight budget, past which a socket is closed with 1013;
- an HTTP+SSE (2024-11-05) client that stops reading while a tool logs 60 x 1 MB: the
  session writes with backpressure (before: a 256-message queue held them all), and when the
  client reads again every message arrives.

Each time a normal request is answered during or after the attack.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import struct
import time
from collections.abc import Iterator

import aiohttp
import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.memory_bounds import MIB, ServerProcess, flood_server_http, rss_bytes, settled_rss

from mcpkit.transports.server.http.head_limits import (
    DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_MAX_HEADERS,
    DEFAULT_MAX_URL_BYTES,
    HeadLimitError,
    HeadLimits,
)
from mcpkit.transports.server.http.websocket_limits import WebSocketLimitError, WebSocketLimits

pytestmark = pytest.mark.anyio

HEAD_FLOOD_BYTES = 64 * MIB
HEAD_GROWTH_BOUND = 8 * MIB
"""Growth allowed across three head floods of 64 MiB each: a read chunk or two per
connection and allocator slack (before: ~100 MiB per connection, held for 10 s)."""


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with flood_server_http("--max-ws-bytes-in-flight", str(8 * MIB)) as proc:
        yield proc


def _port(server: ServerProcess) -> int:
    return int(server.url.rsplit(":", 1)[1].split("/")[0])


def _connect(server: ServerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", _port(server)), timeout=10)


def _read_response(sock: socket.socket, limit_s: float = 10.0) -> bytes:
    """What the server sends until it closes (bounded: 64 KiB, `limit_s`)."""
    sock.settimeout(limit_s)
    data = b""
    with contextlib.suppress(OSError):
        while len(data) < 65536 and (chunk := sock.recv(65536)):
            data += chunk
    return data


def _flood(sock: socket.socket, prefix: bytes, filler: bytes, total: int) -> int:
    """Send `prefix` then `filler` until `total` bytes or the server stops taking them;
    the bytes sent."""
    sock.sendall(prefix)
    sent = len(prefix)
    sock.settimeout(5)
    with contextlib.suppress(OSError):  # refused: the server closed its end
        while sent < total:
            sock.sendall(filler)
            sent += len(filler)
    return sent


def _ping_status(server: ServerProcess) -> int:
    """A normal request on a fresh connection: its HTTP status (a legacy initialize)."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "wire-test", "version": "1"}}}).encode()
    with _connect(server) as sock:
        sock.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json"
                     b"\r\naccept: application/json, text/event-stream\r\nconnection: close\r\n"
                     b"content-length: %d\r\n\r\n%s" % (len(body), body))
        head = _read_response(sock).split(b"\r\n", 1)[0]
    return int(head.split()[1])


def _status_and_error(response: bytes) -> tuple[int, dict[str, object]]:
    head, _, body = response.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)["error"]


# --- request heads ---------------------------------------------------------------------------

def test_a_huge_request_target_is_refused_with_414(server: ServerProcess) -> None:
    before = settled_rss(server.proc.pid)
    with _connect(server) as sock:
        sent = _flood(sock, b"GET /mcp?task_id=", b"a" * 65536, HEAD_FLOOD_BYTES)
        status, error = _status_and_error(_read_response(sock))
    assert status == 414
    assert error["code"] == -32600
    assert f"exceeds {DEFAULT_MAX_URL_BYTES} bytes" in str(error["message"])
    assert sent > DEFAULT_MAX_URL_BYTES
    assert rss_bytes(server.proc.pid) - before < HEAD_GROWTH_BOUND
    assert _ping_status(server) == 200


@pytest.mark.parametrize("header", [b"authorization: Bearer ", b"mcp-session-id: ",
                                    b"last-event-id: ", b"mcp-param-x: "])
def test_a_huge_header_is_refused_with_431(server: ServerProcess, header: bytes) -> None:
    before = settled_rss(server.proc.pid)
    with _connect(server) as sock:
        _flood(sock, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + header, b"a" * 65536,
               HEAD_FLOOD_BYTES)
        status, error = _status_and_error(_read_response(sock))
    assert status == 431
    assert f"exceed {DEFAULT_MAX_HEAD_BYTES} bytes" in str(error["message"])
    assert rss_bytes(server.proc.pid) - before < HEAD_GROWTH_BOUND
    assert _ping_status(server) == 200


def test_too_many_headers_are_refused_with_431(server: ServerProcess) -> None:
    with _connect(server) as sock:
        lines = b"".join(b"x-h%d: 1\r\n" % i for i in range(1000))
        sock.sendall(b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + lines + b"\r\n")
        status, error = _status_and_error(_read_response(sock))
    assert status == 431
    assert f"more than {DEFAULT_MAX_HEADERS} headers" in str(error["message"])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(url_len=st.integers(5, 2 * DEFAULT_MAX_URL_BYTES),
       header_len=st.integers(0, 2 * DEFAULT_MAX_HEAD_BYTES),
       count=st.integers(0, 2 * DEFAULT_MAX_HEADERS))
def test_heads_are_refused_exactly_past_their_limits(
    server: ServerProcess, url_len: int, header_len: int, count: int
) -> None:
    """A GET whose target, header bytes and header count vary around the limits: 414 when
    the target is too long, else 431 when the head is, else the app answers (405: a GET
    without a session). A head within the limit is never refused; one whose header lines
    alone pass it always is."""
    target = b"/mcp?" + b"q" * (url_len - 5)
    headers = [(b"host", b"127.0.0.1"), (b"x-big", b"b" * header_len),
               *((b"x-%d" % i, b"1") for i in range(count)), (b"connection", b"close")]
    head = (b"GET " + target + b" HTTP/1.1\r\n"
            + b"".join(name + b": " + value + b"\r\n" for name, value in headers) + b"\r\n")
    parsed = len(target) + len(b"GET  HTTP/1.1\r\n") + sum(
        len(name) + len(value) + 4 for name, value in headers)
    with _connect(server) as sock:
        sock.sendall(head)
        status = int(_read_response(sock).split(b"\r\n", 1)[0].split()[1])
    if len(target) > DEFAULT_MAX_URL_BYTES:
        assert status == 414
    elif len(headers) > DEFAULT_MAX_HEADERS or parsed > DEFAULT_MAX_HEAD_BYTES:
        assert status == 431
    elif len(head) <= DEFAULT_MAX_HEAD_BYTES:
        assert status == 405
    else:  # the final blank line alone passes the limit: either answer is right
        assert status in (405, 431)


def test_limits_must_be_positive_whole_numbers() -> None:
    with pytest.raises(HeadLimitError, match="max_headers"):
        HeadLimits(max_headers=0)
    with pytest.raises(WebSocketLimitError, match="max_in_flight_bytes"):
        WebSocketLimits(max_in_flight_bytes=True)  # type: ignore[arg-type]


def test_h11_gets_the_same_head_bound() -> None:
    from mcpkit.transports.server.http.serve import uvicorn_config

    config = uvicorn_config(lambda *_: None, http="h11",
                            head_limits=HeadLimits(max_head_bytes=5000))
    assert config.h11_max_incomplete_event_size == 5000
    assert config.ws_max_size == 4 * MIB


# --- WebSocket -------------------------------------------------------------------------------

def _ws_open(server: ServerProcess) -> socket.socket:
    sock = _connect(server)
    key = base64.b64encode(os.urandom(16))
    sock.sendall(b"GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                 b"Connection: Upgrade\r\nSec-WebSocket-Key: " + key + b"\r\n"
                 b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: mcp\r\n\r\n")
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(4096)
        assert chunk, "the server closed the handshake"
        answer += chunk
    assert answer.startswith(b"HTTP/1.1 101"), answer
    return sock


def _text_frame_head(size: int) -> bytes:
    """A masked text frame's header announcing `size` bytes (mask of zeros: the payload
    goes as it is)."""
    return b"\x81\xff" + struct.pack(">Q", size) + b"\0\0\0\0"


def _close_code(sock: socket.socket) -> int | None:
    """The code of the close frame the server sent, if any came within 10 s."""
    data = _read_response(sock)
    if len(data) >= 4 and data[0] == 0x88:
        return int(struct.unpack(">H", data[2:4])[0])
    return None


async def _ws_echo(server: ServerProcess) -> str:
    """A normal WebSocket session's tool call."""
    async with aiohttp.ClientSession() as client, client.ws_connect(
        f"ws://127.0.0.1:{_port(server)}/ws", protocols=("mcp",)
    ) as ws:
        await ws.send_str(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                      "params": {"protocolVersion": "2025-11-25",
                                                 "capabilities": {}, "clientInfo": {
                                                     "name": "t", "version": "1"}}}))
        await ws.receive_json(timeout=10)
        await ws.send_str(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                      "params": {"name": "echo",
                                                 "arguments": {"text": "still here"}}}))
        reply = await ws.receive_json(timeout=10)
        return str(reply["result"]["content"][0]["text"])


async def test_an_oversized_websocket_message_is_refused_from_its_header(
    server: ServerProcess,
) -> None:
    before = settled_rss(server.proc.pid)
    socks = [_ws_open(server) for _ in range(8)]
    try:
        for sock in socks:
            sock.sendall(_text_frame_head(15 * MIB) + b"x" * 65536)
        codes = [_close_code(sock) for sock in socks]
    finally:
        for sock in socks:
            sock.close()
    assert codes == [1009] * 8
    assert rss_bytes(server.proc.pid) - before < 16 * MIB  # before: ~8 x 15 MiB read first
    assert await _ws_echo(server) == "still here"


async def test_websocket_messages_in_flight_share_one_budget(server: ServerProcess) -> None:
    """Sockets each holding 2 MB of an unfinished 3 MB message, against an 8 MiB budget:
    the first four fit, the next are closed with 1013; the server's memory stays within the
    budget; once the holders go, a normal session works."""
    before = settled_rss(server.proc.pid)
    socks = [_ws_open(server) for _ in range(8)]
    try:
        for sock in socks:
            sock.sendall(_text_frame_head(3_000_000) + b"y" * 2_000_000)
            await anyio.sleep(0.05)  # let the server take it in order
        growth = rss_bytes(server.proc.pid) - before
        refused = [_close_code(sock) for sock in socks[4:]]
    finally:
        for sock in socks:
            sock.close()
    assert refused == [1013] * 4
    assert growth < 24 * MIB  # the budget (8 MiB) and slack; unbounded: 16 MB and growing
    with anyio.fail_after(15):
        assert await _ws_echo(server) == "still here"


# --- HTTP+SSE (2024-11-05) -------------------------------------------------------------------

SSE_FLOOD_COUNT = 60
SSE_FLOOD_SIZE = 1_000_000
SSE_GROWTH_BOUND = 20 * MIB
"""Growth allowed while the client does not read a 60 MB flood: a message or two being
written, the socket buffers and slack (before: the session's queue held up to 256)."""


async def test_a_non_reading_sse_client_does_not_grow_the_server(
    server: ServerProcess,
) -> None:
    port = _port(server)
    with _connect(server) as sock:
        sock.sendall(b"GET /sse HTTP/1.1\r\nHost: 127.0.0.1\r\naccept: text/event-stream\r\n\r\n")
        seen = b""
        while b"session_id=" not in seen or not seen.endswith(b"\n\n"):
            seen += sock.recv(1)
        session_id = seen.split(b"session_id=")[1].split(b"\n")[0].strip().decode()
        endpoint = f"http://127.0.0.1:{port}/messages?session_id={session_id}"
        before = settled_rss(server.proc.pid)
        async with aiohttp.ClientSession() as client:
            for message in (
                {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2024-11-05", "capabilities": {},
                    "clientInfo": {"name": "slow", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel",
                 "params": {"level": "info"}},
                {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                    "name": "flood",
                    "arguments": {"count": SSE_FLOOD_COUNT, "size": SSE_FLOOD_SIZE}}},
            ):
                async with client.post(endpoint, json=message) as resp:
                    assert resp.status == 202
            stalled = settled_rss(server.proc.pid)
            # Another client is served meanwhile.
            assert _ping_status(server) == 200
        assert stalled - before < SSE_GROWTH_BOUND
        # The client reads again: every message arrives, then the tool's result.
        logs, result = 0, None
        sock.settimeout(20)
        pending = b""
        deadline = time.monotonic() + 60
        while result is None and time.monotonic() < deadline:
            chunk = sock.recv(1 << 20)  # each read within the socket's 20 s
            assert chunk, "the stream ended early"
            pending += chunk
            *events, pending = pending.split(b"\n\n")
            for event in events:
                if b'"notifications/message"' in event:
                    logs += 1
                elif b'"id":2' in event:
                    result = event
    assert logs == SSE_FLOOD_COUNT
    assert result is not None
    assert f"logged {SSE_FLOOD_COUNT}".encode() in result
