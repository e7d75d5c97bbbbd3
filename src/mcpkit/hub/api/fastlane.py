"""`HubApp`: the hub's FastAPI app with a fast lane for exact-path mounts (`/mcp`).

Every MCP call is an HTTP request to `/mcp`, and the hub is a hop on each one: when `/mcp` was
a route, FastAPI's middleware stack (error handler, telemetry, body limit, exception
handler, exit stack, routing) took about 10% of a forwarded call's CPU. A mount is a whole
ASGI app with rules of its own (`/mcp` checks its own bodies, hosts and tokens), so it needs
none of that: a request whose path is a mount's goes straight to it, measured like any other
request (`mcpkit_hub_http_*` under the mount path) and answered 500 if it raises before it
responded - what Starlette's error handler would do. Everything else (the REST API, docs,
health, metrics, lifespan) goes through FastAPI as before.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from mcpkit.hub.metrics import HubMetrics, run_measured


class HubApp(FastAPI):
    def __init__(self, *, metrics: HubMetrics, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.metrics = metrics
        self.exact_mounts: dict[str, ASGIApp] = {}
        """Path (relative to the root path) -> the app that serves every HTTP request to it."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.exact_mounts:
            path = _route_path(scope)
            mount = self.exact_mounts.get(path)
            if mount is not None:
                scope["app"] = self  # as Starlette does: a mount finds `app.state` here
                await self._serve_mount(mount, path, scope, receive, send)
                return
        await super().__call__(scope, receive, send)

    async def _serve_mount(self, mount: ASGIApp, path: str, scope: Scope, receive: Receive,
                           send: Send) -> None:
        def done(status: int, seconds: float) -> None:
            self.metrics.observe_http(str(scope["method"]), path, status, seconds)

        await run_measured(mount, scope, receive, send, done, answer_errors=True)


def _route_path(scope: Scope) -> str:
    """The request's path without the root path (ASGI puts the root path in `path` too)."""
    path = str(scope["path"])
    root = str(scope.get("root_path", ""))
    if root and path.startswith(root):
        return path[len(root):] or "/"
    return path
