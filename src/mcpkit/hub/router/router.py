"""`HubRouter`: the hub's `/mcp` - every enabled upstream of the caller, as one MCP server.

    endpoint = McpEndpoint()
    app = create_app(settings, components=[endpoint.component], mounts={"/mcp": endpoint})

Pieces (each its own module): `gate.py` authenticates and rate-limits, the mcpkit
Streamable HTTP app (`McpAsgiApp`, both eras) parses and answers, `handlers.py` replaces a
plain server's registries with the user's `directory.View`, `forward.py` sends calls through
this replica's `pool.UpstreamPool`, `relay.py` brings upstream questions back to the
caller, `events.py` keeps replicas in step, `sessions.py` seals legacy sessions into their
ids so any replica serves any session, and `audit.py` writes the audit log.

Replicas: nothing a request needs lives only in one process. Modern requests carry
everything; a legacy session is its sealed id; a modern `requestState` is sealed with a key
all replicas derive from the shared secret; views are rebuilt from the shared database;
upstream connections are per replica (each opens its own sessions upstream, so a legacy
upstream sees one session per hub replica). What events add is promptness: list_changed
reaches a user's sessions on every replica, and cached views are dropped at once.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
from starlette.types import Receive, Scope, Send

from mcpkit.hub.api.context import HubContext
from mcpkit.hub.catalog import UpstreamUnavailable, refresh_catalog
from mcpkit.hub.router import handlers
from mcpkit.hub.router.audit import AuditBuffer
from mcpkit.hub.router.directory import Directory, Route, View
from mcpkit.hub.router.events import Event, EventBus
from mcpkit.hub.router.gate import DPoPChecks, McpGate, TokenCache
from mcpkit.hub.router.pool import UpstreamPool
from mcpkit.hub.router.sessions import SealedSessions, session_digest
from mcpkit.hub.store import AuditEntry, Catalog, Outcome, UpstreamRecord
from mcpkit.hub.upstream_auth import credentials_for
from mcpkit.protocol import jsonrpc
from mcpkit.protocol.errors import McpError
from mcpkit.protocol.request_state import RequestStateCodec
from mcpkit.server.call import Call
from mcpkit.server.server import Server
from mcpkit.transports.server.http import asgi
from mcpkit.transports.server.http.app import McpAsgiApp
from mcpkit.transports.server.http.replay import ReplayLimits
from mcpkit.transports.server.http.security import LOOPBACK_HOSTS
from mcpkit.transports.server.http.sessions import HttpSession

log = logging.getLogger(__name__)

LIST_KINDS = ("tools", "prompts", "resources")
REVOKED_KEY = "mcpkit-hub:revoked:"
INSTRUCTIONS = (
    "The tools, prompts and resources of every MCP server you registered with this hub. "
    "Names are <server>__<name>."
)


class HubServer(Server):
    """A server whose lists are the caller's upstreams (handlers.py), not registries."""

    def __init__(self, router: HubRouter, version: str) -> None:
        super().__init__("mcpkit-hub", version, instructions=INSTRUCTIONS)
        self.engine.replace_handlers(handlers.methods(router))

    def has_capability(self, name: str) -> bool:
        # Offered whether or not the user has upstreams yet: lists change at run time.
        return name in ("logging", "tools", "resources", "prompts", "completions")

    def cache_hint(self, method: str) -> tuple[int, str]:
        return 0, "private"  # every list is one user's


