"""A server for the in-flight limit tests, run as a real process:

    python tests/transports/slow_server.py --transport stdio|http [--port PORT]

Tools: `slow(seconds)` sleeps (at most 30 s) then answers "done"; `hold(items, seconds)`
does the same holding its (large) `items` argument. Over HTTP, a request's
`X-Test-Principal` header is its principal (standing in for an authenticating middleware,
so one test can play several callers from one address).
"""

from __future__ import annotations

import argparse
from typing import Any

import anyio

from mcpkit import Server
from mcpkit.serve_arguments import add_transport_arguments, apply_admission_arguments
from mcpkit.transports.server.http.app import PRINCIPAL_KEY
from mcpkit.transports.server.http.serve import limit_options

PRINCIPAL_HEADER = b"x-test-principal"


class PrincipalFromHeader:
    """ASGI middleware: the `X-Test-Principal` header, if any, becomes the principal."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        for name, value in scope.get("headers") or ():
            if name.lower() == PRINCIPAL_HEADER:
                scope = {**scope, PRINCIPAL_KEY: value.decode("latin-1")}
        await self.app(scope, receive, send)

    def shutdown(self) -> None:
        self.app.shutdown()


def build() -> Server:
    server = Server("slow", "1.0.0")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep `seconds` (at most 30), then answer."""
        await anyio.sleep(min(max(seconds, 0.0), 30.0))
        return "done"

    @server.tool()
    async def hold(items: list[str], seconds: float) -> str:
        """Sleep `seconds` (at most 30) holding `items`, then say how many there were."""
        await anyio.sleep(min(max(seconds, 0.0), 30.0))
        return f"held {len(items)}"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_transport_arguments(parser, default_transport="stdio")
    args = parser.parse_args()
    server = build()
    apply_admission_arguments(server, args)
    if args.transport == "stdio":
        server.run_stdio()
    else:
        server.run_http(host=args.host, port=args.port, log_level="warning",
                         wrap=PrincipalFromHeader, **limit_options(args))


if __name__ == "__main__":
    main()
