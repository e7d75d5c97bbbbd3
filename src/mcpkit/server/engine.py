"""The engine: answers one request of either era.

Era, per request (a dual-era server decides each request on its own):
- params `_meta` names a protocol version → modern: the request carries everything; check
  `_meta`, the version (-32022), that the method exists in the modern era (-32601).
- else the connection's legacy session (opened by `initialize`) → legacy semantics at the
  negotiated version. `initialize` itself opens it; `ping` is allowed before it.
- else → -32602: neither per-request `_meta` nor a session.

Every failure becomes a JSON-RPC error response; nothing escapes `handle_request`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from mcpkit.protocol import errors, jsonrpc, meta, versions
from mcpkit.server import handlers, tasks
from mcpkit.server.call import Call
from mcpkit.server.connection import Channel, Connection

if TYPE_CHECKING:
    from mcpkit.server.server import Server

log = logging.getLogger(__name__)

Handler = Callable[["Server", Call], Awaitable[dict[str, Any]]]

# method → (handler, eras it exists in, the server capability it needs)
_BOTH = frozenset({versions.Era.MODERN, versions.Era.LEGACY})
_MODERN = frozenset({versions.Era.MODERN})
_LEGACY = frozenset({versions.Era.LEGACY})
METHODS: dict[str, tuple[Handler, frozenset[versions.Era], str | None]] = {
    "server/discover": (handlers.discover, _MODERN, None),
    "subscriptions/listen": (handlers.listen, _MODERN, None),
    "initialize": (handlers.initialize, _LEGACY, None),
    "ping": (handlers.ping, _LEGACY, None),
    "logging/setLevel": (handlers.set_level, _LEGACY, "logging"),
    "resources/subscribe": (handlers.subscribe, _LEGACY, "resources"),
    "resources/unsubscribe": (handlers.unsubscribe, _LEGACY, "resources"),
    "tools/list": (handlers.list_tools, _BOTH, "tools"),
    "tools/call": (handlers.call_tool, _BOTH, "tools"),
    "resources/list": (handlers.list_resources, _BOTH, "resources"),
    "resources/templates/list": (handlers.list_templates, _BOTH, "resources"),
    "resources/read": (handlers.read_resource, _BOTH, "resources"),
    "prompts/list": (handlers.list_prompts, _BOTH, "prompts"),
    "prompts/get": (handlers.get_prompt, _BOTH, "prompts"),
    "completion/complete": (handlers.complete, _BOTH, "completions"),
    # The tasks extension (tasks/result and tasks/list no longer exist: -32601).
    "tasks/get": (tasks.get, _MODERN, None),
    "tasks/update": (tasks.update, _MODERN, None),
    "tasks/cancel": (tasks.cancel, _MODERN, None),
}

CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)


def decode_params(request: jsonrpc.Request) -> dict[str, Any]:
    """The request's params as a dict (the codec decoded them, and checked they are an
    object, in `jsonrpc.decode_message`)."""
    return request.params if request.params is not None else {}


_SETTLED_AT_ONCE = frozenset({"notifications/initialized", "notifications/cancelled"})


class _RequestCancelled(Exception):
    """The client cancelled the request; no response is sent."""


class Engine:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.methods: dict[str, tuple[Handler, frozenset[versions.Era], str | None]] = dict(METHODS)

    async def handle_request(
        self,
        request: jsonrpc.Request,
        connection: Connection,
        channel: Channel,
        *,
        principal: str = "",
    ) -> bytes | None:
        """The encoded response to `request` (a result or an error); None if it was
        cancelled, since nothing more may be sent for a cancelled request."""
        try:
            params = decode_params(request)
            call = self.make_call(request, params, connection, channel, principal)
        except errors.McpError as exc:
            return jsonrpc.encode_error(request.id, exc)
        body, _ = await self.answer(call)
        return body

    async def answer(self, call: Call) -> tuple[bytes | None, int | None]:
        """Run the call: (encoded response or None if cancelled, error code if an error)."""
        try:
            result = await self.dispatch(call)
        except _RequestCancelled:
            return None, None
        except errors.McpError as exc:
            return jsonrpc.encode_error(call.request_id, exc), exc.code
        except Exception:
            log.exception("internal error answering %s", call.method)
            return jsonrpc.encode_error(call.request_id, errors.internal_error()), -32603
        try:
            if call.modern:
                self.decorate_modern(call, result)
            return jsonrpc.encode_result(call.request_id, result), None
        except Exception:
            # A result JSON cannot carry (a lone surrogate in a string, an integer of
            # thousands of digits, an object of an unknown type): the client gets an error.
            log.exception("could not encode the result of %s", call.method)
            return jsonrpc.encode_error(call.request_id, errors.internal_error()), -32603

    def make_call(
        self,
        request: jsonrpc.Request,
        params: dict[str, Any],
        connection: Connection,
        channel: Channel,
        principal: str = "",
    ) -> Call:
        """Decide the request's era and check what that era requires of it; raises only
        `McpError` (what to answer), whatever the params hold."""
        try:
            return self._make_call(request, params, connection, channel, principal)
        except errors.McpError:
            raise
        except Exception:
            # Params of an unexpected shape reached code that assumed another: a bug to
            # fix, but it costs this one request an error, never the connection.
            log.exception("internal error checking %s", request.method)
            raise errors.internal_error() from None

    def _make_call(
        self,
        request: jsonrpc.Request,
        params: dict[str, Any],
        connection: Connection,
        channel: Channel,
        principal: str,
    ) -> Call:
        meta_value = params.get("_meta")
        if meta.has_modern_meta(meta_value):
            return self._modern_call(request, params, meta_value, connection, channel, principal)
        legacy = connection.legacy
        if legacy is not None or request.method in ("initialize", "ping"):
            version = legacy.protocol_version if legacy else versions.LATEST_LEGACY_VERSION
            self._check_method(request.method, versions.Era.LEGACY)
            return Call(
                request.id,
                request.method,
                params,
                False,
                version,
                legacy.client_capabilities if legacy else {},
                legacy.client_info if legacy else None,
                legacy.log_level if legacy else None,
                connection,
                channel,
                principal,
            )
        raise errors.invalid_params(
            "missing _meta with io.modelcontextprotocol/protocolVersion and clientCapabilities"
            " (2026-07-28), and no session: send initialize first (earlier versions)"
        )

    def _modern_call(
        self,
        request: jsonrpc.Request,
        params: dict[str, Any],
        meta_value: Any,
        connection: Connection,
        channel: Channel,
        principal: str,
    ) -> Call:
        request_meta = meta.parse_request_meta(meta_value)
        version = request_meta.protocol_version
        if version not in self.server.modern_versions:
            raise errors.unsupported_protocol_version(version, self.server.modern_versions)
        self._check_method(request.method, versions.Era.MODERN)
        return Call(
            request.id,
            request.method,
            params,
            True,
            version,
            request_meta.client_capabilities,
            request_meta.client_info,
            request_meta.log_level,
            connection,
            channel,
            principal,
        )

    def _check_method(self, method: str, era: versions.Era) -> None:
        entry = self.methods.get(method)
        if entry is None or era not in entry[1]:
            raise errors.method_not_found(method)
        capability = entry[2]
        if capability is not None and not self.server.has_capability(capability):
            raise errors.method_not_found(method)

    async def dispatch(self, call: Call) -> dict[str, Any]:
        handler = self.methods[call.method][0]
        in_flight = call.connection.in_flight
        with call.connection.take_scope(call.request_id) as scope:
            in_flight[call.request_id] = scope
            try:
                return await handler(self.server, call)
            finally:
                if in_flight.get(call.request_id) is scope:
                    del in_flight[call.request_id]
        raise _RequestCancelled(call.request_id)

    def decorate_modern(self, call: Call, result: dict[str, Any]) -> None:
        """Modern results carry resultType, caching hints and the server's identity."""
        result.setdefault("resultType", "complete")
        if call.method in CACHEABLE and result["resultType"] == "complete":
            ttl, scope = self.server.cache_hint(call.method)
            result.setdefault("ttlMs", ttl)
            result.setdefault("cacheScope", scope)
        result_meta = result.setdefault("_meta", {})
        result_meta.setdefault(meta.SERVER_INFO, self.server.info())

    async def handle_notification(self, note: jsonrpc.Notification, connection: Connection) -> None:
        """Act on a client notification. Nothing is answered, and nothing escapes: a
        notification whose params make no sense is logged and dropped."""
        if self.settle_notification(note, connection):
            return
        try:
            if note.method == "notifications/roots/list_changed":
                await self.server.on_roots_changed(connection)
            # Other notifications (progress from the client…) need no action.
        except Exception:
            log.exception("internal error handling %s", note.method)

    def settle_notification(self, note: jsonrpc.Notification, connection: Connection) -> bool:
        """Handle at once, without awaiting, the notifications that need no task: whether
        `note` was one of them. A streaming transport calls this before it spawns a task, so
        a cancellation is acted on even when the connection has no slot left for new work."""
        if note.method not in _SETTLED_AT_ONCE:
            return False
        params = note.params if note.params is not None else {}
        try:
            if note.method == "notifications/initialized" and connection.legacy is not None:
                connection.legacy.initialized = True
            elif note.method == "notifications/cancelled":
                request_id = params.get("requestId")
                if jsonrpc.is_request_id(request_id):
                    connection.cancel(request_id)
                else:
                    log.debug("notifications/cancelled without a usable requestId: %.80r",
                              request_id)
        except Exception:
            log.exception("internal error handling %s", note.method)
        return True

    def needs_task(self, note: jsonrpc.Notification) -> bool:
        """Whether handling `note` awaits anything (only then is it given a task)."""
        return note.method == "notifications/roots/list_changed"

    def handle_undecodable(self, failure: jsonrpc.DecodeFailure, connection: Connection) -> None:
        """A message of the client's that did not decode: when it was an answer to a
        server→client request, that request fails now with the decode error (it would
        otherwise wait for its timeout). Answering the failure is the transport's part."""
        settled = failure.as_error_response()
        if settled is not None:
            self.handle_response(settled, connection)

    def handle_response(
        self, response: jsonrpc.Response | jsonrpc.ErrorResponse, connection: Connection
    ) -> bool:
        """Deliver the client's answer to a server→client request; False if no request of
        this connection awaits it (it may belong to another replica's copy of the session)."""
        if connection.resolve(response):
            return True
        log.debug("no request awaits the response with id %r here", response.id)
        return False
