"""The response stream of one POSTed request: JSON if the handler sends nothing before its
result, SSE as soon as it does (progress, logs, server→client requests).

Legacy streams are resumable: each event gets an id `<stream>.<seq>` and is kept in the
stream's `EventLog` (`replay.py`: bounded in bytes), so a client that lost the connection (or
that the server sent away with `close_connection`) can GET with `Last-Event-ID` and receive
the rest. A stream whose response was written and whose HTTP response then ended normally is
released shortly after (`EventLog.release_soon`): nothing of it is left to ask for. Modern
streams are neither primed nor resumable (2026-07-28 dropped resumption).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mcpkit.protocol import sse
from mcpkit.transports.server.http.asgi import Send, encode_headers
from mcpkit.transports.server.http.replay import EventLog

__all__ = ["DEFAULT_RETRY_MS", "SSE_HEADERS", "EventLog", "ResponseStream"]

log = logging.getLogger(__name__)

SSE_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache, no-transform",
    "x-accel-buffering": "no",
}
DEFAULT_RETRY_MS = 1000


class ResponseStream:
    """The `Channel` of one POST: where the engine's messages for that request go."""

    def __init__(
        self,
        send: Send,
        *,
        extra_headers: dict[str, str],
        log_factory: Callable[[], EventLog] | None,
        prime: bool,
        can_sse: bool,
    ) -> None:
        self._send = send
        self._headers = extra_headers
        self._log_factory = log_factory
        self.event_log: EventLog | None = None
        self._prime = prime
        self._can_sse = can_sse
        self.started = False
        self.connection_closed = False

    def _log(self) -> EventLog | None:
        if self.event_log is None and self._log_factory is not None:
            self.event_log = self._log_factory()
        return self.event_log

    async def send(self, message: bytes) -> None:
        event_log = self._log()
        if self.connection_closed:
            if event_log is not None:
                event_log.append(message)  # kept for the client's resume
            return
        if not self._can_sse:
            log.debug("client accepts no SSE; dropping a message sent before the result")
            return
        await self._start()
        event_id = event_log.append(message) if event_log is not None else None
        await self._body(sse.encode_event(message, id=event_id))

    async def finish(self, response: bytes | None, status: int = 200) -> None:
        """Send the final response (or end the stream if there is none)."""
        if self.event_log is not None and response is not None and self.started:
            event_id: str | None = self.event_log.append(response)
        else:
            event_id = None
        if self.event_log is not None:
            self.event_log.finish()
        if self.connection_closed:
            return
        if not self.started:
            await self._json(response, status)
        else:
            if response is not None:
                await self._body(sse.encode_event(response, id=event_id))
            await self._send({"type": "http.response.body", "body": b""})
            self.connection_closed = True
        if self.event_log is not None:
            self.event_log.release_soon()  # all of it was written: nothing left to resume

    async def close_connection(self, retry_ms: int | None = None) -> None:
        """End the HTTP response but not the stream (legacy SSE polling)."""
        if self.connection_closed or self._log() is None:
            return
        await self._start()
        await self._body(b"retry: %d\n\n" % (retry_ms or DEFAULT_RETRY_MS))
        await self._send({"type": "http.response.body", "body": b""})
        self.connection_closed = True

    def detach(self) -> None:
        """The client went away: keep logging, stop writing."""
        self.connection_closed = True

    async def _start(self) -> None:
        if self.started:
            return
        self.started = True
        headers = {**SSE_HEADERS, **self._headers}
        await self._send(
            {"type": "http.response.start", "status": 200, "headers": encode_headers(headers)}
        )
        event_log = self._log()
        if self._prime and event_log is not None:
            prime_id = event_log.reserve_id()
            await self._body(sse.encode_event(b"", id=prime_id, retry_ms=DEFAULT_RETRY_MS))

    async def _json(self, response: bytes | None, status: int) -> None:
        self.started = True
        body = response or b""
        headers: dict[str, Any] = {**self._headers, "content-length": str(len(body))}
        if response is not None:
            headers["content-type"] = "application/json"
        await self._send(
            {
                "type": "http.response.start",
                "status": status if response is not None else 202,
                "headers": encode_headers(headers),
            }
        )
        await self._send({"type": "http.response.body", "body": body})
        self.connection_closed = True

    async def _body(self, data: bytes) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": True})
