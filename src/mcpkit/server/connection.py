"""What the server knows about one peer connection: its legacy session (if any), the
requests it has in flight, and the server→client requests awaiting answers.

A stdio process is one connection; a legacy Streamable HTTP session is one connection; a
modern HTTP request gets a throwaway connection of its own (modern requests share nothing).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from mcpkit.auth.resource import AuthInfo
from mcpkit.protocol import errors, jsonrpc

DEFAULT_CLIENT_REQUEST_TIMEOUT_S = 300.0
DEFAULT_MAX_SUBSCRIPTIONS = 128
"""Resources one legacy session may be subscribed to at once (`resources/subscribe`)."""
DEFAULT_MAX_SUBSCRIPTION_URI_CHARS = 2048
"""The longest URI a session may subscribe to (subscriptions are kept for its whole life)."""


class Channel(Protocol):
    """Where messages go: the stream of one request, or a connection's standalone stream."""

    async def send(self, message: bytes) -> None: ...


@dataclass(slots=True)
class LegacySession:
    """The state `initialize` negotiated for a legacy (2024-11-05 … 2025-11-25) session."""

    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any]
    initialized: bool = False
    log_level: str | None = "info"
    subscriptions: set[str] = field(default_factory=set)


class _Slot:
    __slots__ = ("event", "response")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.response: jsonrpc.Response | jsonrpc.ErrorResponse | None = None


class Connection:
    """One peer as the server sees it."""

    def __init__(
        self,
        outbound: Channel | None = None,
        *,
        session_id: str | None = None,
        principal: str = "",
        caller: str | None = None,
        auth: AuthInfo | None = None,
    ) -> None:
        self.session_id = session_id
        self.principal = principal  # who is on the other end (see transports/server/http/app.py)
        self.auth = auth
        """The verified OAuth caller of a connection authorized once for its whole life (a
        WebSocket's handshake); requests that carry their own token pass theirs to `admit`."""
        self.outbound = outbound
        self.legacy: LegacySession | None = None
        self.in_flight: dict[jsonrpc.RequestId, anyio.CancelScope] = {}
        self.caller = caller  # whose quota its requests draw on (admission.py); None: its own
        self.running = 0  # requests admitted and not yet answered (admission.py)
        self.running_bytes = 0  # their params' footprint (admission.py)
        self._reserved: dict[jsonrpc.RequestId, anyio.CancelScope] = {}
        self._pending: dict[jsonrpc.RequestId, _Slot] = {}
        self._ids = itertools.count(1)
        self.closed = False

    async def request(
        self,
        method: str,
        params: Any,
        channel: Channel,
        timeout_s: float = DEFAULT_CLIENT_REQUEST_TIMEOUT_S,
    ) -> Any:
        """Send a server→client request on `channel` and wait for the client's answer."""
        if self.closed:
            raise errors.McpError(errors.INTERNAL_ERROR, "connection closed")
        request_id = f"s-{next(self._ids)}"
        slot = _Slot()
        self._pending[request_id] = slot
        try:
            await channel.send(jsonrpc.encode_request(request_id, method, params))
            with anyio.fail_after(timeout_s):
                await slot.event.wait()
        except TimeoutError:
            await self._tell_cancelled(channel, request_id, "timed out")
            raise errors.McpError(
                errors.INTERNAL_ERROR, f"client did not answer {method} within {timeout_s:g} s"
            ) from None
        except anyio.get_cancelled_exc_class():
            if not slot.event.is_set():
                await self._tell_cancelled(channel, request_id, "the request was cancelled")
            raise
        finally:
            self._pending.pop(request_id, None)
        response = slot.response
        if isinstance(response, jsonrpc.ErrorResponse):
            raise errors.McpError(response.code, response.message, response.data)
        if response is None:
            raise errors.McpError(errors.INTERNAL_ERROR, "connection closed")
        return jsonrpc.decode_value(response.result)

    async def _tell_cancelled(self, channel: Channel, request_id: str, reason: str) -> None:
        """The server gave up on its own request: tell the client (legacy sessions; the
        client stops the handler answering it). Bounded; best effort."""
        if self.closed:
            return
        message = jsonrpc.encode_notification(
            "notifications/cancelled", {"requestId": request_id, "reason": reason})
        with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
            try:
                await channel.send(message)
            except Exception:  # the stream may be gone already
                pass

    def resolve(self, response: jsonrpc.Response | jsonrpc.ErrorResponse) -> bool:
        """Deliver a client's response; False if no request of ours has that id."""
        if response.id is None:
            return False
        slot = self._pending.get(response.id)
        if slot is None:
            return False
        slot.response = response
        slot.event.set()
        return True

    def reserve(self, request_id: jsonrpc.RequestId) -> None:
        """A request was admitted and its task is yet to start: a cancellation read before
        it starts (the next line of the same read) is kept in its scope, not lost."""
        self._reserved[request_id] = anyio.CancelScope()

    def take_scope(self, request_id: jsonrpc.RequestId) -> anyio.CancelScope:
        """The cancel scope to run the request in (its reserved one, perhaps cancelled)."""
        return self._reserved.pop(request_id, None) or anyio.CancelScope()

    def unreserve(self, request_id: jsonrpc.RequestId) -> None:
        """The request's task ended (it may have been answered without running)."""
        self._reserved.pop(request_id, None)

    def cancel(self, request_id: Any) -> bool:
        scope = self.in_flight.get(request_id) or self._reserved.get(request_id)
        if scope is None:
            return False
        scope.cancel()
        return True

    def close(self) -> None:
        """Cancel what runs for this peer and fail what waits on it."""
        self.closed = True
        for scope in [*self.in_flight.values(), *self._reserved.values()]:
            scope.cancel()
        for slot in self._pending.values():
            slot.event.set()