class HubRouter:
    def __init__(self, context: HubContext, *, view_ttl_s: float = 5.0) -> None:
        from mcpkit import __version__

        self.context = context
        self.store = context.store
        self.redis = context.redis
        self.directory = Directory(self._catalogs, ttl_s=view_ttl_s)
        self.pool = UpstreamPool(self.store, context.settings,
                                 on_list_changed=self._upstream_list_changed,
                                 on_resource_updated=self._upstream_resource_updated,
                                 credentials=credentials_for(context, "call"))
        self.audit = AuditBuffer(self.store)
        self.bus = EventBus(self.redis)
        self.bus.subscribe(self._on_event)
        self.sessions = SealedSessions(context.box)
        self.server = HubServer(self, __version__)
        self.server.state_codec = RequestStateCodec(context.box.derive_key("request state"))
        settings = context.settings
        self.mcp = McpAsgiApp(
            self.server, legacy_sse=False, websocket=False, session_codec=self.sessions,
            # loopback stays allowed (local health checks, tests) next to the public names
            allowed_hosts=[*LOOPBACK_HOSTS, *settings.allowed_hosts]
            if settings.allowed_hosts else None,
            allowed_origins=list(settings.allowed_origins) or None,
            max_sessions=settings.max_sessions,
            max_sessions_per_principal=settings.max_sessions_per_user,
            replay_limits=ReplayLimits(total=settings.max_replay_bytes),
            max_bodies_in_flight_bytes=settings.max_bodies_in_flight_bytes,
        )
        self.mcp.stray_responses = self._stray_response
        # REST changes and the health checker's findings reach the user's sessions.
        context.catalog_listeners.append(self._catalog_listener)
        context.tool_names = self._tool_names
        self.gate = McpGate(self.mcp, TokenCache(self.store), limiter=context.limiter.acquire,
                            revoked=self._revoked if self.redis is not None else None,
                            auth_failures=context.auth_failures,
                            **_oauth_gate_options(context))
        context.user_listeners.append(self.gate.tokens.forget_user)

    # --- serving ------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.gate(scope, receive, send)
        await self._share_revocations()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[HubRouter]:
        """Background work (events, audit writer, idle sweeps) while the hub runs; on exit,
        end the MCP sessions and streams, close upstream connections, write the audit."""
        async with anyio.create_task_group() as tg:
            await tg.start(self.bus.run)
            tg.start_soon(self.audit.run)
            tg.start_soon(self._sweep_idle)
            try:
                yield self
            finally:
                self.mcp.shutdown()
                with anyio.CancelScope(shield=True):
                    await self.pool.close()
                tg.cancel_scope.cancel()

    async def _sweep_idle(self) -> None:
        while True:
            await anyio.sleep(60.0)
            await self.pool.sweep()

    # --- what handlers use --------------------------------------------------------------------

    async def view(self, user_id: int, *, fresh: bool = False) -> View:
        return await self.directory.view(user_id, fresh=fresh)

    async def _tool_names(self, user_id: int) -> Mapping[tuple[str, str], str]:
        return (await self.directory.view(user_id)).tool_names

    def record_call(self, call: Call, route: Route, outcome: str, seconds: float,
                    error: str | None) -> None:
        stored: Outcome = "tool_error" if outcome == "tool_error" else (
            "ok" if outcome == "ok" else "error")
        self.audit.add(AuditEntry(
            user_id=int(call.principal), upstream_id=route.upstream.id,
            upstream_name=route.upstream.name, tool=route.name,
            duration_ms=round(seconds * 1000, 3), outcome=stored,
            error=error if outcome != "cancelled" else "cancelled by the caller"))
        self.context.metrics.observe_tool_call(outcome, seconds)

    async def upstream_down(self, upstream: UpstreamRecord, reason: str) -> None:
        """A call could not reach `upstream`: record it unhealthy - it drops out of the
        user's lists until a health check or refresh finds it again - and say so once."""
        log.info("upstream %s (%s) of user %s is down: %s", upstream.name, upstream.id,
                 upstream.user_id, reason)
        try:
            await self.store.upstreams.set_health(upstream.user_id, upstream.id, "unhealthy",
                                                  error=reason)
        except Exception as error:  # it may have been deleted meanwhile
            log.debug("could not record upstream %s as down: %s", upstream.id, error)
        await self.catalog_changed(upstream.user_id)

    async def upstream_needs_auth(self, upstream: UpstreamRecord, reason: str) -> None:
        """A call found `upstream` wanting authorization: record it `needs_auth` (the REST
        API then shows the login action). Its tools stay listed - a call tells the caller
        what to do - and the lists do not change."""
        log.info("upstream %s (%s) of user %s needs authorization: %s", upstream.name,
                 upstream.id, upstream.user_id, reason)
        try:
            await self.store.upstreams.set_health(upstream.user_id, upstream.id, "needs_auth",
                                                  error=reason)
        except Exception as error:  # it may have been deleted meanwhile
            log.debug("could not record upstream %s as needing auth: %s", upstream.id, error)

    # --- catalogs -----------------------------------------------------------------------------

    async def _catalogs(self, user_id: int) -> Sequence[tuple[UpstreamRecord, Catalog]]:
        """The user's enabled upstreams with their stored catalogs; an upstream never listed
        yet is asked first (once: a failure marks it unhealthy, and it drops out)."""
        entries = await self.store.catalog.all(user_id)
        new = [upstream for upstream, catalog in entries
               if catalog.updated_at is None and upstream.health_status == "unknown"]
        if not new:
            return entries
        async with anyio.create_task_group() as tg:
            for upstream in new:
                tg.start_soon(self._refresh_quietly, upstream)
        return await self.store.catalog.all(user_id)

    async def _refresh_quietly(self, upstream: UpstreamRecord) -> bool:
        assert self.context.refresh_slots is not None
        async with self.context.refresh_slots.for_user(upstream.user_id):
            try:
                await refresh_catalog(self.store, upstream, self.context.settings,
                                      fetch=self.context.fetch,
                                      credentials=credentials_for(self.context, "catalog"))
            except UpstreamUnavailable:
                return False  # recorded on the upstream; it drops out of the lists
            except Exception as error:
                log.info("refreshing upstream %s failed: %s", upstream.id, error)
                return False
        return True

    async def catalog_changed(self, user_id: int, kinds: Sequence[str] = LIST_KINDS) -> None:
        """The user's lists changed (here or anywhere): every replica drops its cached view
        and tells the user's sessions."""
        await self.bus.publish({"type": "catalog", "user": user_id, "kinds": list(kinds)})

    async def _upstream_list_changed(self, upstream: UpstreamRecord, kind: str) -> None:
        if await self._refresh_quietly(upstream):
            await self.catalog_changed(upstream.user_id, [kind])

    async def _upstream_resource_updated(self, upstream: UpstreamRecord, uri: str) -> None:
        await self.bus.publish({"type": "resource", "user": upstream.user_id, "uri": uri})

    # --- events -------------------------------------------------------------------------------

    async def _on_event(self, event: Event) -> None:
        kind = event.get("type")
        user = event.get("user")
        if kind == "catalog" and isinstance(user, int):
            self.directory.forget(user)
            for list_kind in event.get("kinds") or ():
                if list_kind in LIST_KINDS:
                    await self.server.notify_list_changed(list_kind, principal=str(user))
        elif kind == "resource" and isinstance(user, int) and isinstance(event.get("uri"), str):
            await self.server.notifier.resource_updated(event["uri"], principal=str(user))
        elif kind == "revoked" and isinstance(event.get("digest"), str):
            self.sessions.remember_revoked(event["digest"])
        elif kind == "reply" and isinstance(event.get("session"), str):
            self._deliver_reply(event["session"], event.get("message"))

    async def _catalog_listener(self, user_id: int, upstream_id: str) -> None:
        await self.catalog_changed(user_id)

    # --- answers that reach the wrong replica -------------------------------------------------

    async def _stray_response(
        self, session: HttpSession, response: jsonrpc.Response | jsonrpc.ErrorResponse
    ) -> None:
        """A caller's answer to a question another replica asked (the balancer sent the
        POST here): pass it to every replica; the one holding the question takes it."""
        if not self.bus.shared:
            return
        if isinstance(response, jsonrpc.Response):
            wire = jsonrpc.encode_result(response.id, response.result)
        else:
            error = McpError(response.code, response.message, response.data)
            wire = jsonrpc.encode_error(response.id, error)
        await self.bus.publish({"type": "reply", "session": session_digest(session.id),
                                "message": wire.decode()})

    def _deliver_reply(self, digest: str, message: Any) -> None:
        if not isinstance(message, str):
            return
        for session in list(self.mcp.sessions.sessions.values()):
            if session_digest(session.id) == digest:
                try:
                    decoded = jsonrpc.decode_message(message.encode())
                except jsonrpc.DecodeFailure:
                    return
                if isinstance(decoded, jsonrpc.Response | jsonrpc.ErrorResponse):
                    session.connection.resolve(decoded)
                return

    # --- sessions across replicas -------------------------------------------------------------

    async def _share_revocations(self) -> None:
        """Sessions ended here (DELETE) are ended everywhere: in Redis for replicas that see
        the id later, and as an event for those holding it now."""
        while self.sessions.revocations:
            digest = self.sessions.revocations.pop()
            if self.redis is not None:
                try:
                    await self.redis.set(REVOKED_KEY + digest, "1",
                                         px=int(self.sessions.max_age_s * 1000))
                except Exception as error:
                    log.warning("could not share a session revocation: %s", error)
            await self.bus.publish({"type": "revoked", "digest": digest})

    async def _revoked(self, session_id: str) -> bool:
        """Whether a session id this replica does not hold was ended elsewhere."""
        if session_id in self.mcp.sessions.sessions or self.redis is None:
            return False
        if self.sessions.is_revoked(session_id):
            return True
        digest = session_digest(session_id)
        try:
            found = bool(await self.redis.exists(REVOKED_KEY + digest))
        except Exception as error:
            log.warning("could not check a session revocation: %s", error)
            return False
        if found:
            self.sessions.remember_revoked(digest)
        return found


