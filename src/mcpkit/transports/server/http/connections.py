"""Connection limits for uvicorn: a cap on open connections, and time limits on reading a
request (slowloris).

uvicorn (0.54) never times out a connection while it sends a request: a connection that
sends nothing after connecting, or a header line every few seconds, or a body a byte at a
time, is kept for ever (its keep-alive timer only runs between requests). A few hundred such
sockets hold every file descriptor the process may open, and then nobody is served.

`guarded_protocol(base, limits)` subclasses uvicorn's HTTP protocol class (as
`coalesce.coalescing_protocol` does) to add, per server:

- **head timeout**: a request's line and headers must be in within `header_timeout_s` of
  the connection opening or of the previous response ending (so it also bounds keep-alive
  idling, which uvicorn's own `timeout_keep_alive` usually ends first);
- **body timeout**: its body within `body_timeout_s` of the head.
  Past either the client gets 408 (when no response has begun) and the connection is closed.
- **connection cap**: at most `max_connections` at once (lowered to fit the process's file
  descriptor limit, keeping `FD_RESERVE` for files, pipes and upstream connections). A new
  connection past the cap takes the place of the connection that has waited longest for a
  request head (idle or slow: a slowloris socket, never a request being answered); when
  every connection is busy with a request, the new one is refused at once - 503 with
  `Retry-After` and a JSON-RPC error body - instead of waiting unanswered.

The time limits are checked by one ticker per server every `tick_s` (a timer per connection
would cost CPU on every request, see late_start.py), so a limit is enforced up to a tick
after it passes. A connection's phase is read from uvicorn's protocol: `cycle` (the
current request, replaced when the next request's head has been parsed), `cycle.more_body`
(its body is not all in yet) and `cycle.response_complete`; both of uvicorn's HTTP/1.1
implementations (httptools, h11) keep them. A connection upgraded to WebSocket belongs to
uvicorn's WebSocket protocol from then on: it still counts towards the cap, and that
protocol's pings time it out.
"""

from __future__ import annotations

import asyncio
import enum
import math
from dataclasses import dataclass
from typing import Any

from mcpkit.protocol import errors, jsonrpc

DEFAULT_MAX_CONNECTIONS = 1000
DEFAULT_HEADER_TIMEOUT_S = 10.0
DEFAULT_BODY_TIMEOUT_S = 30.0
FD_RESERVE = 128
"""File descriptors kept for everything but client connections (the cap is lowered to the
process's limit minus these)."""
MIN_CONNECTIONS = 8
REFUSED_LINGER_S = 0.5
"""A refused connection stays half-open this long, so the client reads its 503 before the
close (closing on unread request bytes would reset the connection and lose the answer)."""
MAX_LINGERING = 64
"""Refused connections left to linger at once; past this they are closed at once."""
RETRY_AFTER_S = 1


class LimitError(errors.LocalError):
    """A connection limit that cannot be used (not a positive number)."""

    def __init__(self, message: str) -> None:
        super().__init__(errors.INVALID_PARAMS, message)


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S

    def __post_init__(self) -> None:
        if isinstance(self.max_connections, bool) or not isinstance(self.max_connections, int) \
                or self.max_connections < 1:
            raise LimitError(f"max_connections must be a whole number above 0, "
                             f"not {self.max_connections!r}")
        for name in ("header_timeout_s", "body_timeout_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or \
                    not math.isfinite(value) or value <= 0:
                raise LimitError(f"{name} must be a number of seconds above 0, not {value!r}")

    def connection_cap(self) -> int:
        """`max_connections`, lowered to what the file descriptor limit leaves room for."""
        try:
            import resource
        except ImportError:  # not a Unix: no such limit to fit
            return self.max_connections
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft == resource.RLIM_INFINITY:
            return self.max_connections
        return max(MIN_CONNECTIONS, min(self.max_connections, soft - FD_RESERVE))

    @property
    def tick_s(self) -> float:
        return min(1.0, max(0.05, min(self.header_timeout_s, self.body_timeout_s) / 4))


class Phase(enum.Enum):
    HEAD = "head"  # waiting for a request's line and headers (or idle between requests)
    BODY = "body"  # the head is in, the body is not
    BUSY = "busy"  # the request is in: the app is answering it (no time limit here)


def _refusal() -> bytes:
    body = jsonrpc.encode_error(None, errors.McpError(
        errors.INTERNAL_ERROR, "too many connections: every connection is busy; try again"))
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
            b"retry-after: %d\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
            % (RETRY_AFTER_S, len(body), body))


def _timeout_response(phase: Phase) -> bytes:
    what = "headers" if phase is Phase.HEAD else "body"
    body = jsonrpc.encode_error(None, errors.invalid_request(
        f"the request's {what} did not arrive in time"))
    return (b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))


REFUSAL = _refusal()


