"""A server for the memory-bound tests, run as a real process:

    python tests/transports/flood_server.py --transport stdio|http [--port PORT]
        [--delivered-grace-s S]

Tools: `flood(count, size)` logs `count` messages of `size` bytes at info level (the
logging flood of issue 20), `blob(size)` returns `size` bytes of text (a big reply to a small
request), `echo(text)`.
"""

from __future__ import annotations

import argparse

from mcpkit import Server
from mcpkit.serve_arguments import add_transport_arguments
from mcpkit.server.context import Context
from mcpkit.transports.server.http.replay import DEFAULT_DELIVERED_GRACE_S, ReplayLimits
from mcpkit.transports.server.http.serve import limit_options

MAX_FLOOD_BYTES = 1024 * 1024 * 1024
"""What one `flood` call may log in all (a bound on the test tool itself)."""


def build() -> Server:
    server = Server("flood", "1.0.0")

    @server.tool()
    async def flood(ctx: Context, count: int, size: int) -> str:
        """Log `count` messages of `size` bytes each."""
        if count < 0 or size < 0 or count * size > MAX_FLOOD_BYTES:
            raise ValueError(f"count * size must stay within {MAX_FLOOD_BYTES} bytes")
        for index in range(count):
            text = f"{index:08d} "
            await ctx.info(text + "x" * max(0, size - len(text)), logger="flood")
        return f"logged {count}"

    @server.tool()
    async def blob(size: int) -> str:
        """Return `size` bytes of text."""
        if not 0 <= size <= MAX_FLOOD_BYTES:
            raise ValueError(f"size must stay within {MAX_FLOOD_BYTES} bytes")
        return "b" * size

    @server.tool()
    async def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_transport_arguments(parser, default_transport="stdio")
    parser.add_argument("--delivered-grace-s", type=float, default=DEFAULT_DELIVERED_GRACE_S)
    args = parser.parse_args()
    if args.transport == "stdio":
        build().run_stdio()
    else:
        build().run_http(host=args.host, port=args.port, log_level="warning",
                         replay_limits=ReplayLimits(delivered_grace_s=args.delivered_grace_s),
                         **limit_options(args))


if __name__ == "__main__":
    main()
