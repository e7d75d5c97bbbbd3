"""Slow and idle connections are dropped, and the connection cap refuses clearly (issue 20
§4), over real server processes.

Attacks:
- slowloris: 300 sockets that send a request line and then a header line a second, against
  a server whose file descriptor limit is 256 (unfixed, 244 such sockets locked every other
  client out): a normal client is answered within 5 s while they drip, and every slow
  socket is closed once the header timeout has passed;
- a silent connection (connects, sends nothing) and a slow body: 408 and closed;
- every connection busy with a request (open SSE streams) at the cap: a new connection
  gets 503 at once, with `Retry-After` and a JSON-RPC error body, instead of hanging;
- the same header timeout on uvicorn's other HTTP implementation (h11), in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest
from tests.transports.conftest import serving
from tests.transports.limits_support import (
    http,
    initialize,
    mcpkit_process,
    open_stream,
    parse_reply,
)

from mcpkit.transports.server.http.connections import ConnectionLimits, LimitError

pytestmark = pytest.mark.anyio

SLOW = 300
FD_LIMIT = 256
HEADER_TIMEOUT_S = 1.5


async def _slow_sockets(port: int, count: int
                        ) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    sockets = []
    for index in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        sockets.append((reader, writer))
        if index % 50 == 49:
            await asyncio.sleep(0.02)  # let the server accept as it goes
    return sockets


async def _drip(sockets: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]],
                rounds: int) -> None:
    """A header line a second on every socket still open (bounded: `rounds` seconds)."""
    for _ in range(rounds):
        for _reader, writer in sockets:
            if not writer.is_closing():
                with contextlib.suppress(OSError):
                    writer.write(b"x-slow: 1\r\n")
        await asyncio.sleep(1.0)


async def _closed_by_server(reader: asyncio.StreamReader) -> bool:
    """Whether the server ended this connection (EOF, after a 408 or nothing, or a reset)."""
    try:
        async with asyncio.timeout(0.5):
            data = await reader.read()
    except TimeoutError:
        return False
    except OSError:
        return True
    return data == b"" or data.startswith(b"HTTP/1.1 408")


async def test_slowloris_cannot_lock_out_a_normal_client() -> None:
    args = ["example", "--header-timeout", str(HEADER_TIMEOUT_S)]
    with mcpkit_process(args, fd_limit=FD_LIMIT) as (_proc, port):
        sockets = await _slow_sockets(port, SLOW)
        dripping = asyncio.create_task(_drip(sockets, rounds=8))
        try:
            started = time.monotonic()
            reply = await http(port, initialize(), limit_s=5.0)  # the liveness bound
            assert reply.status == 200, reply
            assert time.monotonic() - started < 5.0
            await asyncio.sleep(HEADER_TIMEOUT_S + 2.5)  # the timeout, then a tick or two
            closed = [await _closed_by_server(reader) for reader, _writer in sockets]
            assert all(closed), f"{closed.count(False)} of {SLOW} slow sockets still open"
            assert (await http(port, initialize(), limit_s=5.0)).status == 200
        finally:
            dripping.cancel()
            for _reader, writer in sockets:
                writer.close()


async def test_a_silent_connection_and_a_slow_body_get_408() -> None:
    args = ["example", "--header-timeout", "1", "--body-timeout", "1"]
    with mcpkit_process(args) as (_proc, port):
        silent_reader, silent = await asyncio.open_connection("127.0.0.1", port)
        slow_reader, slow = await asyncio.open_connection("127.0.0.1", port)
        try:
            slow.write(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/"
                       b"json\r\naccept: application/json\r\ncontent-length: 1000\r\n\r\n{")
            async with asyncio.timeout(5):
                silent_reply = parse_reply(await silent_reader.read())
                slow_reply = parse_reply(await slow_reader.read())
            assert silent_reply.status == 408
            assert "headers did not arrive in time" in silent_reply.json()["error"]["message"]
            assert slow_reply.status == 408
            assert "body did not arrive in time" in slow_reply.json()["error"]["message"]
        finally:
            silent.close()
            slow.close()


async def test_at_the_cap_with_every_connection_busy_a_new_one_gets_503_at_once() -> None:
    cap = 8
    with mcpkit_process(["example", "--max-connections", str(cap)]) as (_proc, port):
        streams = []
        try:
            for index in range(cap):  # each an open GET stream: a request being answered
                reply = await http(port, initialize(), source=f"127.0.0.{index + 2}")
                session_id = reply.headers["mcp-session-id"]
                streams.append((await open_stream(port, session_id))[1])
            started = time.monotonic()
            refused = await http(port, initialize(), limit_s=5.0)
            assert refused.status == 503
            assert time.monotonic() - started < 5.0
            assert int(refused.headers["retry-after"]) >= 1
            assert "too many connections" in refused.json()["error"]["message"]
            streams.pop().close()  # one connection ends: there is room again
            await asyncio.sleep(0.3)
            assert (await http(port, initialize(), limit_s=5.0)).status == 200
        finally:
            for writer in streams:
                writer.close()


async def _echo_app(scope: dict[str, object], receive: object, send: object) -> None:
    from mcpkit.transports.server.http import asgi

    await asgi.respond(send, 200, b"ok")  # type: ignore[arg-type]


@pytest.mark.parametrize("implementation", ["h11", "httptools"])
async def test_the_header_timeout_holds_on_either_http_implementation(
    implementation: str,
) -> None:
    limits = ConnectionLimits(header_timeout_s=0.5)
    async with serving(_echo_app, http=implementation, limits=limits) as (_server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(b"GET / HTTP/1.1\r\nhost: 127.0.0.1\r\n")
            async with asyncio.timeout(5):
                assert parse_reply(await reader.read()).status == 408
            assert (await http(port, None, method="GET", path="/")).body == b"ok"
        finally:
            writer.close()


def test_limits_must_be_positive() -> None:
    for bad in ({"max_connections": 0}, {"header_timeout_s": 0}, {"body_timeout_s": -1.0},
                {"header_timeout_s": float("nan")}):
        with pytest.raises(LimitError):
            ConnectionLimits(**bad)  # type: ignore[arg-type]
