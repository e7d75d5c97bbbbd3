"""Size limits on a request's head (request line and headers), for uvicorn.

uvicorn's httptools protocol keeps whatever a client sends before the blank line that ends
the headers: a request target of 100 MiB (copied whole on every chunk that extends it) or
a header of 100 MiB is held until the head timeout (`connections.py`) ends the connection,
and a few such connections hold hundreds of MiB. h11 caps the head itself
(`max_incomplete_event_size`, which `serve.uvicorn_config` sets to `max_head_bytes`).

`head_limited_protocol(base, limits)` subclasses uvicorn's HTTP protocol class (as
`coalesce.coalescing_protocol` does) so that, with httptools:

- a request target (path and query) over `max_url_bytes` gets **414 URI Too Long**;
- a head over `max_head_bytes` in all, or with more than `max_headers` header lines, gets
  **431 Request Header Fields Too Large**;

each with a JSON-RPC error body, and the connection is closed (what was read of the head
is dropped with it). Every other request on the server goes on.

A head's bytes are counted two ways, each never more than the head's real size, so no head
within the limit is refused: each read chunk that leaves the head still incomplete (all of
it is head), and, as each header line is parsed, the target and header lines so far. The
parser holds at most one read chunk past the limit before one of them refuses.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, NoReturn

from mcpkit.protocol import errors, jsonrpc

DEFAULT_MAX_URL_BYTES = 8 * 1024
"""Bytes of a request target (path and query string) - nginx's default line buffer."""
DEFAULT_MAX_HEAD_BYTES = 32 * 1024
"""Bytes of a request line and headers together (room for a large bearer token)."""
DEFAULT_MAX_HEADERS = 128
"""Header lines in one request."""
REFUSED_LINGER_S = 0.5
"""A refused connection stays half-open this long, so the client reads the refusal."""


class HeadLimitError(errors.LocalError):
    """A head limit that cannot be used (not a positive whole number)."""

    def __init__(self, message: str) -> None:
        super().__init__(errors.INVALID_PARAMS, message)


@dataclass(frozen=True, slots=True)
class HeadLimits:
    max_url_bytes: int = DEFAULT_MAX_URL_BYTES
    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES
    max_headers: int = DEFAULT_MAX_HEADERS

    def __post_init__(self) -> None:
        for name in ("max_url_bytes", "max_head_bytes", "max_headers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise HeadLimitError(f"{name} must be a whole number above 0, not {value!r}")


class _HeadRefused(Exception):
    """Raised from a parser callback to stop parsing a head that broke a limit."""


def refusal(status: int, message: str) -> bytes:
    """A whole HTTP/1.1 response refusing a request: `status`, a JSON-RPC error (-32600)."""
    reason = {414: b"URI Too Long", 431: b"Request Header Fields Too Large"}.get(status, b"")
    body = jsonrpc.encode_error(None, errors.invalid_request(message))
    return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (status, reason, len(body), body))


_REQUEST_LINE_FLOOR = b"GET  HTTP/1.1\r\n"
"""The fewest bytes a request line has besides its target."""


def _too_big(limits: HeadLimits) -> str:
    return f"the request's headers exceed {limits.max_head_bytes} bytes"


def head_limited_protocol(base: type[Any], limits: HeadLimits) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class `base` with `limits` on request heads when it parses
    with httptools (`base` has `on_url`); any other class is returned as it is."""
    if not hasattr(base, "on_url"):
        return base  # h11: its own max_incomplete_event_size bounds the head

    class HeadLimitedHttpProtocol(base):  # type: ignore[misc]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._head_open = True  # waiting for (or reading) a request's head
            self._head_bytes = 0  # raw bytes of chunks that were all head
            self._head_parsed = 0  # bytes of the header lines parsed so far
            self._head_lines = 0
            self._heads_begun = 0
            self._head_refusal: bytes | None = None
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            if self._head_refusal is not None:
                return  # answered already; the connection is closing
            begun = self._heads_begun
            super().data_received(data)
            if self._head_open and self._head_refusal is None and begun == self._heads_begun:
                # The head was open before this chunk and still is: the chunk is all head.
                self._head_bytes += len(data)
                if self._head_bytes > limits.max_head_bytes:
                    self._refuse_head(431, _too_big(limits))

        def on_message_begin(self) -> None:
            self._head_open = True
            self._head_bytes = 0
            self._head_parsed = len(_REQUEST_LINE_FLOOR)
            self._head_lines = 0
            self._heads_begun += 1
            super().on_message_begin()

        def on_url(self, url: bytes) -> None:
            if len(self.url) + len(url) > limits.max_url_bytes:
                self._head_refusal = refusal(
                    414, f"the request target exceeds {limits.max_url_bytes} bytes")
                raise _HeadRefused
            super().on_url(url)

        def on_header(self, name: bytes, value: bytes) -> None:
            # On every header of every request: kept to two additions and one test when all
            # is well (4 bytes a line for ": " and CRLF); the refusal is worked out apart.
            self._head_lines += 1
            self._head_parsed += len(name) + len(value) + 4
            if self._head_lines > limits.max_headers or \
                    len(self.url) + self._head_parsed > limits.max_head_bytes:
                self._refuse_in_parser(limits)
            super().on_header(name, value)

        def _refuse_in_parser(self, limits: HeadLimits) -> NoReturn:
            if self._head_lines > limits.max_headers:
                message = f"the request has more than {limits.max_headers} headers"
            else:
                message = _too_big(limits)
            self._head_refusal = refusal(431, message)
            raise _HeadRefused

        def on_headers_complete(self) -> None:
            self._head_open = False
            super().on_headers_complete()

        def send_400_response(self, msg: str) -> None:
            # httptools reports a callback's exception as a parse error, which uvicorn
            # answers with 400: the limit that stopped the parser answers instead.
            if self._head_refusal is not None:
                self._send_refusal()
            else:
                super().send_400_response(msg)

        def _refuse_head(self, status: int, message: str) -> None:
            self._head_refusal = refusal(status, message)
            self._send_refusal()

        def _send_refusal(self) -> None:
            assert self._head_refusal is not None
            self._head_open = False
            transport = self.transport
            transport.write(self._head_refusal)
            if not transport.can_write_eof():
                transport.close()
                return
            # Half-close and linger: closing on unread request bytes would reset the
            # connection and lose the answer; what arrives meanwhile is dropped unread.
            transport.write_eof()
            asyncio.get_running_loop().call_later(REFUSED_LINGER_S, transport.close)

    return HeadLimitedHttpProtocol
