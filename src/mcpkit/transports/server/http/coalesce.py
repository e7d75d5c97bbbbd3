"""`CoalescingTransport`: a response's status line, headers and body leave in one write.

uvicorn writes a response's head when the app sends `http.response.start` and its body when
the app sends `http.response.body`: two `send` calls, two TCP segments, and a peer that may
wake up twice, for every JSON answer. Here the first write of a burst is held back; the
next write in the same turn of the event loop goes out together with it (one `writelines`,
one segment), and if none comes, the held bytes go out at the loop's next turn, so a head
followed by a body that comes later (an SSE stream) is delayed by one loop turn, no more.

Measured side by side with the old servers (hub_bench's processes, 1 in flight): the echo
server's CPU per call 5-22 % lower; calls/s within the runs' noise (bench/README.md).

`coalescing_protocol()` is uvicorn's HTTP protocol (httptools or h11) with its transport
wrapped; `serve.uvicorn_config` passes it as `uvicorn.Config(http=...)`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any, cast

from mcpkit.errors import InvalidArgument

Data = bytes | bytearray | memoryview


class CoalescingTransport(asyncio.Transport):
    """Wraps a stream transport. Invariant: at most one write is held, and whenever one is,
    a flush is scheduled on the loop. Every other method is the wrapped transport's, after
    the held write where order matters (`close`, `write_eof`)."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    # -- writing

    def write(self, data: Data) -> None:
        if not data:  # asyncio's transports ignore these too (h11 ends a body with one)
            return
        held = self._held
        if held is not None:
            self._held = None
            self._transport.writelines((held, data))
        elif self._transport.is_closing():
            self._transport.write(data)  # the transport reports (or drops) it as it does
        else:
            # bytes(): the caller may reuse a bytearray or view once write() returns.
            self._held = data if isinstance(data, bytes) else bytes(data)
            self._loop.call_soon(self._flush)

    def writelines(self, list_of_data: Iterable[Data]) -> None:
        self._flush()
        self._transport.writelines(list_of_data)

    def _flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():  # the peer left: nothing to send it to
                self._transport.write(held)

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def get_write_buffer_size(self) -> int:
        held = 0 if self._held is None else len(self._held)
        return held + self._transport.get_write_buffer_size()

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self._transport.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    # -- closing

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None  # abort discards what is buffered, this too
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    # -- the rest, unchanged

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()


def coalescing_protocol(http: str = "auto") -> type[asyncio.Protocol]:
    """uvicorn's HTTP/1.1 protocol class whose connections write through a
    `CoalescingTransport`. `http` is uvicorn's choice: "httptools", "h11", or "auto"
    (httptools when installed)."""
    base = _uvicorn_protocol(http)

    class CoalescingHttpProtocol(base):  # type: ignore[misc,valid-type]
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            stream = cast(asyncio.Transport, transport)  # uvicorn serves TCP/Unix streams
            super().connection_made(CoalescingTransport(stream, asyncio.get_running_loop()))

    return CoalescingHttpProtocol


def _uvicorn_protocol(http: str) -> type[Any]:
    if http == "httptools":
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

        return HttpToolsProtocol
    if http == "h11":
        from uvicorn.protocols.http.h11_impl import H11Protocol

        return H11Protocol
    if http == "auto":
        try:
            return _uvicorn_protocol("httptools")
        except ImportError:  # httptools is not installed
            return _uvicorn_protocol("h11")
    raise InvalidArgument(f"unknown HTTP implementation {http!r} (auto, httptools, h11)")
