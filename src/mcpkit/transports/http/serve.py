"""Running the ASGI app with uvicorn (uvloop + httptools when installed).

On SIGINT/SIGTERM the app ends its sessions and subscriptions first, so long-lived SSE
streams close and uvicorn's graceful shutdown does not wait on them; requests in flight
still get `graceful_s` to finish.

Connections are limited (`connections.py`): at most `max_connections` at once, a request's
headers within `header_timeout_s`, its body within `body_timeout_s`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from mcpkit.transports.http.connections import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    ConnectionLimits,
)

if TYPE_CHECKING:
    import uvicorn

    from mcpkit.server.server import Server


def uvicorn_config(
    app: Any, *, http: str = "auto", limits: ConnectionLimits | None = None, **options: Any
) -> uvicorn.Config:
    """uvicorn's settings for serving an mcpkit ASGI app: lifespan on, no `Server` header,
    connection `limits` (default `ConnectionLimits()`, `connections.py`), and each
    response's head and body in one write (`coalesce.py`) over uvicorn's `http`
    implementation ("auto", "httptools", "h11"). `options` are `uvicorn.Config`'s (host,
    port, log_level, timeout_graceful_shutdown...)."""
    import uvicorn

    from mcpkit.transports.http.coalesce import coalescing_protocol
    from mcpkit.transports.http.connections import guarded_protocol

    options.setdefault("lifespan", "on")
    options.setdefault("server_header", False)
    protocol = guarded_protocol(coalescing_protocol(http), limits or ConnectionLimits())
    return uvicorn.Config(app, http=protocol, **options)


def run_http(
    server: Server, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
    graceful_s: float = 5.0, wrap: Callable[[Any], Any] | None = None,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S, **app_options: Any,
) -> None:
    """Serve with uvicorn until SIGINT/SIGTERM. `wrap(app)` may put ASGI middleware in
    front of the MCP app (it must forward `shutdown()`). `max_connections`,
    `header_timeout_s`, `body_timeout_s`: `connections.py`; `app_options` are
    `McpAsgiApp`'s (max_sessions, max_sessions_per_principal...)."""
    import uvicorn

    app = server.asgi_app(**app_options)
    if wrap is not None:
        app = wrap(app)

    class _Uvicorn(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            app.shutdown()
            super().handle_exit(sig, frame)

    limits = ConnectionLimits(max_connections, header_timeout_s, body_timeout_s)
    config = uvicorn_config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=int(graceful_s), limits=limits)
    _Uvicorn(config).run()


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The HTTP limits as command-line options (`mcpkit serve`, `mcpkit example`)."""
    from mcpkit.transports.http.sessions import (
        DEFAULT_MAX_SESSIONS,
        DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
    )

    group = parser.add_argument_group("HTTP limits")
    group.add_argument("--max-connections", type=_positive_int, default=DEFAULT_MAX_CONNECTIONS,
                       metavar="N", help="open connections at once; past it the longest-"
                       "waiting idle or slow one is closed, else 503 (default "
                       f"{DEFAULT_MAX_CONNECTIONS}, lowered to fit the file descriptor limit)")
    group.add_argument("--header-timeout", type=_positive_float,
                       default=DEFAULT_HEADER_TIMEOUT_S, metavar="S",
                       help="seconds a request's headers may take to arrive (default "
                       f"{DEFAULT_HEADER_TIMEOUT_S:g})")
    group.add_argument("--body-timeout", type=_positive_float, default=DEFAULT_BODY_TIMEOUT_S,
                       metavar="S", help="seconds a request's body may take to arrive "
                       f"(default {DEFAULT_BODY_TIMEOUT_S:g})")
    group.add_argument("--max-sessions", type=_positive_int, default=DEFAULT_MAX_SESSIONS,
                       metavar="N", help=f"legacy sessions in all (default {DEFAULT_MAX_SESSIONS})")
    group.add_argument("--max-sessions-per-client", type=_positive_int,
                       default=DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, metavar="N",
                       help="legacy sessions per caller (token or address); at the cap its "
                       f"oldest idle one is closed (default {DEFAULT_MAX_SESSIONS_PER_PRINCIPAL})")


def limit_options(args: argparse.Namespace) -> dict[str, Any]:
    """`run_http`'s keyword arguments for the options `add_limit_arguments` added."""
    return {
        "max_connections": args.max_connections,
        "header_timeout_s": args.header_timeout,
        "body_timeout_s": args.body_timeout,
        "max_sessions": args.max_sessions,
        "max_sessions_per_principal": args.max_sessions_per_client,
    }


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, not {text!r}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return value
