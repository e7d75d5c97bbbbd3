"""Memory is bounded in bytes (issue 20 §3), measured on real server processes: the VmRSS of
the server before and after each flood is held to a stated bound.

- A logging flood on a legacy Streamable HTTP session, read by the client: streams that were
  delivered whole are released, so the calls leave no replay buffer behind (before: every
  event of every stream was kept for the session's life, ~69 MiB per 5,000 x 10 KB call).
- Many request bodies just under the 4 MiB limit, sent and held unfinished: the bodies in
  flight share one byte budget (64 MiB); past it a request is refused with 503 and
  Retry-After instead of being buffered.
- A stdio client that writes 20,000 requests with big replies and reads nothing: the server
  stops reading once its output is backed up, so its memory stays flat; when the client
  reads, every answer arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import anyio
import pytest
from tests.memory_bounds import (
    FLOOD_SERVER,
    MIB,
    ROOT,
    LegacySession,
    flood_server_http,
    read_events,
    rss_bytes,
    settled_rss,
)
from tests.procs import stop_process

from mcpkit.protocol.errors import SERVER_BUSY
from mcpkit.server.admission import DEFAULT_MAX_REQUESTS_IN_FLIGHT
from mcpkit.transports.server.http.asgi import DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES
from mcpkit.transports.server.http.replay import DEFAULT_MAX_STREAM_REPLAY_BYTES

pytestmark = pytest.mark.anyio

FLOOD_CALLS = 4
FLOOD_COUNT = 2_000
FLOOD_SIZE = 10_000
FLOOD_GROWTH_BOUND = 40 * MIB
"""Growth allowed across the flood: one stream's replay budget (4 MiB) and allocator slack;
the unbounded buffers kept FLOOD_CALLS x FLOOD_COUNT x FLOOD_SIZE (80 MB, ~110 MiB RSS)."""


async def test_a_read_logging_flood_leaves_no_replay_buffers_behind() -> None:
    with flood_server_http() as server:
        async with aiohttp.ClientSession() as client:
            session = LegacySession(client, server.url)
            await session.open()
            await session.call_tool("flood", count=200, size=FLOOD_SIZE)  # warm the heap
            before = rss_bytes(server.proc.pid)
            with anyio.fail_after(120):
                for _ in range(FLOOD_CALLS):
                    logs, response = await session.call_tool(
                        "flood", count=FLOOD_COUNT, size=FLOOD_SIZE)
                    assert logs == FLOOD_COUNT
                    assert response["result"]["content"][0]["text"] == f"logged {FLOOD_COUNT}"
            after = rss_bytes(server.proc.pid)
            print(f"\nlogging flood over HTTP: RSS {before / MIB:.1f} -> {after / MIB:.1f} MiB")
            assert after - before < FLOOD_GROWTH_BOUND
            # The session lives on and answers.
            _, response = await session.call_tool("echo", text="still here")
            assert response["result"]["content"][0]["text"] == "still here"
            await session.close()


DETACHED_GROWTH_BOUND = 24 * MIB
"""A stream's replay budget (4 MiB) and allocator slack; the whole flood is 20 MB."""


async def test_a_client_gone_mid_flood_finds_the_response_within_the_stream_budget() -> None:
    """The client drops the connection after the first events of a 2,000 x 10 KB flood: the
    server goes on, keeping at most one stream's budget of events, and a resume with
    Last-Event-ID gets the newest of them and the response. Once that resume has read the
    stream to its end, the stream is released after the grace: resuming it again is 410."""
    with flood_server_http("--delivered-grace-s", "0.2") as server:
        async with aiohttp.ClientSession() as client:
            session = LegacySession(client, server.url)
            await session.open()
            await session.call_tool("flood", count=200, size=FLOOD_SIZE)  # warm the heap
            before = rss_bytes(server.proc.pid)
            body = {"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                    "params": {"name": "flood",
                               "arguments": {"count": FLOOD_COUNT, "size": FLOOD_SIZE}}}
            last_id = ""
            with anyio.fail_after(30):
                async with client.post(server.url, json=body, headers=session.headers) as resp:
                    pending = b""
                    while not last_id:
                        pending += await resp.content.readany()
                        for line in pending.split(b"\n"):
                            if line.startswith(b"id:") and b"data:" in pending:
                                last_id = line[3:].strip().decode()
                    resp.close()  # hang up mid-flood
            resume = {**session.headers, "accept": "text/event-stream", "last-event-id": last_id}
            with anyio.fail_after(60):
                async with client.get(server.url, headers=resume) as resp:
                    assert resp.status == 200
                    logs, response = await read_events(resp.content, 99)
            after = rss_bytes(server.proc.pid)
            print(f"\nflood to a client that hung up: RSS {before / MIB:.1f} -> "
                  f"{after / MIB:.1f} MiB; {logs} log events replayed")
            assert response["result"]["content"][0]["text"] == f"logged {FLOOD_COUNT}"
            assert 0 < logs * (FLOOD_SIZE + 100) <= DEFAULT_MAX_STREAM_REPLAY_BYTES
            assert after - before < DETACHED_GROWTH_BOUND
            await anyio.sleep(0.5)  # the grace (0.2 s) has passed
            async with client.get(server.url, headers=resume) as resp:
                assert resp.status == 410
            await session.close()


