"""The WebSocket transport (ASGI `websocket` scope): one JSON-RPC message per text frame.

- The handshake must offer the subprotocol `mcp`; it is accepted with it. A handshake
  without it, or with an unacceptable Host/Origin, is denied (the server answers 403).
- One socket is one legacy session: its own `Connection`, whose outbound channel is the
  socket. Requests run concurrently; responses are sent as they complete.
- A binary frame closes the socket with 1003 (unsupported data); a text frame over
  `max_message_bytes` closes it with 1009 (message too big).
- The socket closing ends the session: what runs for it is cancelled.
- On a protected app the handshake presents the token (`resource_gate.py`; refused with the
  gate's 401/403 when the server supports ASGI denial responses, else a 403 close); the
  caller it verified is the socket's until it closes, or until its token expires: then the
  socket is closed with 1008 (policy violation), and the client reconnects with a fresh token.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from mcpkit.server.connection import Connection
from mcpkit.transports.server.http import asgi
from mcpkit.transports.server.http.asgi import Receive, Scope, Send
from mcpkit.transports.server.http.peers import caller_key
from mcpkit.transports.server.routing import error_reply, route

if TYPE_CHECKING:
    from mcpkit.transports.server.http.app import McpAsgiApp

log = logging.getLogger(__name__)

SUBPROTOCOL = "mcp"
CLOSE_NORMAL = 1000
CLOSE_PROTOCOL_ERROR = 1002
CLOSE_UNSUPPORTED_DATA = 1003
CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009


class WebSocketChannel:
    """Sends text frames on one socket, one whole message at a time."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = anyio.Lock()
        self.closed = False

    async def send(self, message: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("WebSocket closed")
        async with self._lock:
            await self._send({"type": "websocket.send", "text": message.decode("utf-8")})

    async def close(self, code: int, reason: str = "") -> None:
        if self.closed:
            return
        self.closed = True
        async with self._lock:
            try:
                await self._send({"type": "websocket.close", "code": code, "reason": reason})
            except (OSError, RuntimeError):
                log.debug("WebSocket already closed")


def _offered_subprotocols(scope: Scope) -> list[str]:
    return [str(p).strip() for p in scope.get("subprotocols") or ()]


class WebSocketTransport:
    def __init__(self, app: McpAsgiApp) -> None:
        self.app = app

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        first = await receive()
        if first["type"] != "websocket.connect":
            return
        hdrs = asgi.header_map(scope)
        guard = self.app.guard
        host_ok = guard.host_ok(hdrs.get("host")) and guard.origin_ok(hdrs.get("origin"))
        if not host_ok or SUBPROTOCOL not in _offered_subprotocols(scope):
            await send({"type": "websocket.close", "code": CLOSE_PROTOCOL_ERROR})
            return
        await send({"type": "websocket.accept", "subprotocol": SUBPROTOCOL})
        channel = WebSocketChannel(send)
        # The handshake's verified caller (app.PRINCIPAL_KEY / AUTH_KEY) is the socket's for
        # its whole life: frames carry no token.
        connection = Connection(channel, caller=caller_key(scope),
                                principal=str(scope.get("mcpkit.principal", "")),
                                auth=scope.get("mcpkit.auth"))
        engine = self.app.engine
        engine.open_session(connection)
        try:
            async with anyio.create_task_group() as tg:
                expires_at = getattr(connection.auth, "expires_at", None)
                if expires_at is not None:
                    tg.start_soon(_close_at_expiry, channel, float(expires_at), tg)
                await self._read(receive, channel, connection, tg)
                tg.cancel_scope.cancel()
        finally:
            connection.close()
            engine.close_session(connection)
            channel.closed = True

    async def _read(
        self, receive: Receive, channel: WebSocketChannel, connection: Connection, tg: TaskGroup
    ) -> None:
        limit = self.app.max_body_bytes
        while True:
            message = await receive()
            kind = message["type"]
            if kind == "websocket.disconnect":
                return
            if kind != "websocket.receive":
                continue
            text = message.get("text")
            if text is None:
                await channel.close(CLOSE_UNSUPPORTED_DATA, "binary frames are not supported")
                return
            # A text frame is valid UTF-8 by the protocol; should an ASGI server hand over
            # a lone surrogate anyway, it reaches the codec (-32700), not an exception here.
            data = text.encode("utf-8", "surrogatepass")
            if len(data) > limit:
                await channel.close(CLOSE_TOO_BIG, f"message exceeds {limit} bytes")
                return
            failure = route(
                self.app.engine,
                data,
                connection,
                channel,
                tg.start_soon,
                lambda reply: _reply(channel, reply),
            )
            if failure is not None and (reply := error_reply(failure)) is not None:
                await _reply(channel, reply)


async def _close_at_expiry(channel: WebSocketChannel, expires_at: float,
                           tg: TaskGroup) -> None:
    """A frame carries no token, so the handshake's token bounds the socket's life: at its
    expiry (wall clock, as the token's `exp`) the socket is closed and its work cancelled."""
    await anyio.sleep(max(0.0, expires_at - time.time()))
    await channel.close(CLOSE_POLICY, "the access token expired: reconnect with a fresh one")
    tg.cancel_scope.cancel()


async def _reply(channel: WebSocketChannel, reply: bytes) -> None:
    try:
        await channel.send(reply)
    except (ConnectionResetError, OSError, RuntimeError):
        log.debug("WebSocket closed; dropping a reply")
