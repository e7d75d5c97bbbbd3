"""Running the ASGI app with uvicorn (uvloop + httptools when installed).

On SIGINT/SIGTERM the app ends its sessions and subscriptions first, so long-lived SSE
streams close and uvicorn's graceful shutdown does not wait on them; requests in flight
still get `graceful_s` to finish.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import uvicorn

    from mcpkit.server.server import Server


def uvicorn_config(app: Any, *, http: str = "auto", **options: Any) -> uvicorn.Config:
    """uvicorn's settings for serving an mcpkit ASGI app: lifespan on, no `Server` header,
    and each response's head and body in one write (`coalesce.py`) over uvicorn's `http`
    implementation ("auto", "httptools", "h11"). `options` are `uvicorn.Config`'s (host,
    port, log_level, timeout_graceful_shutdown...)."""
    import uvicorn

    from mcpkit.transports.http.coalesce import coalescing_protocol

    options.setdefault("lifespan", "on")
    options.setdefault("server_header", False)
    return uvicorn.Config(app, http=coalescing_protocol(http), **options)


def run_http(
    server: Server, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
    graceful_s: float = 5.0, wrap: Callable[[Any], Any] | None = None, **app_options: Any,
) -> None:
    """Serve with uvicorn until SIGINT/SIGTERM. `wrap(app)` may put ASGI middleware in
    front of the MCP app (it must forward `shutdown()`)."""
    import uvicorn

    app = server.asgi_app(**app_options)
    if wrap is not None:
        app = wrap(app)

    class _Uvicorn(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.shutdown()
            super().handle_exit(sig, frame)

    config = uvicorn_config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=int(graceful_s))
    _Uvicorn(config).run()
