"""Running the ASGI app with uvicorn (uvloop + httptools when installed).

On SIGINT/SIGTERM the app ends its sessions and subscriptions first, so long-lived SSE
streams close and uvicorn's graceful shutdown does not wait on them; requests in flight
still get `graceful_s` to finish.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcpkit.server.server import Server


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

    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, lifespan="on",
        timeout_graceful_shutdown=int(graceful_s), server_header=False,
    )
    _Uvicorn(config).run()
