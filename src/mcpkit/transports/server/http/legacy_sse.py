"""The HTTP+SSE transport of protocol version 2024-11-05, served by the same ASGI app.

GET  /sse                          opens a session: an SSE stream whose first event is
                                   `endpoint` with the URI to POST to (`/messages?session_id=…`,
                                   under the app's mount point `root_path`). Every server message
                                   (responses included) follows as an `event: message`.
POST /messages?session_id=<id>     one JSON-RPC message (or batch) → 202 Accepted; its reply
                                   goes on the session's stream. Unknown session → 404.

Each session is one `Connection` whose outbound channel is its stream, written with
backpressure (`SseChannel`: nothing is queued for a client that stops reading). Requests run in the
GET's task group, so the session ending (the GET disconnecting, or server shutdown) cancels
what runs for it. Host/Origin checks (403) and the body limit (413) are the main app's, and
so are the session limits: at most the app's `max_sessions` streams in all (503) and its
per-principal cap per caller - principal, else client address (429). So is the OAuth gate
(`resource_gate.py`): the GET and every POST present a token; a POST whose principal is not
the one that opened the session gets 404, and runs with its own token's AuthInfo. These sessions are
never idle (each is an open stream), so none is evicted.
"""

from __future__ import annotations

import logging
import secrets
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import anyio
from anyio.abc import TaskGroup

from mcpkit.protocol import errors, jsonrpc, sse
from mcpkit.server.admission import Refusal
from mcpkit.server.connection import Connection
from mcpkit.transports.server.http import asgi
from mcpkit.transports.server.http.asgi import Receive, Scope, Send
from mcpkit.transports.server.http.peers import caller_key, peer_key
from mcpkit.transports.server.http.streams import SSE_HEADERS
from mcpkit.transports.server.routing import route

if TYPE_CHECKING:
    from mcpkit.transports.server.http.app import McpAsgiApp

log = logging.getLogger(__name__)


