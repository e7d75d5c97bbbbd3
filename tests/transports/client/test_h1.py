"""The lean HTTP/1.1 client (`transports/client/h1.py`) against scripted servers on 127.0.0.1:
raw TCP servers that answer exactly the bytes a test gives them (framing, interim responses,
broken and malformed answers, idle closes), on asyncio and on uvloop, and an mcpkit server
reached through `Client.exchange`, which POSTs with it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from aiohttp.abc import AbstractResolver, ResolveResult
from tests.procs import serve_in_thread

from mcpkit import Client, Server
from mcpkit.netguard import GuardedResolver
from mcpkit.transports.client import h1
from mcpkit.transports.client.h1 import H1Client, H1Error

pytestmark = pytest.mark.anyio

OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}"


@pytest.fixture(params=["asyncio", "uvloop"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    if request.param == "uvloop":
        return ("asyncio", {"use_uvloop": True})
    return "asyncio"


class Script:
    """A TCP server on 127.0.0.1 that reads each request (head + Content-Length body) and
    writes what `answer(connection_number, request_number)` returns: bytes, or a callable
    writing the answer itself (to pace it or cut the connection)."""

    def __init__(self, answer: Callable[[int, int], Any]) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.closed_by_client = 0
        self.port = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        number = self.connections
        served = 0
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                self.requests.append(head + body)
                served += 1
                reply = self.answer(number, served)
                if callable(reply):
                    if await reply(writer) is False:
                        return
                else:
                    writer.write(reply)
                    await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_client += 1
        finally:
            writer.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp?task=1"


@asynccontextmanager
async def scripted(answer: Callable[[int, int], Any]) -> AsyncIterator[Script]:
    script = Script(answer)
    server = await asyncio.start_server(script.handle, "127.0.0.1", 0)
    script.port = server.sockets[0].getsockname()[1]
    try:
        yield script
    finally:
        server.close()


async def post(client: H1Client, body: bytes = b"{}", limit: int = 1 << 20) -> tuple[int, bytes]:
    response = await client.post(body, {"Content-Type": "application/json"})
    try:
        data = await response.read(limit)
    except BaseException:
        response.close()
        raise
    response.release()
    return response.status, data


async def test_a_json_answer_and_the_connection_is_kept_for_the_next_post() -> None:
    async with scripted(lambda conn, req: OK) as script:
        client = H1Client(script.url)
        for _ in range(3):
            assert await post(client, b'{"a":1}') == (200, b'{"ok":true}')
        await client.close()
    assert script.connections == 1
    first = script.requests[0]
    assert first.startswith(b"POST /mcp?task=1 HTTP/1.1\r\n")
    assert f"Host: 127.0.0.1:{script.port}\r\n".encode() in first
    assert b"Content-Type: application/json\r\n" in first
    assert first.endswith(b"Content-Length: 7\r\n\r\n{\"a\":1}")


async def test_the_response_head_is_read_case_insensitively() -> None:
    answer = (b"HTTP/1.1 404 Not Found\r\ncontent-type: Application/JSON; charset=utf-8\r\n"
              b"MCP-Session-Id: abc\r\nContent-Length: 2\r\n\r\n{}")
    async with scripted(lambda conn, req: answer) as script:
        client = H1Client(script.url)
        response = await client.post(b"{}", {})
        assert response.status == 404
        assert response.content_type == "application/json"
        assert response.headers["mcp-session-id"] == "abc"
        assert response.content_length == 2
        assert await response.read(10) == b"{}"
        response.release()
        await client.close()


async def test_a_chunked_body_streams_as_it_comes() -> None:
    release = asyncio.Event()

    async def paced(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"7\r\nsecond\n\r\n0\r\n\r\n")
        await writer.drain()

    async with scripted(lambda conn, req: paced) as script:
        client = H1Client(script.url)
        response = await client.post(b"{}", {})
        chunks = response.content.iter_any()
        assert await chunks.__anext__() == b"first\n"  # before the rest is even written
        release.set()
        assert b"".join([chunk async for chunk in chunks]) == b"second\n"
        response.release()
        assert await post(client) == (200, b"first\nsecond\n")  # same connection, reused
        await client.close()
    assert script.connections == 1


async def test_a_body_that_ends_with_the_connection() -> None:
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n[1,2]"

    async def until_close(writer: asyncio.StreamWriter) -> bool:
        writer.write(answer)
        await writer.drain()
        return False  # the server closes the connection: that ends the body

    async with scripted(lambda conn, req: until_close) as script:
        client = H1Client(script.url)
        assert await post(client) == (200, b"[1,2]")
        assert await post(client) == (200, b"[1,2]")
        await client.close()
    assert script.connections == 2  # never reused


async def test_interim_responses_are_skipped() -> None:
    answer = (b"HTTP/1.1 100 Continue\r\n\r\n"
              b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n" + OK)
    async with scripted(lambda conn, req: answer) as script:
        client = H1Client(script.url)
        response = await client.post(b"{}", {})
        assert response.status == 200
        assert "Link" not in response.headers
        assert await response.read(100) == b'{"ok":true}'
        response.release()
        assert await post(client) == (200, b'{"ok":true}')
        await client.close()


@pytest.mark.parametrize("answer, reason", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{\"short\"", "closed before the response"),
    (b"SMTP ready\r\n\r\n", "malformed HTTP response"),
    (b"", "closed before the response"),
])
async def test_a_broken_or_foreign_answer_is_an_h1_error(answer: bytes, reason: str) -> None:
    async def once(writer: asyncio.StreamWriter) -> bool:
        writer.write(answer)
        await writer.drain()
        return False

    async with scripted(lambda conn, req: once if conn == 1 else OK) as script:
        client = H1Client(script.url)
        with pytest.raises(H1Error, match=reason):
            await post(client)
        assert await post(client) == (200, b'{"ok":true}')  # on a new connection
        await client.close()


async def test_an_oversized_head_and_an_oversized_body_are_refused() -> None:
    huge_head = b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * (h1.MAX_HEAD_BYTES + 10) + b"\r\n\r\n"
    big_body = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000
    endless = b"HTTP/1.1 200 OK\r\nX-Endless: " + b"a" * (h1.MAX_HEAD_BYTES * 2)  # no CRLF
    answers = {1: huge_head, 2: big_body, 3: endless, 4: OK}
    async with scripted(lambda conn, req: answers[conn]) as script:
        client = H1Client(script.url)
        with pytest.raises(H1Error, match="headers exceed"):
            await post(client)
        with pytest.raises(H1Error, match="exceeds 1000 bytes"):
            await post(client, limit=1000)
        with pytest.raises(H1Error, match="headers exceed"):
            await post(client)
        assert await post(client) == (200, b'{"ok":true}')  # each failure dropped its connection
        await client.close()
    assert script.connections == 4


async def test_a_connection_the_server_closed_while_idle_is_not_used_again() -> None:
    async def then_close(writer: asyncio.StreamWriter) -> bool:
        writer.write(OK)  # keep-alive by default, yet the server hangs up right after
        await writer.drain()
        return False

    async with scripted(lambda conn, req: then_close if conn == 1 else OK) as script:
        client = H1Client(script.url)
        assert await post(client) == (200, b'{"ok":true}')
        await anyio.sleep(0.2)  # the FIN arrives while the connection is idle in the pool
        assert await post(client) == (200, b'{"ok":true}')
        await client.close()
    assert script.connections == 2


async def test_idle_connections_expire() -> None:
    async with scripted(lambda conn, req: OK) as script:
        client = H1Client(script.url, idle_s=0.1)
        assert await post(client) == (200, b'{"ok":true}')
        await anyio.sleep(0.3)
        assert await post(client) == (200, b'{"ok":true}')
        await client.close()
    assert script.connections == 2


async def test_cancelling_a_post_drops_its_connection() -> None:
    async def never(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)

    async with scripted(lambda conn, req: never if conn == 1 else OK) as script:
        client = H1Client(script.url)
        with anyio.move_on_after(0.3) as scope:
            await post(client)
        assert scope.cancelled_caught
        assert await post(client) == (200, b'{"ok":true}')
        await client.close()
        for _ in range(50):
            if script.closed_by_client:
                break
            await anyio.sleep(0.02)
    assert script.connections == 2
    assert script.closed_by_client >= 1  # the server saw the abandoned POST go


async def test_no_server_is_an_h1_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = H1Client(f"http://127.0.0.1:{port}/mcp", connect_timeout=2)
    with pytest.raises(H1Error, match="cannot connect"):
        await post(client)


class SlowResolver(AbstractResolver):
    async def resolve(self, host: str, port: int = 0,
                      family: socket.AddressFamily = socket.AF_INET) -> list[ResolveResult]:
        await anyio.sleep(10)
        return []

    async def close(self) -> None:
        pass


async def test_the_resolver_is_asked_at_connect_and_bounded_by_the_connect_timeout() -> None:
    async with scripted(lambda conn, req: OK) as script:
        guarded = H1Client(script.url, resolver=GuardedResolver(allow_private=False))
        with pytest.raises(H1Error, match="loopback"):
            await post(guarded)
        allowed = H1Client(script.url, resolver=GuardedResolver(allow_private=True))
        assert await post(allowed) == (200, b'{"ok":true}')
        await allowed.close()
        slow = H1Client(script.url, resolver=SlowResolver(), connect_timeout=0.3)
        with pytest.raises(H1Error, match=r"longer than 0\.3 s"):
            await post(slow)


async def test_headers_cannot_smuggle_lines_or_framing() -> None:
    async with scripted(lambda conn, req: OK) as script:
        client = H1Client(script.url)
        with pytest.raises(ValueError, match="line break"):
            await client.post(b"{}", {"X-Evil": "a\r\nContent-Length: 0"})
        assert await client.post(b"{}", {"Content-Length": "999", "Host": "elsewhere"})
        await client.close()
    assert b"Content-Length: 999" not in script.requests[0]
    assert b"Host: elsewhere" not in script.requests[0]


async def test_not_an_http_url() -> None:
    with pytest.raises(ValueError, match="not an http"):
        H1Client("ws://127.0.0.1:1/mcp")


async def test_client_exchange_posts_with_it_against_an_mcpkit_server() -> None:
    server = Server("h1-test")

    @server.tool()
    async def echo(text: str) -> str:
        """Say it back."""
        return text

    with serve_in_thread(server.asgi_app()) as base:
        async with Client(f"{base}/mcp", era="modern") as client:
            assert client.can_exchange
            for i in range(20):
                result = await client.exchange("tools/call",
                                               {"name": "echo", "arguments": {"text": f"t{i}"}})
                assert result["content"][0]["text"] == f"t{i}"
            async with anyio.create_task_group() as tg:
                for i in range(10):
                    tg.start_soon(client.exchange, "tools/call",
                                  {"name": "echo", "arguments": {"text": str(i)}})