class McpEndpoint:
    """The ASGI app mounted at `/mcp`: the router, once the hub's lifespan made it."""

    def __init__(self, *, view_ttl_s: float = 5.0) -> None:
        self.router: HubRouter | None = None
        self._view_ttl_s = view_ttl_s

    @asynccontextmanager
    async def component(self, context: HubContext) -> AsyncIterator[HubRouter]:
        router = HubRouter(context, view_ttl_s=self._view_ttl_s)
        async with router.running():
            self.router = router
            try:
                yield router
            finally:
                self.router = None

    def shutdown(self) -> None:
        """A stop signal came: end the MCP sessions and their streams now (the lifespan's
        shutdown does it again, harmlessly). Without this, uvicorn's graceful shutdown waited
        on every client's open SSE stream for the whole grace period (30 s by default)
        before the lifespan could end them."""
        if self.router is not None:
            self.router.mcp.shutdown()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        router = self.router
        if router is None:
            if scope["type"] == "http":
                await asgi.respond(send, 503, b"the hub is not running",
                                   content_type="text/plain")
            return
        await router(scope, receive, send)


def _oauth_gate_options(context: HubContext) -> dict[str, Any]:
    """What the /mcp gate needs of the hub's authorization server: its access-token checks,
    the resource metadata URL for challenges, and the DPoP checks (with the replay cache
    replicas share through Redis)."""
    from mcpkit.hub.oauth.dpop import DPOP_ALGORITHMS, ReplayCheckUnavailable

    oauth = context.oauth
    if oauth is None:
        return {}
    dpop = DPoPChecks(oauth.dpop.guard, context.settings.mcp_url, DPOP_ALGORITHMS,
                      (ReplayCheckUnavailable,))
    return {"access_tokens": oauth.tokens, "resource_metadata": oauth.resource_metadata_url,
            "dpop": dpop}
