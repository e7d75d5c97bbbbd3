"""`create_app`: the hub's ASGI application (FastAPI).

    app = create_app(settings)                       # opens the store and key on start-up
    app = create_app(settings, store, box)           # or uses the caller's (not closed)
    app = create_app(settings, components=[router_component], mounts={"/mcp": mcp_asgi})
    app = create_app(settings, store, box, redis=redis, components=[health_checker])  # serve

What it serves: the REST API under `/api/v1` (routes/), `/openapi.json` and `/docs` (Swagger
UI, its assets served from the package: docs.py), `/healthz`, `/readyz` and `/metrics`
(Prometheus text, metrics.py), and the web console at `/` (hub/console: pages users sign
in to, acting through this same API). Every error is `{"error": {code, message, field?}}`
(errors.py); bodies are bounded and must be JSON (limits.py); every authenticated route spends
a token of the caller's rate limit first (429 with `Retry-After` when there is none,
ratelimit.py) and every request is measured.

Built in, before the caller's components: the Redis connection (shared.py) when `redis` is
given or `settings.redis_url` is set - it moves the rate limits into Redis; and the OAuth
authorization server users sign in to (hub/oauth: its metadata, /oauth/* endpoints and the
access tokens /mcp accepts beside API tokens).

The seams for what comes next (the `/mcp` endpoint):
- `components`: each is called with the `HubContext` once the store is open and returns an
  async context manager, entered in order on start-up and exited in reverse on shutdown
  (after uvicorn stopped taking requests and let the in-flight ones finish) - a router with
  upstream connections, the health checker (health.py).
- `mounts`: ASGI apps serving every HTTP request to an exact path (`/mcp`), ahead of
  FastAPI's middleware and routing (fastlane.py); they find the context on
  `scope["app"].state.hub` (or capture it in a component).
- `routers`: more FastAPI routers to include.
The context (`app.state.hub`) exists only while the app runs: it belongs to the server's
event loop, like the database engine in it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, FastAPI
from starlette.types import ASGIApp

from mcpkit import __version__
from mcpkit.hub.api.auth import Context, CurrentUser
from mcpkit.hub.api.context import CatalogFetcher, HostResolver, HubContext
from mcpkit.hub.api.docs import install_docs
from mcpkit.hub.api.errors import ApiError, install_handlers
from mcpkit.hub.api.fastlane import HubApp
from mcpkit.hub.api.limits import RequestLimits
from mcpkit.hub.api.routes import (
    admin,
    admin_ops,
    health,
    me,
    my_tokens,
    upstream_oauth,
    upstreams,
)
from mcpkit.hub.api.schemas import ErrorOut
from mcpkit.hub.console.routes import router as console_router
from mcpkit.hub.crypto import SecretBox, load_secret_box
from mcpkit.hub.metrics import HubMetrics, MetricsMiddleware, metrics_router
from mcpkit.hub.oauth import oauth_component, oauth_router
from mcpkit.hub.ratelimit import retry_after, user_key
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.shared import redis_connection
from mcpkit.hub.store import Store

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

Component = Callable[[HubContext], AbstractAsyncContextManager[Any]]
OPENAPI_URL = "/openapi.json"

DESCRIPTION = """\
Register your MCP servers ("upstreams") and reach them all through one authenticated endpoint.

Authenticate with an API token: `Authorization: Bearer <token>` (an operator makes one with
`mcpkit hub token create USER`). Errors are `{"error": {"code", "message", "field"?}}`.
Lists are pages: `{"items": [...], "next_cursor": "…" | null}`.
Each user has a request budget (a burst, then a steady rate): past it, 429 with `Retry-After`.
"""
RATE_LIMITED = {
    429: {
        "model": ErrorOut,
        "description": "Too many requests: the caller's rate limit is spent",
        "headers": {
            "Retry-After": {
                "description": "Seconds until a request will be accepted again",
                "schema": {"type": "integer", "minimum": 1},
            },
        },
    },
}


async def rate_limited(user: CurrentUser, context: Context) -> None:
    """The dependency of every authenticated route: spend one token of the caller's budget,
    or 429 with `Retry-After` (after authentication: a stranger's requests are 401 and cost
    nobody's budget)."""
    wait = await context.limiter.acquire(user_key(user.id))
    if wait is not None:
        seconds = retry_after(wait)
        raise ApiError(429, f"too many requests: try again in {seconds} s",
                       code="rate_limited", headers={"Retry-After": str(seconds)})


def create_app(
    settings: HubSettings,
    store: Store | None = None,
    box: SecretBox | None = None,
    *,
    resolve: HostResolver | None = None,
    fetch: CatalogFetcher | None = None,
    redis: Redis | None = None,
    components: Sequence[Component] = (),
    mounts: Mapping[str, ASGIApp] | None = None,
    routers: Sequence[APIRouter] = (),
) -> HubApp:
    """The hub's app for `settings`.

    Without `store`, start-up opens (and migrates) the database at
    `settings.resolved_database_url` and shutdown closes it; without `box`, the secret key
    comes from $MCPKIT_HUB_SECRET_KEY or the data directory's key file. `resolve` and `fetch`
    replace the DNS lookup of the SSRF check and the upstream client (tests). `redis` is a
    client the caller opened (and closes); without it, `settings.redis_url` is opened on
    start-up if set.
    """
    metrics = HubMetrics()
    built_in: list[Component] = [redis_connection(redis), oauth_component]

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with AsyncExitStack() as stack:
            the_box = box if box is not None else load_secret_box(settings.data_dir)
            the_store = store
            if the_store is None:
                the_store = await Store.open(
                    settings.resolved_database_url, the_box, allow_stdio=settings.allow_stdio)
                stack.push_async_callback(the_store.close)
            context = HubContext(settings, the_store, the_box, metrics=metrics)
            if resolve is not None:
                context.resolve = resolve
            if fetch is not None:
                context.fetch = fetch
            for component in [*built_in, *components]:
                await stack.enter_async_context(component(context))
            app.state.hub = context
            # debug: `mcpkit hub serve` prints its start-up summary once it listens
            log.debug("hub ready: %s", settings.describe())
            try:
                yield
            finally:
                app.state.hub = None
                log.info("hub stopping")

    app = HubApp(
        metrics=metrics,
        title="mcpkit hub",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_url=OPENAPI_URL,
        docs_url=None,  # served from the package instead of a CDN: docs.py
        redoc_url=None,
    )
    install_docs(app, OPENAPI_URL)
    install_handlers(app)
    app.add_middleware(RequestLimits, max_body_bytes=settings.max_body_bytes)
    # last added is outermost: 413/415 refusals are measured too
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=lambda: app.router.routes)
    app.include_router(health.router())
    app.include_router(metrics_router(metrics))
    limited: dict[str, Any] = {"dependencies": [Depends(rate_limited)],
                               "responses": RATE_LIMITED}
    app.include_router(me.router(), **limited)
    app.include_router(my_tokens.router(settings), **limited)
    app.include_router(upstreams.router(settings), **limited)
    app.include_router(upstream_oauth.router(), **limited)
    app.include_router(upstream_oauth.callback_router())
    app.include_router(admin.router(settings), **limited)
    app.include_router(admin_ops.router(settings), **limited)
    app.include_router(oauth_router())
    app.include_router(console_router())
    for extra in routers:
        app.include_router(extra)
    # Served ahead of FastAPI's middleware and routing (fastlane.py): every MCP call is one.
    app.exact_mounts.update(mounts or {})
    return app