SLOW_BODIES = 40
BODY_LIMIT = 4 * 1024 * 1024
BODY_TAIL = 1024
"""Bytes of each body held back: the server has all but these and waits for them."""
BODY_GROWTH_BOUND = DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES + 32 * MIB
"""The budget of bodies in flight plus slack; without it, SLOW_BODIES x 4 MiB (160 MiB)."""


def _slow_body_request(port: int) -> tuple[bytes, bytes]:
    """A POST of a body one byte under the limit, split into (all but the tail, the tail)."""
    head = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":"'
    tail = b'"}}'
    body = head + b"x" * (BODY_LIMIT - 1 - len(head) - len(tail)) + tail
    request = (
        b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\n"
        b"accept: application/json, text/event-stream\r\ncontent-length: %d\r\n\r\n"
        % (port, len(body))
    ) + body
    return request[:-BODY_TAIL], request[-BODY_TAIL:]


async def _status(reader: asyncio.StreamReader, limit_s: float) -> int | None:
    """The status of the response on `reader`, or None if none came within `limit_s`."""
    try:
        line = await asyncio.wait_for(reader.readline(), limit_s)
    except (TimeoutError, ConnectionError):
        return None
    return int(line.split()[1]) if line.startswith(b"HTTP/1.1 ") else None


async def test_many_slow_bodies_under_the_limit_share_one_budget() -> None:
    with flood_server_http() as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        pid = server.proc.pid
        async with aiohttp.ClientSession() as client:  # warm: one normal request
            session = LegacySession(client, server.url)
            await session.open()
            before = rss_bytes(pid)
            first, rest = _slow_body_request(port)
            connections: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
            try:
                with anyio.fail_after(60):
                    for _ in range(SLOW_BODIES):
                        reader, writer = await asyncio.open_connection("127.0.0.1", port)
                        connections.append((reader, writer))
                        writer.write(first)
                    for _, writer in connections:
                        await writer.drain()
                    # Every body is now with the server, short of its tail: either held in
                    # the budget or refused. Refusals are answered while the body is held.
                    statuses = list(await asyncio.gather(
                        *(_status(reader, 1.5) for reader, _ in connections)))
                held = rss_bytes(pid)
                print(f"\n{SLOW_BODIES} slow bodies: RSS {before / MIB:.1f} -> "
                      f"{held / MIB:.1f} MiB; refused: {statuses.count(503)}")
                assert held - before < BODY_GROWTH_BOUND
                fits = DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES // BODY_LIMIT
                assert statuses.count(503) >= SLOW_BODIES - fits
                assert set(statuses) <= {503, None}
                # While they are held, a normal request is answered.
                with anyio.fail_after(5):
                    _, response = await session.call_tool("echo", text="hello")
                assert response["result"]["content"][0]["text"] == "hello"
                # The bodies held are read whole once their tails come (the 400: no session).
                with anyio.fail_after(30):
                    for (reader, writer), status in zip(connections, statuses, strict=True):
                        if status is None:
                            writer.write(rest)
                            assert await _status(reader, 10.0) == 400
            finally:
                for _, writer in connections:
                    writer.close()


