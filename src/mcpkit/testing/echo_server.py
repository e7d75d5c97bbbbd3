"""A server with one `echo` tool, for benchmarks and smoke tests.

python -m mcpkit.testing.echo_server --transport stdio
python -m mcpkit.testing.echo_server --transport http --port 8000
"""

from __future__ import annotations

import argparse

from mcpkit.server.server import Server


def build_server() -> Server:
    server = Server("mcpkit-echo", "1.0.0")

    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    server.add_tool(echo)
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    server = build_server()
    if args.transport == "stdio":
        server.run_stdio()
    else:
        server.run_http(host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
