"""`CoalescingTransport`: a response's head and body leave in one write; nothing is held past
the loop's next turn, reordered or lost. First the wrapper against a transport that records
what reaches it, then uvicorn served the way mcpkit serves, over real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

import pytest

from mcpkit.transports.server.http.coalesce import CoalescingTransport, coalescing_protocol

from .conftest import serving

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the wrapper is asyncio's (uvicorn's) transport API


class Recording(asyncio.Transport):
    """What reaches the wrapped transport: one entry per write call (its parts joined)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, bytes]] = []
        self.closing = False

    def write(self, data: Any) -> None:
        self.calls.append(("write", bytes(data)))

    def writelines(self, list_of_data: Iterable[Any]) -> None:
        self.calls.append(("writelines", b"".join(bytes(d) for d in list_of_data)))

    def close(self) -> None:
        self.calls.append(("close", b""))
        self.closing = True

    def abort(self) -> None:
        self.calls.append(("abort", b""))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    def get_write_buffer_size(self) -> int:
        return 7


async def next_turn() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


def wrap() -> tuple[CoalescingTransport, Recording]:
    inner = Recording()
    return CoalescingTransport(inner, asyncio.get_running_loop()), inner


async def test_a_head_and_its_body_in_one_turn_are_one_write() -> None:
    outer, inner = wrap()
    outer.write(b"HTTP/1.1 200 OK\r\n\r\n")
    outer.write(b'{"ok":true}')
    assert inner.calls == [("writelines", b'HTTP/1.1 200 OK\r\n\r\n{"ok":true}')]
    await next_turn()
    assert len(inner.calls) == 1  # the scheduled flush found nothing left


async def test_a_lone_write_goes_out_at_the_next_turn() -> None:
    outer, inner = wrap()
    outer.write(b"head")
    assert inner.calls == []
    assert outer.get_write_buffer_size() == len(b"head") + 7
    await next_turn()
    assert inner.calls == [("write", b"head")]


async def test_writes_keep_their_order_across_turns_and_bursts() -> None:
    outer, inner = wrap()
    outer.write(b"a")
    await next_turn()
    outer.write(b"b")
    outer.write(b"c")
    outer.write(b"d")  # held again after the pair went out
    outer.writelines([b"e", b"f"])  # the held write goes first
    outer.write(b"g")
    await next_turn()
    assert b"".join(data for _, data in inner.calls) == b"abcdefg"
    assert [kind for kind, _ in inner.calls] == [
        "write", "writelines", "write", "writelines", "write"]


async def test_close_sends_the_held_write_first_and_abort_drops_it() -> None:
    outer, inner = wrap()
    outer.write(b"last words")
    outer.close()
    assert inner.calls == [("write", b"last words"), ("close", b"")]

    outer, inner = wrap()
    outer.write(b"never sent")
    outer.abort()
    await next_turn()
    assert inner.calls == [("abort", b"")]


async def test_nothing_is_held_for_a_transport_already_closing() -> None:
    outer, inner = wrap()
    outer.write(b"held")
    inner.closing = True  # the peer went away before the flush
    await next_turn()
    assert inner.calls == []
    outer.write(b"late")  # reported (or dropped) by the transport itself, as unwrapped
    assert inner.calls == [("write", b"late")]


async def test_a_buffer_the_caller_reuses_is_copied() -> None:
    outer, inner = wrap()
    buffer = bytearray(b"first")
    outer.write(buffer)
    buffer[:] = b"XXXXX"
    await next_turn()
    assert inner.calls == [("write", b"first")]


def test_an_unknown_http_implementation_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown HTTP implementation 'h3'"):
        coalescing_protocol("h3")


# -- uvicorn, served the way mcpkit serves, over real sockets


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    assert scope["type"] == "http"
    while (await receive()).get("more_body"):
        pass
    if scope["path"] == "/stream":  # the head now, the body a while later
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"text/event-stream")]})
        await asyncio.sleep(1.0)
        await send({"type": "http.response.body", "body": b"data: late\n\n"})
        return
    body = b'{"answer":' + scope["path"][1:].encode() + b"}"
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


async def read_response(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length")))
    return head + await reader.readexactly(length)


def get(path: str) -> bytes:
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_a_served_response_is_one_write_on_a_kept_alive_connection(http: str) -> None:
    async with serving(app, http=http) as (server, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(get("/1"))
        assert (await read_response(reader)).endswith(b'{"answer":1}')
        (protocol,) = server.server_state.connections
        outer = protocol.transport
        assert isinstance(outer, CoalescingTransport)
        recording: list[int] = []
        real = outer._transport

        class Counting(asyncio.Transport):  # the socket's transport, its writes counted
            def write(self, data: Any) -> None:
                recording.append(1)
                real.write(data)

            def writelines(self, list_of_data: Iterable[Any]) -> None:
                recording.append(1)
                real.writelines(list_of_data)

            def is_closing(self) -> bool:
                return real.is_closing()

        outer._transport = Counting()
        try:
            for n in (2, 3):
                writer.write(get(f"/{n}"))
                response = await read_response(reader)
                assert response.startswith(b"HTTP/1.1 200 OK\r\n")
                assert response.endswith(b'{"answer":%d}' % n)
        finally:
            outer._transport = real
        assert len(recording) == 2  # one write each for two head-and-body responses
        writer.close()
        await writer.wait_closed()


@pytest.mark.parametrize("http", ["httptools", "h11"])
async def test_a_streamed_head_is_not_kept_waiting_for_its_body(http: str) -> None:
    async with serving(app, http=http) as (_, port):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(get("/stream"))
        async with asyncio.timeout(0.5):  # the body comes only after 1 s
            head = await reader.readuntil(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"text/event-stream" in head
        async with asyncio.timeout(5):
            assert b"data: late" in await reader.readuntil(b"late\n\n")
        writer.close()
        await writer.wait_closed()