async def test_a_refused_body_says_when_to_retry() -> None:
    """The 503 of a full budget carries Retry-After and a JSON-RPC error naming the limit."""
    with flood_server_http() as server:
        port = int(server.url.rsplit(":", 1)[1].split("/")[0])
        first, _ = _slow_body_request(port)
        fits = DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES // BODY_LIMIT
        connections = []
        try:
            with anyio.fail_after(30):
                for _ in range(fits + 1):
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                    connections.append((reader, writer))
                    writer.write(first)
                for _, writer in connections:
                    await writer.drain()
                # Which body is refused depends on the order the server reads them in.
                answers = await asyncio.gather(*(
                    asyncio.wait_for(reader.read(4096), 1.5) for reader, _ in connections),
                    return_exceptions=True)
        finally:
            for _, writer in connections:
                writer.close()
        refused = [raw for raw in answers if isinstance(raw, bytes) and raw]
        assert len(refused) == 1
        raw = refused[0]
        head, _, body = raw.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503")
        assert b"retry-after: 1" in head.lower()
        error = json.loads(body)["error"]
        assert error["code"] == -32603 and str(DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES) in error[
            "message"]


STDIO_REQUESTS = 20_000
STDIO_REPLY_BYTES = 10_000
STDIO_GROWTH_BOUND = 48 * MIB
"""Output backed up to its bound (1 MiB) plus the replies of one read chunk of requests and
allocator slack; without backpressure, every reply (20,000 x 10 KB, ~210 MiB) was kept."""


@contextlib.contextmanager
def flood_server_stdio() -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        [sys.executable, str(FLOOD_SERVER), "--transport", "stdio"], cwd=ROOT,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        # Stopped first: a client thread blocked writing to a server that does not read
        # holds the pipe's lock, and closing the pipe would wait for it.
        stop_process(proc)
        for pipe in (proc.stdin, proc.stdout):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_a_stdio_client_that_stops_reading_stalls_the_server_not_its_memory() -> None:
    with flood_server_stdio() as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "memory-test", "version": "1"}}}))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        proc.stdin.write(_line({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        proc.stdin.flush()
        before = rss_bytes(proc.pid)
        requests = b"".join(
            _line({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                   "params": {"name": "blob", "arguments": {"size": STDIO_REPLY_BYTES}}})
            for n in range(1, STDIO_REQUESTS + 1))
        failures: list[BaseException] = []

        def write_all() -> None:  # blocks while the server does not read: a thread
            assert proc.stdin is not None
            try:
                proc.stdin.write(requests)
                proc.stdin.flush()
            except BaseException as error:  # reported by the test below
                failures.append(error)

        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        stalled = settled_rss(proc.pid)
        print(f"\n{STDIO_REQUESTS} unread stdio replies: RSS {before / MIB:.1f} -> "
              f"{stalled / MIB:.1f} MiB")
        assert stalled - before < STDIO_GROWTH_BOUND
        # Now the client reads: every request is answered - with its result, or, for those
        # that found the connection's in-flight slots (server/admission.py) all taken by
        # replies waiting for the drain, with the precise "busy" error - none is lost.
        answered: set[int] = set()
        results = 0
        deadline = time.monotonic() + 120
        while len(answered) < STDIO_REQUESTS and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, "the server closed its output"
            message = json.loads(line)
            if "error" in message:
                assert message["error"]["code"] == SERVER_BUSY, message
            else:
                assert len(message["result"]["content"][0]["text"]) == STDIO_REPLY_BYTES
                results += 1
            answered.add(message["id"])
        writer.join(10)
        assert not failures
        assert answered == set(range(1, STDIO_REQUESTS + 1))
        assert results >= DEFAULT_MAX_REQUESTS_IN_FLIGHT  # the slots were used, not refused


def test_a_stdio_client_that_closes_the_output_it_stopped_reading_lets_the_server_stop() -> None:
    """Backed-up output pauses reading; if the client then closes the server's stdout and its
    stdin, the server must still see the EOF and exit (not wait for a drain that never
    comes)."""
    with flood_server_stdio() as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(_line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "memory-test", "version": "1"}}}))
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        requests = b"".join(
            _line({"jsonrpc": "2.0", "id": n, "method": "tools/call",
                   "params": {"name": "blob", "arguments": {"size": STDIO_REPLY_BYTES}}})
            for n in range(1, 2_001))

        def write_all() -> None:  # blocks once the server stops reading
            assert proc.stdin is not None
            with contextlib.suppress(OSError):
                proc.stdin.write(requests)
                proc.stdin.flush()

        writer = threading.Thread(target=write_all, daemon=True)
        writer.start()
        settled_rss(proc.pid)  # the output is backed up and the server stopped reading
        proc.stdout.close()
        writer.join(20)
        assert not writer.is_alive()
        proc.stdin.close()
        assert proc.wait(timeout=15) is not None
