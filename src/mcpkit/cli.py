"""The `mcpkit` command.

    mcpkit serve [--workspace DIR] [--transport http|stdio] [--port 65510] [--token T]
                                                                  the coding tools server
    mcpkit example [--transport http|stdio] [--host H] [--port N]   run the example server
    mcpkit hub user|token …                                       the hub's admin commands
    mcpkit version
    mcpkit mcp add|add-json|list|get|remove|enable|disable|test|import …
                                                                  configure MCP servers
    mcpkit tools [TARGET]                                         their tools
    mcpkit call TARGET TOOL [--args JSON] [key=value …]           call one
    mcpkit resources|prompts …, mcpkit inspect TARGET             the rest of a server
                      (TARGET: a configured name, a URL, or `-- COMMAND ARGS…` at the end)

(`mcpkit mcp` and the rest: `mcpkit.manager.cli`.)
"""

from __future__ import annotations

import argparse
import sys

from mcpkit import __version__
from mcpkit.transports.arguments import add_transport_arguments


def _example(args: argparse.Namespace) -> int:
    from mcpkit.examples.demo import server
    from mcpkit.transports.arguments import serve

    if args.transport == "http":
        print(f"mcpkit example server on http://{args.host}:{args.port}/mcp", file=sys.stderr)
    serve(server, args)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpkit", description="The mcpkit MCP toolkit.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_cmd = sub.add_parser("serve", help="run the built-in coding tools server")
    from mcpkit.coding.cli import add_arguments, run

    add_arguments(serve_cmd)
    serve_cmd.set_defaults(run=run)
    example = sub.add_parser("example", help="run the README's example server")
    add_transport_arguments(example)
    example.set_defaults(run=_example)
    from mcpkit.hub.cli import add_parser as add_hub_parser

    add_hub_parser(sub)
    version = sub.add_parser("version", help="print the version")
    version.set_defaults(run=lambda _args: print(__version__) or 0)
    from mcpkit.manager.cli import add_commands

    add_commands(sub)
    return parser


def parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`parse_args`, plus what Python 3.11's argparse does badly, for commands that set
    `loose=True`: everything after the first `--` is `args.trailing`, exactly as given (a
    server's command line may hold options and `--` of its own), and what argparse did not
    place (`text=hi` in `mcpkit call fx echo --json text=hi`) is `args.extras`, for the
    command to judge. Other commands refuse both, as `parse_args` would."""
    trailing: list[str] | None = None
    if "--" in argv:
        at = argv.index("--")
        argv, trailing = argv[:at], argv[at + 1:]
    args, extras = parser.parse_known_args(argv)
    unknown = [] if getattr(args, "loose", False) else \
        [*extras, *(["--", *trailing] if trailing else [])]
    if unknown:
        getattr(args, "subparser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    args.trailing = trailing
    args.extras = extras
    return args


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parse(parser, sys.argv[1:] if argv is None else list(argv))
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
