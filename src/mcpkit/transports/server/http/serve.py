"""Running the ASGI app with uvicorn (uvloop + httptools when installed).

The port is bound before anything starts (`listen.py`): a port in use is one `ListenError`,
and `on_ready(url)` is called only once uvicorn has started serving on it, so whatever
announces the URL announces a server that answers.

On SIGINT/SIGTERM the app ends its sessions and subscriptions first (on the event loop's
next turn, not inside the signal handler), so long-lived SSE streams close and uvicorn's
graceful shutdown does not wait on them; a stream asked for from then on is refused or ended
at once (`McpAsgiApp.stopping`); requests in flight
still get `graceful_s` to finish; then `run_http` returns normally (no re-raised signal, no
`KeyboardInterrupt`), so the caller's clean-up runs and the process exits 0. A second
SIGINT stops waiting for requests in flight.

Connections are limited (`connections.py`): at most `max_connections` at once, a request's
headers within `header_timeout_s`, its body within `body_timeout_s`. A request's head is
bounded in bytes (`head_limits.py`: 414, 431), and so are WebSocket messages, one by one and
all those being received at once (`websocket_limits.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import socket
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from mcpkit.transports.server.http.connections import (
    DEFAULT_BODY_TIMEOUT_S,
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_CONNECTIONS,
    ConnectionLimits,
)
from mcpkit.transports.server.http.head_limits import (
    DEFAULT_MAX_HEAD_BYTES,
    DEFAULT_MAX_HEADERS,
    DEFAULT_MAX_URL_BYTES,
    HeadLimits,
)
from mcpkit.transports.server.http.listen import listen, listening_url
from mcpkit.transports.server.http.websocket_limits import (
    DEFAULT_MAX_IN_FLIGHT_BYTES,
    DEFAULT_MAX_MESSAGE_BYTES,
    WebSocketLimits,
)

if TYPE_CHECKING:
    import uvicorn

    from mcpkit.server.engine import HasEngine

log = logging.getLogger("uvicorn.error")  # where uvicorn says it is running


def uvicorn_config(
    app: Any, *, http: str = "auto", limits: ConnectionLimits | None = None,
    head_limits: HeadLimits | None = None, ws_limits: WebSocketLimits | None = None,
    **options: Any,
) -> uvicorn.Config:
    """uvicorn's settings for serving an mcpkit ASGI app: lifespan on, no `Server` header,
    connection `limits` (default `ConnectionLimits()`, `connections.py`), request heads
    within `head_limits` (`head_limits.py`), WebSocket messages within `ws_limits`
    (`websocket_limits.py`), and each response's head and body in one write
    (`coalesce.py`) over uvicorn's `http` implementation ("auto", "httptools", "h11").
    `options` are `uvicorn.Config`'s (host, port, log_level, timeout_graceful_shutdown...)."""
    import uvicorn

    from mcpkit.transports.server.http.coalesce import coalescing_protocol
    from mcpkit.transports.server.http.connections import guarded_protocol
    from mcpkit.transports.server.http.head_limits import head_limited_protocol
    from mcpkit.transports.server.http.websocket_limits import budgeted_ws_protocol

    head = head_limits or HeadLimits()
    ws = ws_limits or WebSocketLimits()
    options.setdefault("lifespan", "on")
    options.setdefault("server_header", False)
    options.setdefault("h11_max_incomplete_event_size", head.max_head_bytes)
    options.setdefault("ws_max_size", ws.max_message_bytes)
    if "ws" not in options and (ws_protocol := budgeted_ws_protocol(ws)) is not None:
        options["ws"] = ws_protocol
    base = head_limited_protocol(coalescing_protocol(http), head)
    protocol = guarded_protocol(base, limits or ConnectionLimits())
    return uvicorn.Config(app, http=protocol, **options)