class _Guard:
    """One server's connections (those still speaking HTTP/1.1) and its ticker."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self.cap = limits.connection_cap()
        self.watched: set[Any] = set()
        self.lingering = 0
        self.ticking = False
        self.timed_out = 0
        self.evicted = 0
        self.refused = 0

    def watch(self, conn: Any, loop: asyncio.AbstractEventLoop) -> None:
        self.watched.add(conn)
        if not self.ticking:
            self.ticking = True
            loop.call_later(self.limits.tick_s, self.tick, loop)

    def tick(self, loop: asyncio.AbstractEventLoop) -> None:
        now = loop.time()
        for conn in list(self.watched):
            if not conn.guard_alive():
                self.watched.discard(conn)
                continue
            phase, since = conn.guard_phase(now)
            limit = (self.limits.header_timeout_s if phase is Phase.HEAD else
                     self.limits.body_timeout_s if phase is Phase.BODY else None)
            if limit is not None and now - since > limit:
                self.watched.discard(conn)
                self.timed_out += 1
                conn.guard_time_out(phase)
        self.ticking = bool(self.watched)
        if self.ticking:
            loop.call_later(self.limits.tick_s, self.tick, loop)

    def evict_one(self, now: float) -> bool:
        """Close the connection that has waited longest for a request head; False if every
        connection is busy with a request."""
        oldest: Any = None
        oldest_since = math.inf
        for conn in self.watched:
            if not conn.guard_alive():
                continue
            phase, since = conn.guard_phase(now)
            if phase is Phase.HEAD and since < oldest_since:
                oldest, oldest_since = conn, since
        if oldest is None:
            return False
        self.watched.discard(oldest)
        self.evicted += 1
        oldest.transport.abort()
        return True


def guarded_protocol(base: type[Any], limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class `base` (possibly already wrapped) with `limits` (see
    the module docstring). Each call makes one server's worth of state."""
    guard = _Guard(limits)

    class GuardedHttpProtocol(base):  # type: ignore[misc]
        guard_state = guard

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            loop = asyncio.get_running_loop()
            now = loop.time()
            self._guard_refused = False
            self._guard_cycle: Any = None
            self._guard_since = now
            self._guard_done = False
            if len(self.connections) >= guard.cap and not guard.evict_one(now):
                self._refuse(transport, loop)
                return
            super().connection_made(transport)
            guard.watch(self, loop)

        def _refuse(self, transport: asyncio.BaseTransport, loop: asyncio.AbstractEventLoop
                    ) -> None:
            self._guard_refused = True
            guard.refused += 1
            stream: Any = transport
            stream.write(REFUSAL)
            if guard.lingering >= MAX_LINGERING or not stream.can_write_eof():
                stream.close()
                return
            guard.lingering += 1
            self._guard_lingering = True
            stream.write_eof()
            loop.call_later(REFUSED_LINGER_S, stream.close)

        def data_received(self, data: bytes) -> None:
            if self._guard_refused:
                return  # the request of a refused connection: already answered 503
            super().data_received(data)

        def eof_received(self) -> bool | None:
            if self._guard_refused:
                return False
            result: bool | None = super().eof_received()
            return result

        def connection_lost(self, exc: Exception | None) -> None:
            if self._guard_refused:
                if getattr(self, "_guard_lingering", False):
                    self._guard_lingering = False
                    guard.lingering -= 1
                return
            guard.watched.discard(self)
            super().connection_lost(exc)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._guard_done = True
            self._guard_since = asyncio.get_running_loop().time()

        # -- what the guard reads

        def guard_alive(self) -> bool:
            transport = self.transport
            return (transport is not None and not transport.is_closing()
                    and transport.get_protocol() is self)

        def guard_phase(self, now: float) -> tuple[Phase, float]:
            """The connection's phase and since when (loop time) it has been in it."""
            cycle = self.cycle
            if cycle is not self._guard_cycle:  # a new request's head is in
                self._guard_cycle = cycle
                self._guard_since = now
                self._guard_done = False
            if cycle is None or cycle.response_complete:
                if not self._guard_done:  # the response ended before we saw this cycle
                    self._guard_done = True
                    self._guard_since = now
                return Phase.HEAD, self._guard_since
            return (Phase.BODY if cycle.more_body else Phase.BUSY), self._guard_since

        def guard_time_out(self, phase: Phase) -> None:
            cycle = self.cycle
            if cycle is None or cycle.response_complete or not cycle.response_started:
                self.transport.write(_timeout_response(phase))
            if cycle is not None and not cycle.response_complete:
                # As uvicorn does when the peer leaves: the app's `receive` gets
                # http.disconnect and what it sends now goes nowhere.
                cycle.disconnected = True
                cycle.message_event.set()
            self.transport.close()

    return GuardedHttpProtocol
