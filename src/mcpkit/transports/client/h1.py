"""A lean HTTP/1.1 client for one endpoint: POST a body, read the answer as it arrives.

    client = H1Client("http://127.0.0.1:8000/mcp", connect_timeout=10.0)
    response = await client.post(body, {"Content-Type": "application/json"})
    try:
        data = await response.read(limit)      # or: async for chunk in response.content.iter_any()
    finally:
        response.release()                     # back to the pool if the answer is complete
    await client.close()

Why not aiohttp, which the rest of the client uses: a forwarded request is one POST and one
answer, and aiohttp's general machinery (request and response objects, URL handling, cookie
jar, timers, payload writers) cost 190-220 µs of CPU per POST on the 2-vCPU machine the
benchmarks run on, against 50-60 µs for the same exchange over an asyncio protocol with
httptools (already a dependency through uvicorn) parsing the response. The hub makes one
such POST per call it forwards (`StreamableHttpTransport.exchange`), so that is most of
its own cost per call.

What it does: keep-alive connections (idle ones are reused newest first and closed after
`idle_s`, well under common server keep-alive timeouts), `http` and `https`, an optional
aiohttp resolver asked at every connect (the hub's SSRF guard re-checks addresses there),
bounded connects, response bodies by Content-Length, chunked or until close, streamed with
flow control (reading pauses while `HIGH_WATER` bytes wait), interim 1xx responses skipped.
What it does not: redirects, proxies, cookies, compression, HTTP/2, request retries (a POST
is never sent twice). Anything unusable - a refused or broken connection, a malformed or
oversized response head - raises `H1Error`, a `ConnectionError`.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import anyio
import httptools
from aiohttp.abc import AbstractResolver
from multidict import CIMultiDict, CIMultiDictProxy

from mcpkit.errors import InvalidArgument, TransportError

MAX_HEAD_BYTES = 64 * 1024
HIGH_WATER = 1024 * 1024
"""Bytes of body waiting to be read at which reading from the socket pauses."""
DEFAULT_IDLE_S = 2.0
DEFAULT_MAX_IDLE = 32
_OWN_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection"})


class H1Error(TransportError):
    """The exchange failed: no connection, a broken one, or a response that is not HTTP."""


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection: a request at a time, its response parsed as it comes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.lost = False
        self.idle_since = 0.0
        self._parser: Any = None
        self._error: BaseException | None = None
        self._head: asyncio.Future[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._body: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._head_bytes = 0
        self._head_fed = 0
        self._interim = False
        self._raw_headers: list[tuple[bytes, bytes]] = []
        self.status = 0
        self.complete = False
        self.keep_alive = False
        self.until_close = False

    # --- asyncio.Protocol -------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if self._parser is None:  # nothing asked: a server talking out of turn
            self._fail(H1Error("the server sent data without a request"))
            return
        try:
            self._parser.feed_data(data)
            if self._head is not None and not self._head.done():
                # Still in the head: bound what the parser buffers for a header it has not
                # finished (on_header only sees complete ones).
                self._head_fed += len(data)
                if self._head_fed > MAX_HEAD_BYTES:
                    self._fail(H1Error(f"response headers exceed {MAX_HEAD_BYTES} bytes"))
        except httptools.HttpParserUpgrade:
            self._fail(H1Error("the server switched protocols, which a POST never asks for"))
        except httptools.HttpParserCallbackError as exc:  # a limit a callback enforced
            cause = exc.__context__
            self._fail(cause if isinstance(cause, H1Error) else H1Error(str(exc)))
        except httptools.HttpParserError as exc:
            self._fail(H1Error(f"malformed HTTP response: {exc}"))

    def eof_received(self) -> bool:
        return False  # close our side too; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        if self._parser is None or self.complete:
            return
        if self._head is not None and self._head.done() and self.until_close and exc is None:
            self.complete = True  # a body delimited by the connection's end
            self._notify()
            return
        cause = f": {exc}" if exc is not None else ""
        self._fail(H1Error(f"the connection closed before the response ended{cause}"))

    # --- httptools callbacks ----------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > MAX_HEAD_BYTES:
            raise H1Error(f"response headers exceed {MAX_HEAD_BYTES} bytes")
        self._raw_headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if 100 <= status < 200:  # 100 Continue, 103 Early Hints: the real answer follows
            self._interim = True
            self._raw_headers = []
            return
        self.status = status
        delimited = False  # by a Content-Length or chunked encoding; else by the close
        for name, value in self._raw_headers:
            lowered = name.lower()
            if lowered == b"content-length" or (
                    lowered == b"transfer-encoding" and b"chunked" in value.lower()):
                delimited = True
                break
        self.until_close = not delimited
        if self._head is not None and not self._head.done():
            self._head.set_result(None)

    def on_body(self, body: bytes) -> None:
        self._body.append(body)
        self._buffered += len(body)
        if self._buffered >= HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._notify()

    def on_message_complete(self) -> None:
        if self._interim:
            self._interim = False
            self._head_bytes = 0
            return
        self.complete = True
        self.keep_alive = bool(self._parser.should_keep_alive())
        self._notify()

    # --- the client's side ------------------------------------------------------------------

    def start(self, request: bytes) -> asyncio.Future[None]:
        """Send `request`; the future completes when the response head is in."""
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self._parser = httptools.HttpResponseParser(self)
        self._head = loop.create_future()
        self._error = None
        self._body.clear()
        self._buffered = 0
        self._head_bytes = self._head_fed = 0
        self._interim = False
        self._raw_headers = []
        self.status = 0
        self.complete = self.keep_alive = self.until_close = False
        self.transport.write(request)
        return self._head

    def headers(self) -> CIMultiDictProxy[str]:
        return CIMultiDictProxy(CIMultiDict(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in self._raw_headers
        ))

    async def next_chunk(self) -> bytes | None:
        """The next piece of the body; None once it has all been read."""
        while True:
            if self._body:
                chunk = self._body.popleft()
                self._buffered -= len(chunk)
                if self._paused and self._buffered < HIGH_WATER // 4 and self.transport:
                    self._paused = False
                    self.transport.resume_reading()
                return chunk
            if self._error is not None:
                raise self._error
            if self.complete:
                return None
            self._wake = asyncio.get_running_loop().create_future()
            try:
                await self._wake
            finally:
                self._wake = None

    def reusable(self) -> bool:
        return (self.complete and self.keep_alive and not self._body and not self.lost
                and self._error is None)

    def close(self) -> None:
        self.lost = True
        if self.transport is not None:
            self.transport.close()

    def _notify(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        if self._head is not None and not self._head.done():
            self._head.set_exception(error)
            self._head.exception()  # retrieved here: the awaiting caller may be gone
        self._notify()
        self.close()


class _Content:
    """The body's reader, shaped like aiohttp's `StreamReader` where the transport reads it."""

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    async def iter_any(self) -> AsyncIterator[bytes]:
        while True:
            chunk = await self._connection.next_chunk()
            if chunk is None:
                return
            if chunk:
                yield chunk


class H1Response:
    """A response whose head is in and whose body streams: `read` it or iterate `content`,
    then `release` it (the connection goes back to the pool only if the body was read to its
    end) or `close` it (the connection is dropped: how a request is abandoned)."""

    def __init__(self, client: H1Client, connection: _Connection) -> None:
        self._client = client
        self._connection = connection
        self.status = connection.status
        self.headers = connection.headers()
        self.url = client.url
        self.content = _Content(connection)
        self._done = False

    @property
    def content_type(self) -> str:
        value = self.headers.get("Content-Type", "application/octet-stream")
        return value.split(";", 1)[0].strip().lower()

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        return int(value) if value is not None and value.strip().isdigit() else None

    async def read(self, limit: int) -> bytes:
        """The whole body; `H1Error` if it passes `limit` bytes (the connection is dropped)."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.content.iter_any():
            size += len(chunk)
            if size > limit:
                self.close()
                raise H1Error(f"the response body from {self.url} exceeds {limit} bytes")
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def release(self) -> None:
        if self._done:
            return
        self._done = True
        self._client._give_back(self._connection)

    def close(self) -> None:
        if self._done:
            return
        self._done = True
        self._connection.close()