def run_http(
    server: HasEngine, *, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
    graceful_s: float = 5.0, wrap: Callable[[Any], Any] | None = None,
    on_ready: Callable[[str], None] | None = None,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S,
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S, max_url_bytes: int = DEFAULT_MAX_URL_BYTES,
    max_head_bytes: int = DEFAULT_MAX_HEAD_BYTES, max_headers: int = DEFAULT_MAX_HEADERS,
    max_ws_bytes_in_flight: int = DEFAULT_MAX_IN_FLIGHT_BYTES, **app_options: Any,
) -> None:
    """Serve with uvicorn until SIGINT/SIGTERM, then return. Raises `ListenError` (before
    anything starts) when `host`:`port` cannot be bound. `on_ready(url)` is called once the
    server answers at `url` ("http://HOST:PORT", the real port when `port` is 0).
    `wrap(app)` may put ASGI middleware in front of the MCP app (it must forward
    `shutdown()`). `max_connections`, `header_timeout_s`, `body_timeout_s`:
    `connections.py`; `max_url_bytes`, `max_head_bytes`, `max_headers`: `head_limits.py`;
    `max_ws_bytes_in_flight`: `websocket_limits.py` (one WebSocket message may be as big as
    an HTTP body, `max_body_bytes`); `app_options` are `McpAsgiApp`'s (max_sessions,
    max_sessions_per_principal...)."""
    from mcpkit.transports.server.http.app import McpAsgiApp

    sockets = listen(host, port)
    app: Any = McpAsgiApp(server, **app_options)
    if wrap is not None:
        app = wrap(app)
    limits = ConnectionLimits(max_connections, header_timeout_s, body_timeout_s)
    head = HeadLimits(max_url_bytes, max_head_bytes, max_headers)
    ws = WebSocketLimits(app_options.get("max_body_bytes", DEFAULT_MAX_MESSAGE_BYTES),
                         max_ws_bytes_in_flight)
    config = uvicorn_config(app, host=host, port=port, log_level=log_level,
                            timeout_graceful_shutdown=int(graceful_s), limits=limits,
                            head_limits=head, ws_limits=ws)
    url = listening_url(host, sockets)
    uvicorn_server = stopping_server_class()(
        config, on_stop=app.shutdown, on_ready=lambda: _ready(url, on_ready))
    try:
        uvicorn_server.run(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()


def _ready(url: str, on_ready: Callable[[str], None] | None) -> None:
    log.info("serving on %s (Ctrl-C to stop)", url)
    if on_ready is not None:
        on_ready(url)


@functools.cache
def stopping_server_class() -> Any:
    """uvicorn's `Server`, made for serving on sockets `listen` bound, from a command:

    - `on_ready()` is called once it serves (after the lifespan started and the sockets are
      being accepted from), never when start-up failed;
    - a stop signal (SIGINT, SIGTERM) calls `on_stop()` first (the app ends its streams, so
      the graceful shutdown does not wait on them), then shuts down gracefully as uvicorn
      does;
    - after that `serve()` ends normally: uvicorn raises the signal again at the end, which
      makes a clean stop a `KeyboardInterrupt` traceback (SIGINT) or exit status -15
      (SIGTERM) and skips the caller's clean-up.

    Built on first use so that importing this module does not import uvicorn (hence typed
    `Any`: a subclass of `uvicorn.Server` whose constructor also takes those two)."""
    import uvicorn

    class StoppingServer(uvicorn.Server):
        def __init__(self, config: uvicorn.Config, *,
                     on_ready: Callable[[], None] | None = None,
                     on_stop: Callable[[], None] | None = None) -> None:
            super().__init__(config)
            self.on_ready = on_ready
            self.on_stop = on_stop

        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and not self.should_exit and self.on_ready is not None:
                self.on_ready()

        def handle_exit(self, sig: int, frame: Any) -> None:
            if self.on_stop is not None:
                _call_from_signal_handler(self.on_stop)
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            with super().capture_signals():
                try:
                    yield
                finally:
                    captured = getattr(self, "_captured_signals", None)
                    if isinstance(captured, list):
                        captured.clear()  # handled: not raised again on the way out

    return StoppingServer


def _call_from_signal_handler(callback: Callable[[], None]) -> None:
    """Run `callback` on the event loop's next turn, not inside the signal handler.

    uvicorn installs its handler with `signal.signal`, so Python runs it between two
    bytecodes of whatever the loop was running: the middle of a request's handler (seen:
    between a `subscriptions/listen` stream's acknowledgement and its registration, which
    then missed the "end every stream" step and was held for the whole grace) or of a
    session table's update. Scheduled, `callback` runs between two steps of the tasks.
    Outside a running loop (a signal before serving began) it runs at once."""
    import asyncio

    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        callback()
        return
    loop.call_soon_threadsafe(callback)  # wakes the loop, as asyncio's own signal handling


def add_limit_arguments(parser: argparse.ArgumentParser) -> None:
    """The HTTP limits as command-line options (`mcpkit serve`, `mcpkit example`)."""
    from mcpkit.transports.server.http.sessions import (
        DEFAULT_MAX_SESSIONS,
        DEFAULT_MAX_SESSIONS_PER_PRINCIPAL,
    )

    group = parser.add_argument_group("HTTP limits")
    group.add_argument("--max-connections", type=positive_int, default=DEFAULT_MAX_CONNECTIONS,
                       metavar="N", help="open connections at once; past it the longest-"
                       "waiting idle or slow one is closed, else 503 (default "
                       f"{DEFAULT_MAX_CONNECTIONS}, lowered to fit the file descriptor limit)")
    group.add_argument("--header-timeout", type=positive_float,
                       default=DEFAULT_HEADER_TIMEOUT_S, metavar="S",
                       help="seconds a request's headers may take to arrive (default "
                       f"{DEFAULT_HEADER_TIMEOUT_S:g})")
    group.add_argument("--body-timeout", type=positive_float, default=DEFAULT_BODY_TIMEOUT_S,
                       metavar="S", help="seconds a request's body may take to arrive "
                       f"(default {DEFAULT_BODY_TIMEOUT_S:g})")
    group.add_argument("--max-url-bytes", type=positive_int, default=DEFAULT_MAX_URL_BYTES,
                       metavar="N", help="bytes of a request's path and query; past it 414 "
                       f"(default {DEFAULT_MAX_URL_BYTES})")
    group.add_argument("--max-header-bytes", type=positive_int,
                       default=DEFAULT_MAX_HEAD_BYTES, metavar="N",
                       help="bytes of a request's line and headers; past it 431 (default "
                       f"{DEFAULT_MAX_HEAD_BYTES})")
    group.add_argument("--max-headers", type=positive_int, default=DEFAULT_MAX_HEADERS,
                       metavar="N", help="header lines of a request; past it 431 (default "
                       f"{DEFAULT_MAX_HEADERS})")
    group.add_argument("--max-ws-bytes-in-flight", type=positive_int,
                       default=DEFAULT_MAX_IN_FLIGHT_BYTES, metavar="N",
                       help="bytes of WebSocket messages being received at once, over all "
                       "connections; past it a connection is closed with 1013 (default "
                       f"{DEFAULT_MAX_IN_FLIGHT_BYTES})")
    group.add_argument("--max-sessions", type=positive_int, default=DEFAULT_MAX_SESSIONS,
                       metavar="N", help=f"legacy sessions in all (default {DEFAULT_MAX_SESSIONS})")
    group.add_argument("--max-sessions-per-client", type=positive_int,
                       default=DEFAULT_MAX_SESSIONS_PER_PRINCIPAL, metavar="N",
                       help="legacy sessions per caller (token or address); at the cap its "
                       f"oldest idle one is closed (default {DEFAULT_MAX_SESSIONS_PER_PRINCIPAL})")


def limit_options(args: argparse.Namespace) -> dict[str, Any]:
    """`run_http`'s keyword arguments for the options `add_limit_arguments` added."""
    return {
        "max_connections": args.max_connections,
        "header_timeout_s": args.header_timeout,
        "body_timeout_s": args.body_timeout,
        "max_url_bytes": args.max_url_bytes,
        "max_head_bytes": args.max_header_bytes,
        "max_headers": args.max_headers,
        "max_ws_bytes_in_flight": args.max_ws_bytes_in_flight,
        "max_sessions": args.max_sessions,
        "max_sessions_per_principal": args.max_sessions_per_client,
    }


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number above 0, not {text!r}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return value