class SseChannel:
    """A session's outbound channel: writes each message to the GET's response as an SSE
    event, one at a time, and waits while the client is not reading (uvicorn's flow
    control). Nothing is queued: a session holds at most the message being written and
    the transport's write buffer, however much its handlers send and however slowly its
    client reads; a handler that sends more waits (a bounded queue of 256 messages could
    hold 256 messages of any size)."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._lock = anyio.Lock()
        self.closed = False

    async def send(self, message: bytes) -> None:
        await self.write(sse.encode_event(message, event="message"))

    async def write(self, chunk: bytes) -> None:
        if self.closed:
            raise ConnectionResetError("SSE session closed")
        async with self._lock:
            if self.closed:
                raise ConnectionResetError("SSE session closed")
            try:
                await _body(self._send, chunk)
            except OSError:
                self.closed = True
                raise ConnectionResetError("SSE session closed") from None

    async def keepalive(self) -> None:
        """A comment line, unless a message is being written (the stream is busy anyway)."""
        if not self._lock.locked():
            await self.write(sse.KEEPALIVE)

    async def end(self) -> None:
        """Close the channel and end the response (after the write in progress, if any)."""
        self.closed = True
        async with self._lock:
            await self._send({"type": "http.response.body", "body": b""})


class SseSession:
    def __init__(
        self, session_id: str, tg: TaskGroup, channel: SseChannel, caller: str | None = None,
        principal: str = "",
    ) -> None:
        self.id = session_id
        self.tg = tg
        self.channel = channel
        self.connection = Connection(
            self.channel, session_id=session_id, caller=caller, principal=principal)

    def close(self) -> None:
        self.connection.close()
        self.channel.closed = True
        self.tg.cancel_scope.cancel()


class LegacySseTransport:
    """GET `sse_path` and POST `messages_path` for `app` (an `McpAsgiApp`)."""

    def __init__(self, app: McpAsgiApp, sse_path: str, messages_path: str) -> None:
        self.app = app
        self.sse_path = sse_path
        self.messages_path = messages_path
        self.sessions: dict[str, SseSession] = {}
        self.per_owner: dict[str, int] = {}
        """Open sessions per principal (else client address)."""

    def close_all(self) -> None:
        for session in list(self.sessions.values()):
            session.close()

    async def handle(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one HTTP request whose (mount-relative) path is `sse_path` or `messages_path`."""
        hdrs = asgi.header_map(scope)
        guard = self.app.guard
        if not guard.host_ok(hdrs.get("host")) or not guard.origin_ok(hdrs.get("origin")):
            await _error(send, 403, errors.invalid_request("Forbidden: Host or Origin not allowed"))
            return
        method = scope["method"]
        if path == self.sse_path:
            if method != "GET":
                await asgi.respond(send, 405, b"", headers={"allow": "GET"})
                return
            await self._get(scope, receive, send)
        elif method != "POST":
            await asgi.respond(send, 405, b"", headers={"allow": "POST"})
        else:
            await self._post(scope, receive, send)

    # --- GET: the session's stream ----------------------------------------------------------

    async def _get(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.app.stopping:  # a stream opened now would be held until the grace ran out
            await self.app.refuse_stream(send)
            return
        if len(self.sessions) >= self.app.sessions.max_sessions:
            await _error(send, 503, errors.McpError(errors.INTERNAL_ERROR, "too many sessions"))
            return
        # "mcpkit.principal" is app.PRINCIPAL_KEY (app.py imports this module)
        owner = str(scope.get("mcpkit.principal", "")) or f"peer:{peer_key(scope)}"
        cap = self.app.sessions.max_per_principal
        if self.per_owner.get(owner, 0) >= cap:
            await _error(send, 429, errors.McpError(
                errors.INTERNAL_ERROR, f"too many sessions: this client already has {cap} "
                "open streams; close one first"))
            return
        self.per_owner[owner] = self.per_owner.get(owner, 0) + 1
        try:
            await self._serve_session(scope, receive, send)
        finally:
            left = self.per_owner.pop(owner) - 1
            if left:
                self.per_owner[owner] = left

    async def _serve_session(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = secrets.token_hex(16)
        endpoint = f"{scope.get('root_path', '')}{self.messages_path}?session_id={session_id}"
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": asgi.encode_headers(dict(SSE_HEADERS)),
            }
        )
        channel = SseChannel(send)
        engine = self.app.engine
        session: SseSession | None = None
        try:
            await channel.write(sse.encode_event(endpoint, event="endpoint"))
            async with anyio.create_task_group() as tg:
                session = SseSession(session_id, tg, channel, caller_key(scope),
                                     str(scope.get("mcpkit.principal", "")))
                self.sessions[session_id] = session
                engine.open_session(session.connection)
                tg.start_soon(self._keepalive, channel)
                await self._until_disconnect(receive)
                tg.cancel_scope.cancel()
        except ConnectionResetError:
            log.debug("SSE stream: the client went away")
        finally:
            self.sessions.pop(session_id, None)
            if session is not None:
                session.connection.close()
                engine.close_session(session.connection)
            channel.closed = True
        with anyio.CancelScope(shield=True), anyio.move_on_after(1.0):
            try:
                await channel.end()
            except OSError:
                pass

    @staticmethod
    async def _until_disconnect(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _keepalive(self, channel: SseChannel) -> None:
        while True:
            await anyio.sleep(self.app.keepalive_s)
            try:
                await channel.keepalive()
            except ConnectionResetError:
                return

    # --- POST: one message for a session -----------------------------------------------------

    async def _post(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        session_id = (query.get("session_id") or query.get("sessionId") or [""])[0]
        if not session_id:
            await _error(send, 400, errors.invalid_request("missing session_id"))
            return
        session = self.sessions.get(session_id)
        # A session belongs to whoever opened it: anyone else is told it does not exist.
        if session is None or session.connection.principal != str(
            scope.get("mcpkit.principal", "")
        ):
            await _error(send, 404, errors.invalid_request("Session not found"))
            return
        body = await self.app.read_body(asgi.header_map(scope), receive, send)
        if body is None:  # refused (413, 503) or the client went away
            return
        failure = route(
            self.app.engine,
            body,
            session.connection,
            session.channel,
            session.tg.start_soon,
            lambda reply: _reply(session, reply),
            scope.get("mcpkit.auth"),  # app.AUTH_KEY: this POST's verified caller
        )
        if isinstance(failure, Refusal):  # the POST was fine: the request gets its error
            await _reply(session, jsonrpc.encode_error(failure.id, failure.error))
        elif failure is not None:
            await _error(send, 400, failure.error, failure.id)
            return
        await asgi.respond(send, 202, b"Accepted", content_type="text/plain")


async def _reply(session: SseSession, reply: bytes) -> None:
    try:
        await session.channel.send(reply)
    except ConnectionResetError:
        log.debug("SSE session %s closed; dropping a reply", session.id)


async def _body(send: Send, chunk: bytes) -> None:
    await send({"type": "http.response.body", "body": chunk, "more_body": True})


async def _error(send: Send, status: int, error: errors.McpError, request_id: Any = None) -> None:
    await asgi.respond(
        send, status, jsonrpc.encode_error(request_id, error), content_type="application/json"
    )
