"""The benchmark's peer: an `echo` server built with the official MCP Python SDK (`mcp`).

Uses the SDK's high-level server API (MCPServer), with logging at WARNING so per-request
log lines do not skew the comparison.

    python bench/peers/official_echo_server.py --transport stdio
    python bench/peers/official_echo_server.py --transport http --port 8001   # /mcp
"""

from __future__ import annotations

import argparse

from mcp.server import MCPServer


def build_server() -> MCPServer:
    server = MCPServer("official-echo", version="1.0.0", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    args = parser.parse_args()
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
