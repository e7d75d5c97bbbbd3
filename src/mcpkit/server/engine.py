"""The engine: answers one request of either era, and is the ONLY seam between the server
transports (`mcpkit.transports.server`) and the server.

Era, per request (a dual-era server decides each request on its own):
- params `_meta` names a protocol version → modern: the request carries everything; check
  `_meta`, the version (-32022), that the method exists in the modern era (-32601).
- else the connection's legacy session (opened by `initialize`) → legacy semantics at the
  negotiated version. `initialize` itself opens it; `ping` is allowed before it.
- else → -32602: neither per-request `_meta` nor a session.

Every failure becomes a JSON-RPC error response; nothing escapes `handle_request`.

The seam. Server transports sit above the server, as uvicorn sits above an ASGI app: they
are given an object with an `engine` (`HasEngine`, a `Server`), and from then on they call
only the `Engine` methods below - never the Server's registries (`tools`, `notifier`,
`tasks`, `legacy_versions`, ...) and never `mcpkit.server.server`. Besides this module they
import only the value types of the seam: `mcpkit.server.connection` (`Connection`,
`Channel`, `LegacySession`: what a transport hands the engine), `mcpkit.server.call`
(`Call`), `mcpkit.server.admission` (`Refusal`, the request-slot limits) and
`mcpkit.server.resource_auth` (`ResourceAuth`, the settings of a protected server, and
`StepUpRequired`, what `admit` raises for a call whose scopes the caller lacks).
tests/test_import_layers.py holds them to it.

Requests:
    is_modern(request) -> bool            the era decision (no parsing: a transport that
                                          keeps modern and legacy apart asks it first)
    admit(request, headers, connection, channel, principal, auth) -> Call
                                          every era, version, `_meta` and header check, once;
                                          raises `McpError` (what to answer). `headers`: the
                                          HTTP request's (lower-case names), None elsewhere.
                                          `auth`: the verified caller (AuthInfo), whose scopes
                                          must cover the tool/resource/prompt called, else
                                          `StepUpRequired` (an McpError; HTTP: 403)
    answer(call) -> (body | None, error code | None)      run an admitted call
    handle_request(request, connection, channel, principal=, auth=) -> body | None
                                          admit + answer, for transports without headers
    check_legacy_headers(headers)         a legacy HTTP request's MCP-Protocol-Version (apart
                                          from admit: refused with 400 before the session's
                                          stream opens; admit's legacy errors go on the stream)
    negotiate_session(request) -> LegacySession | None    what `initialize` will negotiate
    admission                             the request-slot limits (server/admission.py)
Other messages:
    settle_notification / needs_task / handle_notification, handle_response,
    handle_undecodable
Connections and their life:
    open_session(connection) / close_session(connection)  it gets (no longer gets)
                                          notifications (list changes, resource updates)
    end_listens_on(channel)               end the `subscriptions/listen` streams on it
    shutdown()                            end every listen stream, cancel every task
    aclose()                              wait for the background tasks (tasks extension)

The method table: `Engine(server, handlers={...})` or `engine.replace_handlers({...})` puts
other handlers on existing methods, keeping each one's eras and capability (an aggregating
server such as the hub answers the lists from its upstreams instead of registries).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from mcpkit.auth.resource import AuthInfo
from mcpkit.errors import UsageError
from mcpkit.protocol import errors, headers, jsonrpc, meta, versions
from mcpkit.server import handlers, resource_auth, tasks
from mcpkit.server.admission import Admission
from mcpkit.server.call import Call
from mcpkit.server.connection import Channel, Connection, LegacySession

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


class HasEngine(Protocol):
    """What a server transport is given: an object with an engine (a `Server`)."""

    @property
    def engine(self) -> Engine: ...


class Engine:
    def __init__(self, server: Server, *, handlers: Mapping[str, Handler] | None = None) -> None:
        self.server = server
        self.admission: Admission = server.admission
        """The limits on concurrent requests (server/admission.py): a transport takes a slot
        before it starts a request and gives it back once answered. The server's one
        `Admission` for its whole life (its attributes change, it is not replaced)."""
        self.methods: dict[str, tuple[Handler, frozenset[versions.Era], str | None]] = dict(METHODS)
        if handlers:
            self.replace_handlers(handlers)

    def replace_handlers(self, handlers: Mapping[str, Handler]) -> None:
        """Answer each named method with another handler, keeping the eras it exists in and
        the capability it needs. Only methods of the table can be replaced."""
        unknown = sorted(set(handlers) - set(self.methods))
        if unknown:
            raise UsageError(f"no such methods to replace: {', '.join(unknown)}")
        for method, handler in handlers.items():
            _old, eras, capability = self.methods[method]
            self.methods[method] = (handler, eras, capability)

    # --- the seam: requests ---------------------------------------------------------------

    def is_modern(self, request: jsonrpc.Request) -> bool:
        """Whether `request` is of the modern era (its params `_meta` names a version)."""
        params = request.params  # `decode_params`, inline: this runs on every HTTP request
        return params is not None and meta.has_modern_meta(params.get("_meta"))

    async def handle_request(
        self,
        request: jsonrpc.Request,
        connection: Connection,
        channel: Channel,
        *,
        principal: str = "",
        auth: AuthInfo | None = None,
    ) -> bytes | None:
        """The encoded response to `request` (a result or an error); None if it was
        cancelled, since nothing more may be sent for a cancelled request."""
        try:
            call = self.admit(request, None, connection, channel, principal, auth)
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

    def admit(
        self,
        request: jsonrpc.Request,
        headers: Mapping[str, str] | None,
        connection: Connection,
        channel: Channel,
        principal: str = "",
        auth: AuthInfo | None = None,
    ) -> Call:
        """Decide the request's era and make every check that era asks of it, once: `_meta`,
        the version, the method, and - for a modern HTTP request (`headers` given) - the
        MCP-Protocol-Version, Mcp-Method / Mcp-Name and Mcp-Param-* headers; then that the
        caller's scopes (`auth`, else the connection's) cover the item called
        (`StepUpRequired`). Raises only `McpError` (what to answer), whatever the params
        hold. Without `principal`/`auth`, the connection's."""
        try:
            call = self._admit(request, headers, connection, channel,
                               principal or connection.principal, auth or connection.auth)
            if call.auth is not None:
                resource_auth.check(
                    self.server.scopes_needed(call.method, call.params), call.auth)
            return call
        except errors.McpError:
            raise
        except Exception:
            # Params of an unexpected shape reached code that assumed another: a bug to
            # fix, but it costs this one request an error, never the connection.
            log.exception("internal error checking %s", request.method)
            raise errors.internal_error() from None

    def _admit(
        self,
        request: jsonrpc.Request,
        hdrs: Mapping[str, str] | None,
        connection: Connection,
        channel: Channel,
        principal: str,
        auth: AuthInfo | None,
    ) -> Call:
        params = request.params if request.params is not None else {}  # `decode_params`
        meta_value = params.get("_meta")
        if meta.has_modern_meta(meta_value):
            return self._modern_call(request, params, meta_value, hdrs, connection, channel,
                                     principal, auth)
        legacy = connection.legacy
        if legacy is not None or request.method in ("initialize", "ping"):
            self._check_method(request.method, versions.Era.LEGACY)
            return Call(
                request_id=request.id,
                method=request.method,
                params=params,
                modern=False,
                protocol_version=(
                    legacy.protocol_version if legacy else versions.LATEST_LEGACY_VERSION
                ),
                client_capabilities=legacy.client_capabilities if legacy else {},
                client_info=legacy.client_info if legacy else None,
                log_level=legacy.log_level if legacy else None,
                connection=connection,
                channel=channel,
                principal=principal,
                auth=auth,
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
        hdrs: Mapping[str, str] | None,
        connection: Connection,
        channel: Channel,
        principal: str,
        auth: AuthInfo | None,
    ) -> Call:
        """In the spec's order: `_meta` (-32602), MCP-Protocol-Version header = `_meta`
        version (-32020), version supported (-32022), method exists (-32601), then the
        Mcp-Method / Mcp-Name / Mcp-Param-* headers (-32020)."""
        request_meta = meta.parse_request_meta(meta_value)
        version = request_meta.protocol_version
        if hdrs is not None and hdrs.get("mcp-protocol-version") != version:
            raise errors.header_mismatch(
                f"MCP-Protocol-Version header {hdrs.get('mcp-protocol-version')!r} does not "
                f"match _meta protocolVersion {version!r}"
            )
        if version not in self.server.modern_versions:
            raise errors.unsupported_protocol_version(version, self.server.modern_versions)
        self._check_method(request.method, versions.Era.MODERN)
        if hdrs is not None:
            headers.check_standard_headers(hdrs, request.method, params)
            self._check_param_headers(request.method, params, hdrs)
        return Call(
            request_id=request.id,
            method=request.method,
            params=params,
            modern=True,
            protocol_version=version,
            client_capabilities=request_meta.client_capabilities,
            client_info=request_meta.client_info,
            log_level=request_meta.log_level,
            connection=connection,
            channel=channel,
            principal=principal,
            auth=auth,
        )

    def _check_param_headers(
        self, method: str, params: dict[str, Any], hdrs: Mapping[str, str]
    ) -> None:
        if method != "tools/call":
            return
        name = params.get("name")
        tool = self.server.tools.get(name) if isinstance(name, str) else None
        if tool is not None and tool.header_params:
            headers.check_param_headers(hdrs, tool.header_params, params.get("arguments"))

    def _check_method(self, method: str, era: versions.Era) -> None:
        entry = self.methods.get(method)
        if entry is None or era not in entry[1]:
            raise errors.method_not_found(method)
        capability = entry[2]
        if capability is not None and not self.server.has_capability(capability):
            raise errors.method_not_found(method)

    def check_legacy_headers(self, hdrs: Mapping[str, str]) -> None:
        """A legacy HTTP request in a session: an MCP-Protocol-Version header, when sent,
        must name a legacy version this server speaks (-32600 otherwise)."""
        header_version = hdrs.get("mcp-protocol-version")
        if header_version is not None and header_version not in self.server.legacy_versions:
            raise errors.invalid_request(f"unsupported MCP-Protocol-Version {header_version!r}")

    def negotiate_session(self, request: jsonrpc.Request) -> LegacySession | None:
        """What `initialize` will negotiate (a sealed session id carries it), when its params
        are usable; the handler itself refuses them otherwise."""
        params = decode_params(request)
        requested, caps = params.get("protocolVersion"), params.get("capabilities", {})
        info = params.get("clientInfo", {})
        if not isinstance(requested, str) or not isinstance(caps, dict) or not isinstance(
            info, dict
        ):
            return None
        version = versions.negotiate_legacy_version(requested, self.server.legacy_versions)
        return LegacySession(version, caps, info)

    # --- the seam: connections and their life ---------------------------------------------

    def open_session(self, connection: Connection) -> None:
        """`connection` (a stdio pipe, a socket, a legacy session) gets notifications from now
        on: list changes, and updates of the resources it subscribes to."""
        self.server.notifier.connections.add(connection)

    def close_session(self, connection: Connection) -> None:
        """`connection` is gone: it gets no more notifications."""
        self.server.notifier.connections.discard(connection)

    def end_listens_on(self, channel: Channel) -> None:
        """End the `subscriptions/listen` streams answered on `channel` (they never end by
        themselves)."""
        self.server.notifier.end_on(channel)

    def shutdown(self) -> None:
        """The transport stops: end every listen stream gracefully, cancel every task of the
        tasks extension."""
        self.server.notifier.end_all()
        self.server.tasks.cancel_all()

    async def aclose(self) -> None:
        """Wait (briefly) for the background tasks of the tasks extension to end."""
        await self.server.tasks.aclose()

    # --- running a call -------------------------------------------------------------------

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
