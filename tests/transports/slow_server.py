"""A server for the in-flight limit tests, run as a real process:

    python tests/transports/slow_server.py --transport stdio|http [--port PORT]

Tools: `slow(seconds)` sleeps (at most 30 s) then answers "done".
"""

from __future__ import annotations

import argparse

import anyio

from mcpkit import Server
from mcpkit.transports.arguments import add_transport_arguments, serve


def build() -> Server:
    server = Server("slow", "1.0.0")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep `seconds` (at most 30), then answer."""
        await anyio.sleep(min(max(seconds, 0.0), 30.0))
        return "done"

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_transport_arguments(parser, default_transport="stdio")
    serve(build(), parser.parse_args())


if __name__ == "__main__":
    main()
