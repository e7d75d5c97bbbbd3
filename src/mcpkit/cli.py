"""The `mcpkit` command.

    mcpkit serve [--workspace DIR] [--transport http|stdio] [--port 65510] [--token T]
                                                                  the coding tools server
    mcpkit example [--transport http|stdio] [--host H] [--port N]   run the example server
    mcpkit hub user|token …                                       the hub's admin commands
    mcpkit version
"""

from __future__ import annotations

import argparse
import sys

from mcpkit import __version__
from mcpkit.transports.arguments import add_transport_arguments


def _example(args: argparse.Namespace) -> int:
    from mcpkit.examples.notes import build_server
    from mcpkit.transports.arguments import serve

    if args.transport == "http":
        print(f"mcpkit example server on http://{args.host}:{args.port}/mcp", file=sys.stderr)
    serve(build_server(), args)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpkit", description="The mcpkit MCP toolkit.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_cmd = sub.add_parser("serve", help="run the built-in coding tools server")
    from mcpkit.coding.cli import add_arguments, run

    add_arguments(serve_cmd)
    serve_cmd.set_defaults(run=run)
    example = sub.add_parser("example", help="run the example notes server")
    add_transport_arguments(example)
    example.set_defaults(run=_example)
    from mcpkit.hub.cli import add_parser as add_hub_parser

    add_hub_parser(sub)
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(run=lambda _args: print(__version__) or 0)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
