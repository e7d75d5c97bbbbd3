"""`create_app`: the hub's ASGI application (FastAPI).

    app = create_app(settings)                       # opens the store and key on start-up
    app = create_app(settings, store, box)           # or uses the caller's (not closed)
    app = create_app(settings, components=[router_component], mounts={"/mcp": mcp_asgi})

What it serves: the REST API under `/api/v1` (routes/), `/openapi.json` and `/docs`,
`/healthz`, `/readyz` and `/metrics` (Prometheus text, metrics.py). Every error is
`{"error": {code, message, field?}}` (errors.py); bodies are bounded and must be JSON
(limits.py); every request is measured.

The seams for what comes next (the `/mcp` endpoint, Redis, health checks):
- `components`: each is called with the `HubContext` once the store is open and returns an
  async context manager, entered in order on start-up and exited in reverse on shutdown
  (after uvicorn stopped taking requests and let the in-flight ones finish) - a router with
  upstream connections, a health checker, a Redis client.
- `mounts`: ASGI apps mounted at a path (`/mcp`); they find the context on
  `scope["app"].state.hub` (or capture it in a component).
- `routers`: more FastAPI routers to include.
The context (`app.state.hub`) exists only while the app runs: it belongs to the server's
event loop, like the database engine in it.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.types import ASGIApp

from mcpkit import __version__
from mcpkit.hub.api.context import CatalogFetcher, HostResolver, HubContext
from mcpkit.hub.api.errors import install_handlers
from mcpkit.hub.api.limits import RequestLimits
from mcpkit.hub.api.routes import admin, health, me, upstreams
from mcpkit.hub.crypto import SecretBox, load_secret_box
from mcpkit.hub.metrics import HubMetrics, MetricsMiddleware, metrics_router
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Store

log = logging.getLogger("mcpkit.hub")

Component = Callable[[HubContext], AbstractAsyncContextManager[Any]]

DESCRIPTION = """\
Register your MCP servers ("upstreams") and reach them all through one authenticated endpoint.

Authenticate with an API token: `Authorization: Bearer <token>` (an operator makes one with
`mcpkit hub token create USER`). Errors are `{"error": {"code", "message", "field"?}}`.
Lists are pages: `{"items": [...], "next_cursor": "…" | null}`.
"""


def create_app(
    settings: HubSettings,
    store: Store | None = None,
    box: SecretBox | None = None,
    *,
    resolve: HostResolver | None = None,
    fetch: CatalogFetcher | None = None,
    components: Sequence[Component] = (),
    mounts: Mapping[str, ASGIApp] | None = None,
    routers: Sequence[APIRouter] = (),
) -> FastAPI:
    """The hub's app for `settings`.

    Without `store`, start-up opens (and migrates) the database at
    `settings.resolved_database_url` and shutdown closes it; without `box`, the secret key
    comes from $MCPKIT_HUB_SECRET_KEY or the data directory's key file. `resolve` and `fetch`
    replace the DNS lookup of the SSRF check and the upstream client (tests).
    """
    metrics = HubMetrics()

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
            for component in components:
                await stack.enter_async_context(component(context))
            app.state.hub = context
            log.info("hub ready: %s", settings.describe())
            try:
                yield
            finally:
                app.state.hub = None
                log.info("hub stopping")

    app = FastAPI(
        title="mcpkit hub",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url="/docs",
        redoc_url=None,
    )
    install_handlers(app)
    app.add_middleware(RequestLimits, max_body_bytes=settings.max_body_bytes)
    # last added is outermost: 413/415 refusals are measured too
    app.add_middleware(MetricsMiddleware, metrics=metrics, routes=lambda: app.router.routes)
    app.include_router(health.router())
    app.include_router(metrics_router(metrics))
    app.include_router(me.router())
    app.include_router(upstreams.router(settings))
    app.include_router(admin.router(settings))
    for extra in routers:
        app.include_router(extra)
    for path, asgi in (mounts or {}).items():
        app.mount(path, asgi)
    return app
