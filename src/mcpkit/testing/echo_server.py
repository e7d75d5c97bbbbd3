"""A server with one `echo` tool, for benchmarks and smoke tests.

python -m mcpkit.testing.echo_server --transport stdio
python -m mcpkit.testing.echo_server --transport http --port 8000
"""

from __future__ import annotations

import argparse

from mcpkit.serve_arguments import add_transport_arguments, serve
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
    add_transport_arguments(parser, default_transport="stdio")
    serve(build_server(), parser.parse_args(argv))


if __name__ == "__main__":
    main()
