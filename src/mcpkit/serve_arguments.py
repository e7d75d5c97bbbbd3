"""Command-line options shared by every command that serves a `Server`:
`--transport stdio|http`, `--host`, `--port`, the limits, `--auth-*` (serve_authorization.py),
and running the server as they say."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcpkit.server.server import Server


def add_transport_arguments(
    parser: argparse.ArgumentParser, *, default_transport: str = "http", default_port: int = 8000
) -> None:
    parser.add_argument("--transport", choices=("http", "stdio"), default=default_transport,
                        help="serve Streamable HTTP at http://HOST:PORT/mcp, or stdio for a "
                        "client that starts the server as a subprocess "
                        f"(default {default_transport})")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on; "
                        "0.0.0.0 for every address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=default_port, help="the port to listen "
                        f"on; 0 picks a free one (default {default_port})")
    from mcpkit.transports.server.http.serve import add_limit_arguments

    add_limit_arguments(parser)
    add_admission_arguments(parser)
    from mcpkit.serve_authorization import add_authorization_arguments

    add_authorization_arguments(parser)


def add_admission_arguments(parser: argparse.ArgumentParser) -> None:
    """The limits on concurrent requests (server/admission.py), for every transport."""
    from mcpkit.server import admission
    from mcpkit.transports.server.http.serve import positive_int

    group = parser.add_argument_group("concurrency limits")
    group.add_argument("--max-requests-per-connection", type=positive_int, metavar="N",
                       default=admission.DEFAULT_MAX_REQUESTS_IN_FLIGHT,
                       help="requests one connection may have running; past it -32000 "
                       f"(default {admission.DEFAULT_MAX_REQUESTS_IN_FLIGHT})")
    group.add_argument("--max-requests-per-client", type=positive_int, metavar="N",
                       default=admission.DEFAULT_MAX_REQUESTS_PER_CALLER,
                       help="requests one caller (token or address) may have running over "
                       f"all its connections (default {admission.DEFAULT_MAX_REQUESTS_PER_CALLER})")
    group.add_argument("--max-request-bytes-per-client", type=positive_int, metavar="BYTES",
                       default=admission.DEFAULT_MAX_BYTES_PER_CALLER,
                       help="decoded params one caller's running requests may hold; past it "
                       f"-32000 (default {admission.DEFAULT_MAX_BYTES_PER_CALLER})")
    group.add_argument("--max-request-bytes", type=positive_int, metavar="BYTES",
                       default=admission.DEFAULT_MAX_BYTES,
                       help="decoded params all running requests may hold "
                       f"(default {admission.DEFAULT_MAX_BYTES})")


def apply_admission_arguments(server: Server, args: argparse.Namespace) -> None:
    """Set `server`'s concurrency limits from the options `add_admission_arguments` added."""
    server.admission.max_per_connection = args.max_requests_per_connection
    server.admission.max_per_caller = args.max_requests_per_client
    server.admission.max_bytes_per_caller = args.max_request_bytes_per_client
    server.admission.max_bytes = args.max_request_bytes


def serve(server: Server, args: argparse.Namespace,
          on_ready: Callable[[str], None] | None = None) -> None:
    """Run `server` on the transport the parsed arguments name (HTTP serves /mcp) until
    stdin ends (stdio) or a stop signal comes. `on_ready(where)` is called once it serves:
    `where` is "stdio" or the endpoint's URL (the real port when `--port 0`). Raises
    `mcpkit.transports.server.http.listen.ListenError` when the port cannot be bound, and
    `mcpkit.serve_authorization.AuthOptionsError` when the `--auth-*` options are wrong or the
    issuer cannot be used (before anything listens)."""
    from mcpkit.serve_authorization import check_authorization_arguments, resource_auth

    check_authorization_arguments(args, static_token=None, transport=args.transport)
    authorization = resource_auth(args)
    apply_admission_arguments(server, args)
    if args.transport == "stdio":
        server.run_stdio(on_ready=None if on_ready is None else lambda: on_ready("stdio"))
    else:
        from mcpkit.transports.server.http.serve import limit_options

        server.run_http(host=args.host, port=args.port, log_level="warning",
                        on_ready=None if on_ready is None else lambda url: on_ready(url + "/mcp"),
                        authorization=authorization, **limit_options(args))
