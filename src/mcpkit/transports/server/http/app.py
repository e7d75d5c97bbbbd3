"""The Streamable HTTP endpoint as an ASGI app, serving both eras on one path.

POST /mcp
  modern (params `_meta` names a version): stateless. Checks in the spec's order: `_meta`
  (-32602, 400) → MCP-Protocol-Version header = `_meta` version (-32020, 400) → version
  supported (-32022, 400) → Mcp-Method / Mcp-Name / Mcp-Param-* (-32020, 400) → method
  exists (-32601, 404). A missing client capability is -32021 with 400.
  legacy: `initialize` opens a session (Mcp-Session-Id); other requests need a live one
  (404 once it is gone). Notifications and responses get 202.
GET /mcp     a legacy session's standalone SSE stream, or a resume with Last-Event-ID.
DELETE /mcp  ends a legacy session.
GET /sse, POST /messages   the HTTP+SSE transport of 2024-11-05 (`legacy_sse.py`).
WebSocket /mcp and /ws     the WebSocket transport, subprotocol `mcp` (`websocket.py`).

Before anything: Host and Origin must be acceptable (403), the body at most
`max_body_bytes` (413).

Who is calling: with `authorization=ResourceAuth(...)` the app is an OAuth resource server
(`resource_gate.py`: 401/403 challenges, RFC 9728 metadata at
/.well-known/oauth-protected-resource and that followed by the MCP path); the verified
caller's `principal_of(auth)` and AuthInfo reach the handlers as `Call.principal` and
`Call.auth` (`ctx.auth`). Else an authenticating middleware in front of the app may put the
caller's identity in `scope[PRINCIPAL_KEY]` (a string). A legacy session belongs to the
principal that opened it (404 for anyone else).
Legacy sessions are capped per principal - per client address when there is none - and in
all (`sessions.py`): past a cap `initialize` gets 429 (this caller's sessions are all busy)
or 503 (every session is busy), with `Retry-After` and a JSON-RPC error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from mcpkit.auth.resource import AuthInfo
from mcpkit.errors import InvalidArgument
from mcpkit.protocol import errors, jsonrpc, versions
from mcpkit.server.call import Call
from mcpkit.server.connection import Connection, LegacySession
from mcpkit.server.engine import HasEngine, decode_params
from mcpkit.server.resource_auth import WELL_KNOWN, ResourceAuth, StepUpRequired
from mcpkit.transports.server.batch import answer_batch
from mcpkit.transports.server.http import asgi
from mcpkit.transports.server.http.asgi import Receive, Scope, Send
from mcpkit.transports.server.http.late_start import LateStart
from mcpkit.transports.server.http.legacy_sse import LegacySseTransport
from mcpkit.transports.server.http.peers import host_key
from mcpkit.transports.server.http.replay import ReplayBudget, ReplayLimits
from mcpkit.transports.server.http.resource_gate import Refused, ResourceGate
from mcpkit.transports.server.http.security import HostGuard
from mcpkit.transports.server.http.sessions import (
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
    DEFAULT_SESSION_IDLE_S,
    SESSION_RETRY_AFTER_S,
    HttpSession,
    SessionCodec,
    SessionLimitReached,
    SessionManager,
)
from mcpkit.transports.server.http.streams import SSE_HEADERS, ResponseStream
from mcpkit.transports.server.http.websocket import WebSocketTransport

log = logging.getLogger(__name__)

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024
BUSY_RETRY_AFTER_S = 1
"""Retry-After of a request refused for want of a slot (admission.py)."""
STOPPING_RETRY_AFTER_S = 1
"""Retry-After of a stream refused because the server is stopping (`McpAsgiApp.stopping`):
by then another process (a restarted one, another replica) may be serving."""
PRINCIPAL_KEY = "mcpkit.principal"
"""The ASGI scope key where an authenticating middleware puts the caller's identity."""
AUTH_KEY = "mcpkit.auth"
"""The ASGI scope key of the verified OAuth caller (AuthInfo), set by the app's own gate."""
CLIENT_HEADER = " mcpkit-client"
"""Where `_http` puts the address of a POST's caller without a principal (whose session
quota it is, `_legacy_session`) in the request's header map: a name no real header can have
(it starts with a space)."""
WATCH_AFTER_S = 0.05
"""A call still running after this long gets a task that watches for the client going away
(started by one ticker for all calls, `late_start.py`: a task or a timer per request cost
~7 or ~5 µs, and most calls end sooner)."""
_MODERN_400 = frozenset(
    {
        errors.HEADER_MISMATCH,
        errors.MISSING_REQUIRED_CLIENT_CAPABILITY,
        errors.UNSUPPORTED_PROTOCOL_VERSION,
    }
)


