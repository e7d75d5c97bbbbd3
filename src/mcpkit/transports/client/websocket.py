"""The WebSocket client transport, on aiohttp: subprotocol `mcp`, one JSON-RPC message per
frame (text frames are sent; text or binary frames are accepted).

A redirect of the handshake is refused (`RedirectRefused`), as every HTTP transport of the
client refuses them: following one would take the user's headers to wherever the server
points (aiohttp drops only `Authorization` on a change of origin).

With an `auth` (OAuth), the handshake carries its headers; a handshake answered 401/403 goes
to `auth.challenge()` and is tried again, at most `auth.max_attempts` times, as the HTTP
transports do for each POST (`authorized.py`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import SimpleNamespace
from typing import NoReturn

import aiohttp
import anyio
from aiohttp.abc import AbstractResolver
from anyio.abc import TaskGroup

from mcpkit.auth.provider import HttpAuth
from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client._aiohttp import (
    DEFAULT_MAX_MESSAGE_BYTES,
    NETWORK_ERRORS,
    common_headers,
    network_error,
    new_session,
)
from mcpkit.transports.client.authorized import authorized
from mcpkit.transports.client.base import (
    ConnectionClosed,
    HttpStatusError,
    Inbound,
    MessageTooLarge,
    Outgoing,
    RedirectRefused,
    TransportError,
)

log = logging.getLogger(__name__)

SUBPROTOCOL = "mcp"
CLOSE_TIMEOUT_S = 2.0


class WebSocketTransport:
    """A client's connection to an MCP server over one WebSocket."""

    kind = "websocket"
    per_request_streams = False

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        bearer_token: str | None = None,
        connect_timeout: float = 10.0,
        resolver: AbstractResolver | None = None,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        auth: HttpAuth | None = None,
    ) -> None:
        self.url = url
        self.auth = auth
        self._auth_headers: Mapping[str, str] = {}
        self.connect_timeout = connect_timeout
        self.resolver = resolver
        self.max_message_bytes = max_message_bytes
        self.protocol_version: str | None = None
        self._headers = common_headers(headers, bearer_token)
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: anyio.CancelScope | None = None
        self._send_lock = anyio.Lock()
        self._closed = False

    async def open(self, inbound: Inbound, task_group: TaskGroup) -> None:
        """Connect (bounded by `connect_timeout`); then frames are read in the background.
        Raises HttpStatusError for a refused handshake, TransportError otherwise."""
        if self._closed or self._http is not None:
            raise TransportError(f"the transport to {self.url} is already open or closed")
        self._http = http = new_session(self.connect_timeout, self.resolver,
                                        trace_configs=[_refusing_redirects()])
        try:
            await authorized(self.auth, self.url, lambda: self._connect_once(http),
                             self._use_auth_headers, method="GET")  # the handshake's
            ws = self._ws
            assert ws is not None
        except BaseException:
            with anyio.CancelScope(shield=True):
                await http.close()
            raise
        self._reader = anyio.CancelScope()
        task_group.start_soon(self._read, ws, inbound, self._reader)

    async def send(self, message: Outgoing) -> None:
        if self._closed:
            raise TransportError(f"the transport to {self.url} is closed")
        ws = self._ws
        if ws is None:
            raise TransportError(f"the transport to {self.url} is not open")
        if ws.closed:
            raise ConnectionClosed(f"the WebSocket to {self.url} is closed")
        try:
            async with self._send_lock:  # one whole frame at a time
                await ws.send_str(message.data.decode("utf-8"))
        except NETWORK_ERRORS as exc:
            raise ConnectionClosed(f"sending on the WebSocket to {self.url} failed: {exc}") from exc

    async def abandon(self, request_id: RequestId) -> None:
        """Nothing to close: answers share the socket (the session sends
        `notifications/cancelled`)."""

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_TIMEOUT_S):
            if self._ws is not None:
                try:
                    await self._ws.close()
                except NETWORK_ERRORS as exc:
                    log.debug("closing the WebSocket to %s: %s", self.url, exc)
            if self._http is not None:
                await self._http.close()

    def describe(self) -> str:
        return self.url

    # --- internals ---------------------------------------------------------------------------

    async def _connect_once(self, http: aiohttp.ClientSession) -> None:
        self._ws = await self._connect(http)

    def _use_auth_headers(self, headers: Mapping[str, str]) -> None:
        self._auth_headers = headers

    async def _connect(self, http: aiohttp.ClientSession) -> aiohttp.ClientWebSocketResponse:
        try:
            with anyio.fail_after(self.connect_timeout):
                ws = await http.ws_connect(
                    self.url,
                    protocols=(SUBPROTOCOL,),
                    headers={**self._headers, **self._auth_headers},
                    max_msg_size=self.max_message_bytes,
                    timeout=aiohttp.ClientWSTimeout(ws_close=CLOSE_TIMEOUT_S),
                )
        except _Redirected as exc:
            raise RedirectRefused(exc.status, exc.location, url=self.url) from None
        except aiohttp.WSServerHandshakeError as exc:
            hdrs = dict(exc.headers.items()) if exc.headers else {}
            error = HttpStatusError(exc.status, b"", hdrs, url=self.url)
            raise error from exc
        except NETWORK_ERRORS as exc:
            raise network_error("WebSocket connection to", self.url, exc) from exc
        if ws.protocol not in (None, SUBPROTOCOL):
            await ws.close()
            raise TransportError(f"{self.url} chose the WebSocket subprotocol {ws.protocol!r}")
        return ws

    async def _read(
        self, ws: aiohttp.ClientWebSocketResponse, inbound: Inbound, scope: anyio.CancelScope
    ) -> None:
        """Deliver frames until the socket closes; then tell the session (unless `close()`
        cancelled this reader)."""
        with scope:
            try:
                await self._pump(ws, inbound)
            except TransportError as error:
                inbound.closed(error)

    async def _pump(self, ws: aiohttp.ClientWebSocketResponse, inbound: Inbound) -> NoReturn:
        """Deliver frames until the socket closes or fails; then raise how it ended (what to
        close the session with)."""
        try:
            while True:
                msg = await ws.receive()
                if msg.type is aiohttp.WSMsgType.TEXT:
                    inbound.receive(msg.data.encode("utf-8"))
                elif msg.type is aiohttp.WSMsgType.BINARY:
                    inbound.receive(msg.data)
                elif msg.type in _ENDING:
                    break
        except NETWORK_ERRORS as exc:
            raise ConnectionClosed(f"the WebSocket to {self.url} failed: {exc}") from exc
        except Exception as exc:  # a bug must end this connection, not the session's tasks
            log.exception("reading the WebSocket to %s failed", self.url)
            raise TransportError(f"reading the WebSocket to {self.url} failed: {exc!r}") from exc
        if msg.type is aiohttp.WSMsgType.ERROR:
            raise self._failure(ws.exception() or msg.data)
        raise ConnectionClosed(f"the WebSocket to {self.url} closed (code {ws.close_code})")

    def _failure(self, cause: object) -> TransportError:
        """What a failed socket ends the connection with: `MessageTooLarge` for a message
        over `max_message_bytes` (aiohttp refuses it with close code 1009), as the other
        transports say it."""
        if isinstance(cause, aiohttp.WebSocketError) and \
                cause.code == aiohttp.WSCloseCode.MESSAGE_TOO_BIG:
            return MessageTooLarge(f"a WebSocket message from {self.url} exceeds the "
                                   f"{self.max_message_bytes}-byte limit")
        return ConnectionClosed(f"the WebSocket to {self.url} failed: {cause}")


__all__ = ["WebSocketTransport"]


_ENDING = frozenset({
    aiohttp.WSMsgType.ERROR, aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSING,
    aiohttp.WSMsgType.CLOSED,
})
"""The frame types after which the socket carries nothing more."""


class _Redirected(Exception):
    """Raised out of aiohttp's redirect hook: the handshake was answered with a redirect."""

    def __init__(self, status: int, location: str) -> None:
        super().__init__(f"{status} to {location}")
        self.status = status
        self.location = location


def _refusing_redirects() -> aiohttp.TraceConfig:
    """A trace config that stops aiohttp before it follows a redirect (`ws_connect` has no
    `allow_redirects`): the hook runs before the next request is made."""

    async def on_redirect(session: aiohttp.ClientSession, context: SimpleNamespace,
                          params: aiohttp.TraceRequestRedirectParams) -> None:
        response = params.response
        location = response.headers.get("Location", "")
        response.close()
        raise _Redirected(response.status, location)

    trace = aiohttp.TraceConfig()
    trace.on_request_redirect.append(on_redirect)
    return trace
