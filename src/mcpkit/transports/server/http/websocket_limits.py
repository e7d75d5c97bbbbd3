"""Byte limits on WebSocket messages being received, for uvicorn.

uvicorn reads a WebSocket message whole before the app sees it, up to its `ws_max_size`
(16 MiB by default): the app's own limit (`McpAsgiApp.max_body_bytes`, 4 MiB) came too late
to save the memory, and nothing bounded the bytes of all the messages being received at once
- sixteen clients each sending 15 MiB took the server from 35 to 322 MiB.

- `serve.uvicorn_config` sets uvicorn's `ws_max_size` to `max_message_bytes`: a message
  whose frame announces more is refused from its header, before its payload is read (close
  1009, "message too big").
- `budgeted_ws_protocol(limits)` subclasses uvicorn's WebSocket protocol (websockets'
  sans-I/O one, uvicorn's choice when websockets is installed) to charge every
  connection's bytes of the message it is receiving - the wire bytes and, with
  permessage-deflate, the inflated frames - to one budget per server
  (`max_in_flight_bytes`), paid back once the message is handed to the app or the
  connection ends. A connection whose next bytes do not fit is closed with 1013 ("try again
  later"); the others go on.

(The HTTP side's `asgi.BodyBudget` bounds request bodies the same way.)
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from mcpkit.protocol import errors
from mcpkit.transports.server.http.asgi import BodyBudget

DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""Bytes of one WebSocket message (= the app's `DEFAULT_MAX_BODY_BYTES`)."""
DEFAULT_MAX_IN_FLIGHT_BYTES = 64 * 1024 * 1024
"""Bytes of WebSocket messages being received at once, over every connection."""
CLOSE_TRY_AGAIN_LATER = 1013
REFUSED_LINGER_S = 0.5
"""A refused connection stays half-open this long, so the client reads the close frame."""


class WebSocketLimitError(errors.LocalError):
    """A WebSocket limit that cannot be used (not a positive whole number)."""

    def __init__(self, message: str) -> None:
        super().__init__(errors.INVALID_PARAMS, message)


@dataclass(frozen=True, slots=True)
class WebSocketLimits:
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_in_flight_bytes: int = DEFAULT_MAX_IN_FLIGHT_BYTES

    def __post_init__(self) -> None:
        for name in ("max_message_bytes", "max_in_flight_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise WebSocketLimitError(
                    f"{name} must be a whole number above 0, not {value!r}")


def budgeted_ws_protocol(limits: WebSocketLimits) -> type[asyncio.Protocol] | None:
    """uvicorn's WebSocket protocol class charging messages being received to one budget
    of `limits.max_in_flight_bytes` (one per call: one server's); None when websockets is
    not installed (uvicorn then picks wsproto, bounded by `ws_max_size` alone)."""
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import (
            WebSocketsSansIOProtocol,
        )
    except ImportError:  # pragma: no cover - websockets is a dependency of uvicorn[standard]
        return None
    budget = BodyBudget(limits.max_in_flight_bytes)

    class BudgetedWebSocketProtocol(WebSocketsSansIOProtocol):
        budget_state = budget

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self._charged = 0  # bytes of the message being received, charged to `budget`
            self._over_budget = False
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            if self._over_budget:
                return  # closing: what still arrives is dropped unread
            if not self._charge(len(data)):
                self._refuse()
                return
            super().data_received(data)
            if self._frame_refused():  # an inflated frame did not fit
                self._refuse()

        def handle_text(self, event: Any) -> None:
            self._charge_frame(len(event.data))
            super().handle_text(event)

        def handle_bytes(self, event: Any) -> None:
            self._charge_frame(len(event.data))
            super().handle_bytes(event)

        def handle_cont(self, event: Any) -> None:
            self._charge_frame(len(event.data))
            super().handle_cont(event)

        def send_receive_event_to_app(self) -> None:
            self._release()  # the app has the message (and reading pauses until it takes it)
            super().send_receive_event_to_app()

        def connection_lost(self, exc: Exception | None) -> None:
            self._release()
            super().connection_lost(exc)

        def _charge(self, size: int) -> bool:
            if not budget.take(size):
                return False
            self._charged += size
            return True

        def _charge_frame(self, size: int) -> None:
            if not self._over_budget and not self._charge(size):
                self._over_budget = True

        def _frame_refused(self) -> bool:
            return self._over_budget

        def _release(self) -> None:
            budget.give_back(self._charged)
            self._charged = 0

        def _refuse(self) -> None:
            self._over_budget = True
            self._release()
            transport = self.transport
            if transport.is_closing():
                return
            if not self.handshake_complete:
                transport.close()
                return
            self.conn.fail(CLOSE_TRY_AGAIN_LATER, "the server is receiving too many "
                           "WebSocket bytes at once; try again later")
            self.queue.put_nowait({"type": "websocket.disconnect", "code": CLOSE_TRY_AGAIN_LATER})
            transport.write(b"".join(self.conn.data_to_send()))
            self.close_sent = True
            # Half-close and linger: closing on unread bytes would reset the connection and
            # lose the close frame; what arrives meanwhile is dropped unread.
            if transport.can_write_eof():
                transport.write_eof()
                asyncio.get_running_loop().call_later(REFUSED_LINGER_S, transport.close)
            else:
                transport.close()

    return BudgetedWebSocketProtocol
