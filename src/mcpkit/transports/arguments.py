"""Command-line options shared by every command that serves a `Server`:
`--transport stdio|http`, `--host`, `--port`, and running the server as they say."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mcpkit.server.server import Server


def add_transport_arguments(
    parser: argparse.ArgumentParser, *, default_transport: str = "http", default_port: int = 8000
) -> None:
    parser.add_argument("--transport", choices=("http", "stdio"), default=default_transport)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=default_port)
    from mcpkit.transports.http.serve import add_limit_arguments

    add_limit_arguments(parser)


def serve(server: Server, args: argparse.Namespace) -> None:
    """Run `server` on the transport the parsed arguments name (HTTP serves /mcp)."""
    if args.transport == "stdio":
        server.run_stdio()
    else:
        from mcpkit.transports.http.serve import limit_options

        server.run_http(host=args.host, port=args.port, log_level="warning",
                        **limit_options(args))