StrayResponses = Callable[
    [HttpSession, jsonrpc.Response | jsonrpc.ErrorResponse], Awaitable[None]
]


def _modern_status(code: int | None) -> int:
    """The HTTP status of a modern request's answer, by its error code (None: a result)."""
    if code in _MODERN_400:
        return 400
    return 404 if code == errors.METHOD_NOT_FOUND else 200


def _json_error(status: int, error: errors.McpError, request_id: Any = None) -> tuple[int, bytes]:
    return status, jsonrpc.encode_error(request_id, error)


class McpAsgiApp:
    """ASGI app serving `server` at `path` (Streamable HTTP, both eras). It reaches the
    server only through its engine (the seam, server/engine.py)."""

    def __init__(
        self,
        server: HasEngine,
        *,
        path: str = "/mcp",
        allowed_hosts: list[str] | None = None,
        allowed_origins: list[str] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        max_sessions_per_principal: int = DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
        session_idle_s: float = DEFAULT_SESSION_IDLE_S,
        keepalive_s: float = 15.0,
        sse_path: str = "/sse",
        messages_path: str = "/messages",
        legacy_sse: bool = True,
        ws_path: str = "/ws",
        websocket: bool = True,
        session_codec: SessionCodec | None = None,
        replay_limits: ReplayLimits | None = None,
        max_bodies_in_flight_bytes: int = asgi.DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES,
        authorization: ResourceAuth | None = None,
    ) -> None:
        self.engine = server.engine
        self.path = path.rstrip("/") or "/"
        self.guard = HostGuard(allowed_hosts, allowed_origins)
        self.max_body_bytes = max_body_bytes
        self.bodies = asgi.BodyBudget(max_bodies_in_flight_bytes)
        """Bytes of request bodies being received, over all requests (503 past it)."""
        self.sessions = SessionManager(
            max_sessions=max_sessions,
            max_sessions_per_principal=max_sessions_per_principal,
            idle_s=session_idle_s,
            codec=session_codec,
            replay=ReplayBudget(replay_limits),
        )
        self.sessions.on_restore = self._session_restored
        self.stray_responses: StrayResponses | None = None
        """Called with a client's response that no request here awaits: with replicas, the
        request may be waiting in another process's copy of the session."""
        self.keepalive_s = keepalive_s
        self._late_watch = LateStart(WATCH_AFTER_S)
        """Starts a disconnect watcher for each call still running after `WATCH_AFTER_S`."""
        self.legacy_sse = (
            LegacySseTransport(self, _norm(sse_path), _norm(messages_path)) if legacy_sse else None
        )
        self.ws_paths = {self.path, _norm(ws_path)}
        self.websocket = WebSocketTransport(self) if websocket else None
        self.gate = ResourceGate(authorization) if authorization is not None else None
        """The OAuth resource server in front of every MCP path (`resource_gate.py`)."""
        self._protected = {self.path, *self.ws_paths}
        if self.legacy_sse is not None:
            self._protected |= {self.legacy_sse.sse_path, self.legacy_sse.messages_path}
        self._metadata_paths = {WELL_KNOWN, _norm(WELL_KNOWN + self.path)}
        self.stopping = False
        """Set for good by `shutdown()`. From then on no long-lived stream is admitted: a GET
        stream (this path's or the 2024-11-05 transport's) or a WebSocket is refused at once
        (`refuse_stream`), and a `subscriptions/listen` stream ends at once (the notifier's
        `add_listener`). Only requests in flight get the shutdown's grace; a stream let in
        after the streams were ended would be held open until the grace ran out."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if self.gate is not None and kind in ("http", "websocket"):
            gated = await self._authorize(scope, receive, send)
            if gated is None:
                return
            scope = gated
        if kind == "http":
            await self._http(scope, receive, send)
        elif kind == "websocket":
            if self.stopping:
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": 1001})  # going away
            elif self.websocket is not None and _route_path(scope) in self.ws_paths:
                await self.websocket.handle(scope, receive, send)
            else:
                await receive()  # websocket.connect
                await send({"type": "websocket.close", "code": 1000})
        elif kind == "lifespan":
            await self._lifespan(receive, send)
        else:
            raise InvalidArgument(f"unsupported ASGI scope type {kind!r}")

    async def _authorize(self, scope: Scope, receive: Receive, send: Send) -> Scope | None:
        """The scope to serve with the verified caller in it, or None once answered (the
        metadata document, or a refusal). Requests to other paths, and those the Host/Origin
        check will refuse, pass unchanged: they are answered 404 / 403 as without a gate."""
        assert self.gate is not None
        path = _route_path(scope)
        if scope["type"] == "http" and path in self._metadata_paths:
            answer = self.gate.metadata(scope["method"])
            await asgi.respond(send, answer.status, answer.body, headers=answer.headers)
            return None
        if path not in self._protected:
            return scope
        hdrs = asgi.header_map(scope)
        if not self.guard.host_ok(hdrs.get("host")) or not self.guard.origin_ok(hdrs.get("origin")):
            return scope
        outcome = await self.gate.check(scope, hdrs)
        if isinstance(outcome, Refused):
            await _refuse(scope, receive, send, outcome)
            return None
        return {**scope, PRINCIPAL_KEY: outcome.principal, AUTH_KEY: outcome.auth}

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self.shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def shutdown(self) -> None:
        """End subscriptions gracefully and close every session; admit no new stream from
        now on (`stopping`). Safe to call again."""
        self.stopping = True
        self.engine.shutdown()
        self.sessions.close_all()
        if self.legacy_sse is not None:
            self.legacy_sse.close_all()

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _route_path(scope)
        sse = self.legacy_sse
        if sse is not None and path in (sse.sse_path, sse.messages_path):
            await sse.handle(path, scope, receive, send)
            return
        if path != self.path:
            await asgi.respond(send, 404, b"Not Found", content_type="text/plain")
            return
        hdrs = asgi.header_map(scope)
        if not self.guard.host_ok(hdrs.get("host")) or not self.guard.origin_ok(hdrs.get("origin")):
            status, body = _json_error(
                403,
                errors.McpError(errors.INVALID_REQUEST, "Forbidden: Host or Origin not allowed"),
            )
            await asgi.respond(send, status, body, content_type="application/json")
            return
        method = scope["method"]
        principal = str(scope.get(PRINCIPAL_KEY, ""))
        if method == "POST":
            if not principal:  # the client's address is whose session quota it is
                client = scope.get("client")
                hdrs = {**hdrs, CLIENT_HEADER: str(client[0]) if client else ""}
            await self._post(hdrs, receive, send, principal, scope.get(AUTH_KEY))
        elif method == "GET":
            await self._get(hdrs, receive, send, principal)
        elif method == "DELETE":
            await self._delete(hdrs, send, principal)
        else:
            await asgi.respond(send, 405, b"", headers={"allow": "GET, POST, DELETE"})

    # --- POST ----------------------------------------------------------------------------------

    async def _post(
        self, hdrs: Mapping[str, str], receive: Receive, send: Send, principal: str,
        auth: AuthInfo | None = None,
    ) -> None:
        accept = hdrs.get("accept", "*/*")
        can_sse = "text/event-stream" in accept or "*/*" in accept
        if not (can_sse or "application/json" in accept):
            await self._error(
                send,
                406,
                errors.invalid_request("Accept must allow application/json or text/event-stream"),
            )
            return
        if not hdrs.get("content-type", "").lower().startswith("application/json"):
            await self._error(
                send, 415, errors.invalid_request("Content-Type must be application/json")
            )
            return
        body = await self.read_body(hdrs, receive, send)
        if body is None:
            return
        if jsonrpc.is_batch(body):
            await self._post_batch(body, hdrs, send, principal, auth)
            return
        try:
            message = jsonrpc.decode_message(body)
        except jsonrpc.DecodeFailure as failure:
            self._settle_failed_response(failure, hdrs, principal)
            await self._error(send, 400, failure.error, failure.id)
            return
        if isinstance(message, jsonrpc.Request):
            await self._post_request(message, hdrs, receive, send, can_sse, principal, auth)
        else:
            await self._post_other(message, hdrs, send, principal)

    async def read_body(
        self, hdrs: Mapping[str, str], receive: Receive, send: Send
    ) -> bytes | None:
        """The request body; None once refused (413 over `max_body_bytes`, 503 with
        Retry-After while the bodies in flight fill `max_bodies_in_flight_bytes`) or the
        client went away."""
        try:
            return await asgi.read_body(receive, self.max_body_bytes, hdrs, self.bodies)
        except asgi._BodyTooLarge:
            await self._error(
                send, 413, errors.invalid_request(f"body exceeds {self.max_body_bytes} bytes")
            )
        except asgi._BodiesInFlightFull:
            await asgi.respond(
                send, 503,
                jsonrpc.encode_error(None, errors.McpError(
                    errors.INTERNAL_ERROR,
                    f"the server is receiving {self.bodies.limit} bytes of request bodies "
                    "already; try again shortly")),
                content_type="application/json",
                headers={"retry-after": str(asgi.BODIES_RETRY_AFTER_S)},
            )
        except ConnectionResetError:
            pass
        return None

    def _settle_failed_response(
        self, failure: jsonrpc.DecodeFailure, hdrs: Mapping[str, str], principal: str
    ) -> None:
        """A client's answer to a server→client request that did not decode fails that
        request at once (it would otherwise wait for its timeout)."""
        session_id = hdrs.get("mcp-session-id")
        if not failure.response or session_id is None:
            return
        session = self.sessions.get(session_id, principal)
        if session is not None:
            self.engine.handle_undecodable(failure, session.connection)

    async def _post_other(
        self, message: jsonrpc.Message, hdrs: Mapping[str, str], send: Send, principal: str
    ) -> None:
        session_id = hdrs.get("mcp-session-id")
        if session_id is not None:
            session = self.sessions.get(session_id, principal)
            if session is None:
                await self._error(send, 404, errors.invalid_request("Session not found"))
                return
            assert not isinstance(message, jsonrpc.Request)
            work = self._work_of(message, session)
            if work is not None:
                refused = self.engine.admission.admit(session.connection)
                if refused is not None:
                    await self._busy(send, refused, None)
                    return
                try:
                    await work()
                finally:
                    self.engine.admission.release(session.connection)
        await asgi.respond(send, 202)

    def _work_of(
        self, message: jsonrpc.Notification | jsonrpc.Response | jsonrpc.ErrorResponse,
        session: HttpSession,
    ) -> Callable[[], Awaitable[None]] | None:
        """Act at once on a client's notification or response in `session`; what is left
        to await (`roots/list_changed` callbacks, passing a stray answer on), if anything.
        Awaited work takes a request slot (admission.py), as on every other transport:
        800 notification POSTs of one session otherwise held 800 callbacks at once."""
        connection = session.connection
        if isinstance(message, jsonrpc.Notification):
            if self.engine.settle_notification(message, connection):
                return None
            if not self.engine.needs_task(message):
                return None
            return functools.partial(self.engine.handle_notification, message, connection)
        if self.engine.handle_response(message, connection) or self.stray_responses is None:
            return None
        return functools.partial(self.stray_responses, session, message)

    async def _post_batch(
        self, body: bytes, hdrs: Mapping[str, str], send: Send, principal: str,
        auth: AuthInfo | None,
    ) -> None:
        session = self.sessions.get(hdrs.get("mcp-session-id", ""), principal)
        legacy = session.connection.legacy if session is not None else None
        if session is None or legacy is None or not versions.allows_batches(
            legacy.protocol_version
        ):
            await self._error(
                send, 400, errors.invalid_request("JSON-RPC batches need a 2025-03-26 session")
            )
            return
        session.open_streams += 1  # busy: not evicted while the batch runs
        try:
            reply = await answer_batch(
                self.engine, body, session.connection, session.standalone, principal=principal,
                auth=auth,
            )
        finally:
            session.open_streams -= 1
            session.touch()
        if reply is None:
            await asgi.respond(send, 202)
        else:
            await asgi.respond(send, 200, reply, content_type="application/json")

    async def _post_request(
        self,
        request: jsonrpc.Request,
        hdrs: Mapping[str, str],
        receive: Receive,
        send: Send,
        can_sse: bool,
        principal: str,
        auth: AuthInfo | None,
    ) -> None:
        if self.engine.is_modern(request):
            await self._modern(request, hdrs, receive, send, can_sse, principal, auth)
        else:
            await self._legacy(request, hdrs, receive, send, can_sse, principal, auth)

    async def _modern(
        self,
        request: jsonrpc.Request,
        hdrs: Mapping[str, str],
        receive: Receive,
        send: Send,
        can_sse: bool,
        principal: str,
        auth: AuthInfo | None,
    ) -> None:
        stream = ResponseStream(
            send, extra_headers={}, log_factory=None, prime=False, can_sse=can_sse
        )
        try:
            call = self._modern_call(request, hdrs, stream, principal, auth)
        except StepUpRequired as lacking:
            await self._step_up(send, lacking)
            return
        except errors.McpError as exc:
            status = 404 if exc.code == errors.METHOD_NOT_FOUND else 400
            await self._error(send, status, exc, request.id)
            return
        refused = self.engine.admission.admit(call.connection, request.footprint)
        if refused is not None:  # admission.py: the caller is at its limit
            await self._busy(send, refused, request.id)
            return
        try:
            body, code = await self._answer(call, stream, receive, cancel_on_disconnect=True)
        finally:
            self.engine.admission.release(call.connection, request.footprint)
        await stream.finish(body, _modern_status(code))

    def _modern_call(
        self,
        request: jsonrpc.Request,
        hdrs: Mapping[str, str],
        stream: ResponseStream,
        principal: str,
        auth: AuthInfo | None,
    ) -> Call:
        """A modern request's call, on a throwaway connection, once the engine made every
        check of the spec's order; `McpError` names the first it fails."""
        client = hdrs.get(CLIENT_HEADER)  # only there without a principal
        caller = principal if client is None else f"peer:{host_key(client)}"
        connection = Connection(principal=principal, caller=caller)
        return self.engine.admit(request, hdrs, connection, stream, principal, auth)

    async def _legacy(
        self,
        request: jsonrpc.Request,
        hdrs: Mapping[str, str],
        receive: Receive,
        send: Send,
        can_sse: bool,
        principal: str,
        auth: AuthInfo | None,
    ) -> None:
        session, problem = self._legacy_session(request, hdrs, principal)
        if problem is not None:
            status, error = problem
            retry = {"retry-after": str(SESSION_RETRY_AFTER_S)} if status in (429, 503) else None
            await self._error(send, status, error, request.id, headers=retry)
            return
        assert session is not None
        extra = {"mcp-session-id": session.id}
        version = (
            session.connection.legacy.protocol_version
            if session.connection.legacy
            else decode_params(request).get("protocolVersion", "")
        )
        stream = ResponseStream(
            send,
            extra_headers=extra,
            log_factory=session.new_log,
            prime=isinstance(version, str) and versions.primes_sse_streams(version),
            can_sse=can_sse,
        )
        try:
            call = self.engine.admit(request, hdrs, session.connection, stream, principal, auth)
        except StepUpRequired as lacking:  # nothing of the stream was sent yet
            await self._step_up(send, lacking)
            return
        except errors.McpError as exc:
            await stream.finish(jsonrpc.encode_error(request.id, exc))
            return
        refused = self.engine.admission.admit(session.connection, request.footprint)
        if refused is not None:  # admission.py: the session, or its caller, is at its limit
            await self._busy(send, refused, request.id)
            return
        session.open_streams += 1
        try:
            body, code = await self._answer(call, stream, receive, cancel_on_disconnect=False)
        finally:
            self.engine.admission.release(session.connection, request.footprint)
            session.open_streams -= 1
            session.touch()
        if request.method == "initialize":
            if code is None:
                self.engine.open_session(session.connection)
            else:
                self.sessions.close(session.id)
        await stream.finish(body)

    def _legacy_session(
        self, request: jsonrpc.Request, hdrs: Mapping[str, str], principal: str
    ) -> tuple[HttpSession | None, tuple[int, errors.McpError] | None]:
        """The session a legacy request belongs to, or (status, error) to refuse it with."""
        if request.method == "initialize":
            client = hdrs.get(CLIENT_HEADER)  # only there without a principal
            owner = principal if client is None else f"peer:{host_key(client)}"
            try:
                return self.sessions.create(principal, self._negotiated(request), owner=owner), None
            except SessionLimitReached as refused:
                return None, (refused.status, refused)
        session_id = hdrs.get("mcp-session-id")
        if session_id is None:
            return None, (
                400,
                errors.invalid_params(
                    "missing Mcp-Session-Id (send initialize first)"
                    " or per-request _meta (2026-07-28)"
                ),
            )
        session = self.sessions.get(session_id, principal)
        if session is None:
            return None, (404, errors.invalid_request("Session not found"))
        try:
            self.engine.check_legacy_headers(hdrs)
        except errors.McpError as exc:
            return None, (400, exc)
        return session, None

    def _negotiated(self, request: jsonrpc.Request) -> LegacySession | None:
        """What `initialize` will negotiate, for a sealed session id to carry."""
        if self.sessions.codec is None:
            return None
        return self.engine.negotiate_session(request)

    def _session_restored(self, session: HttpSession) -> None:
        self.engine.open_session(session.connection)

    async def _answer(
        self, call: Any, stream: ResponseStream, receive: Receive, *, cancel_on_disconnect: bool
    ) -> tuple[bytes | None, int | None]:
        """Run the call while watching for the client going away: a modern request is then
        cancelled; a legacy one goes on (its stream is resumable). The watching starts once
        the call has run `WATCH_AFTER_S` (to twice that: one ticker starts the watching of
        every call, `late_start.py`), so a disconnect is noticed that much later."""
        watcher: asyncio.Future[Any] | None = None

        def on_disconnect(done: asyncio.Future[Any]) -> None:
            if done.cancelled() or done.exception() is not None:
                return
            if done.result().get("type") != "http.disconnect" or stream.connection_closed:
                return
            stream.detach()
            if cancel_on_disconnect:
                call.connection.cancel(call.request_id)

        def watch() -> None:
            nonlocal watcher
            watcher = asyncio.ensure_future(receive())
            watcher.add_done_callback(on_disconnect)

        key = self._late_watch.add(watch)
        try:
            return await self.engine.answer(call)
        finally:
            self._late_watch.discard(key)
            if watcher is not None:
                watcher.cancel()

    async def _step_up(self, send: Send, refused: StepUpRequired) -> None:
        """403 insufficient_scope with the step-up challenge (resource_gate.py)."""
        assert self.gate is not None  # only a gated call has the AuthInfo to lack scopes
        answer = self.gate.insufficient_scope(refused)
        await asgi.respond(send, answer.status, answer.body, headers=answer.headers)

    async def _busy(self, send: Send, refused: errors.McpError, request_id: Any) -> None:
        """A request not started for want of a slot: 429, Retry-After and its -32000."""
        await self._error(send, 429, refused, request_id,
                          headers={"retry-after": str(BUSY_RETRY_AFTER_S)})

    async def _error(
        self,
        send: Send,
        status: int,
        error: errors.McpError,
        request_id: Any = None,
        *,
        headers: dict[str, str] | None = None,
    ) -> None:
        await asgi.respond(
            send,
            status,
            jsonrpc.encode_error(request_id, error),
            content_type="application/json",
            headers=headers,
        )

    # --- GET -------------------------------------------------------------------------------------

    async def refuse_stream(self, send: Send) -> None:
        """503 to a GET stream asked for while the server stops, closing the connection:
        the stream would otherwise be held open until the shutdown's grace ran out."""
        await self._error(
            send, 503,
            errors.McpError(errors.INTERNAL_ERROR,
                            "the server is shutting down; connect again shortly"),
            headers={"retry-after": str(STOPPING_RETRY_AFTER_S), "connection": "close"},
        )

    async def _get(
        self, hdrs: Mapping[str, str], receive: Receive, send: Send, principal: str
    ) -> None:
        if self.stopping:
            await self.refuse_stream(send)
            return
        session_id = hdrs.get("mcp-session-id")
        if session_id is None:
            await asgi.respond(send, 405, b"", headers={"allow": "POST"})
            return
        session = self.sessions.get(session_id, principal)
        if session is None:
            await self._error(send, 404, errors.invalid_request("Session not found"))
            return
        if "text/event-stream" not in hdrs.get("accept", "text/event-stream"):
            await self._error(
                send, 406, errors.invalid_request("Accept must allow text/event-stream")
            )
            return
        last_event_id = hdrs.get("last-event-id")
        found = session.find_log(last_event_id) if last_event_id else None
        if found is None and last_event_id and session.names_request_stream(last_event_id):
            # Not the standalone stream: attaching that instead would leave the client
            # waiting for a response that never comes. The stream ended and was dropped, or
            # lived in another process (a replica that is gone): the request is lost.
            await self._error(send, 410, errors.invalid_request(
                f"no stream to resume from Last-Event-ID {last_event_id[:80]!r}: it ended or "
                "was served by another server process; send the request again"))
            return
        if found is None and not session.standalone.attach():
            await self._error(
                send, 409, errors.invalid_request("this session already has a GET stream")
            )
            return
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": asgi.encode_headers({**SSE_HEADERS, "mcp-session-id": session.id}),
            }
        )
        session.open_streams += 1
        try:
            await self._hold_stream(session, found, receive, send)
        finally:
            session.open_streams -= 1
            session.touch()
            if found is None:
                session.standalone.detach()
        with contextlib.suppress(OSError):
            await send({"type": "http.response.body", "body": b""})

    async def _hold_stream(
        self, session: HttpSession, found: Any, receive: Receive, send: Send
    ) -> None:
        async with anyio.create_task_group() as tg:

            async def until_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                tg.cancel_scope.cancel()

            async def keepalive() -> None:
                while True:
                    await anyio.sleep(self.keepalive_s)
                    await send({"type": "http.response.body", "body": b":\n\n", "more_body": True})

            tg.start_soon(until_disconnect)
            tg.start_soon(keepalive)
            if found is not None:
                event_log, seq = found
                event_log.acknowledge(seq)  # the client has these: it never asks again
                await event_log.follow(seq, send)
                if event_log is not session.standalone.log:
                    event_log.release_soon()  # ended and all written: nothing left
            else:
                standalone = session.standalone
                standalone.acknowledge_delivered()
                await standalone.log.follow(standalone.delivered, send, standalone.mark_delivered)
            tg.cancel_scope.cancel()

    # --- DELETE ----------------------------------------------------------------------------------

    async def _delete(self, hdrs: Mapping[str, str], send: Send, principal: str) -> None:
        session_id = hdrs.get("mcp-session-id")
        if session_id is None:
            await self._error(send, 400, errors.invalid_request("missing Mcp-Session-Id"))
        elif self.sessions.get(session_id, principal) is not None and self.sessions.close(
            session_id
        ):
            await asgi.respond(send, 200)
        else:
            await self._error(send, 404, errors.invalid_request("Session not found"))


async def _refuse(scope: Scope, receive: Receive, send: Send, answer: Refused) -> None:
    """Answer a refused request; a WebSocket handshake with the same HTTP response when the
    server supports ASGI's denial responses, else with a close (403)."""
    if scope["type"] == "http":
        await asgi.respond(send, answer.status, answer.body, headers=answer.headers)
        return
    await receive()  # websocket.connect
    if "websocket.http.response" in scope.get("extensions", {}):
        headers = {**answer.headers, "content-length": str(len(answer.body))}
        await send({"type": "websocket.http.response.start", "status": answer.status,
                    "headers": asgi.encode_headers(headers)})
        await send({"type": "websocket.http.response.body", "body": answer.body})
    else:
        await send({"type": "websocket.close", "code": 1008})


def _norm(path: str) -> str:
    return path.rstrip("/") or "/"


def _route_path(scope: Scope) -> str:
    """The request path relative to the app's mount point (`root_path`)."""
    path: str = scope.get("path", "")
    root: str = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    return _norm(path)