class H1Client:
    """Keep-alive HTTP/1.1 connections to the endpoint `url` (see the module docstring)."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: float = 10.0,
        resolver: AbstractResolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        idle_s: float = DEFAULT_IDLE_S,
        max_idle: int = DEFAULT_MAX_IDLE,
        user_agent: str = "mcpkit",
    ) -> None:
        try:  # urlsplit and .port raise ValueError for a malformed URL or port
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise InvalidArgument(f"{url!r} is not a valid URL: {exc}") from exc
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise InvalidArgument(f"not an http(s) URL: {url!r}")
        self.url = url
        self.host = parts.hostname
        self.port = port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = None
        if parts.scheme == "https":
            self.ssl = ssl_context or ssl.create_default_context()
        self.connect_timeout = connect_timeout
        self.resolver = resolver
        self.idle_s = idle_s
        self.max_idle = max_idle
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        default_port = 443 if parts.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        authority = host if self.port == default_port else f"{host}:{self.port}"
        self._request_line = (f"POST {target} HTTP/1.1\r\nHost: {authority}\r\n"
                              f"User-Agent: {user_agent}\r\n").encode("latin-1")
        self._idle: list[_Connection] = []
        self._closed = False

    async def post(self, body: bytes, headers: Mapping[str, str] | Iterable[tuple[str, str]]
                   ) -> H1Response:
        """Send a POST of `body` with `headers` (Content-Length is added) and wait for the
        response head. Cancelling the caller drops the connection."""
        request = self._request_line + _header_block(headers, len(body)) + body
        connection = self._reuse() or await self._connect()
        head = connection.start(request)
        try:
            await head
        except BaseException:
            connection.close()
            raise
        return H1Response(self, connection)

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # --- the pool ----------------------------------------------------------------------------

    def _reuse(self) -> _Connection | None:
        now = time.monotonic()
        while self._idle:
            connection = self._idle.pop()
            if not connection.lost and now - connection.idle_since < self.idle_s:
                return connection
            connection.close()
        return None

    def _give_back(self, connection: _Connection) -> None:
        if self._closed or not connection.reusable() or len(self._idle) >= self.max_idle:
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self._prune(connection.idle_since)
        self._idle.append(connection)

    def _prune(self, now: float) -> None:
        """Close idle connections past `idle_s` (the oldest are first in the list)."""
        stale = 0
        for connection in self._idle:
            if not connection.lost and now - connection.idle_since < self.idle_s:
                break
            connection.close()
            stale += 1
        if stale:
            del self._idle[:stale]

    async def _connect(self) -> _Connection:
        if self._closed:
            raise H1Error(f"the client of {self.url} is closed")
        loop = asyncio.get_running_loop()
        try:
            with anyio.fail_after(self.connect_timeout):
                addresses = await self._addresses()
                last: BaseException | None = None
                for address in addresses:
                    try:
                        _, connection = await loop.create_connection(
                            _Connection, address, self.port, ssl=self.ssl,
                            server_hostname=self.host if self.ssl is not None else None)
                        return connection
                    except OSError as exc:
                        last = exc
                raise last or OSError(f"{self.host} resolved to no address")
        except TimeoutError:
            raise H1Error(f"connecting to {self.url} took longer than "
                          f"{self.connect_timeout:g} s") from None
        except H1Error:
            raise
        except OSError as exc:
            raise H1Error(f"cannot connect to {self.url}: {exc}") from exc

    async def _addresses(self) -> list[str]:
        if self.resolver is None:
            return [self.host]
        results = await self.resolver.resolve(self.host, self.port, socket.AF_UNSPEC)
        return [result["host"] for result in results]


def _header_block(headers: Mapping[str, str] | Iterable[tuple[str, str]], length: int) -> bytes:
    items = headers.items() if isinstance(headers, Mapping) else headers
    lines = []
    for name, value in items:
        if name.lower() in _OWN_HEADERS:
            continue  # framing is this client's: a caller's copy could split the request
        if "\r" in value or "\n" in value or "\r" in name or "\n" in name or ":" in name:
            raise InvalidArgument(f"header {name!r} has a line break or a colon where it may not")
        lines.append(f"{name}: {value}\r\n")
    lines.append(f"Content-Length: {length}\r\n\r\n")
    return "".join(lines).encode("latin-1")


__all__ = ["H1Client", "H1Error", "H1Response"]
