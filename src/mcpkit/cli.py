"""The `mcpkit` command.

    mcpkit serve [--workspace DIR] [--transport http|stdio] [--port 65510] [--token T]
                                                                  the coding tools server
    mcpkit example [--transport http|stdio] [--host H] [--port N]   run the example server
    mcpkit hub serve|user|token …                                 the hub and its admin commands
    mcpkit version, mcpkit --version                              print the version
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
from mcpkit.serve_arguments import add_transport_arguments

EXAMPLE_DESCRIPTION = """\
Run the example server: the README's "Writing a server" code (tools `add` and `greet`,
which asks the user a question; resources `docs://index` and `docs://{topic}`; the prompt
`review`), to point an MCP client at while trying things out. It serves Streamable HTTP
at http://HOST:PORT/mcp, or stdio for a client that starts it itself. The URL is printed
once the port accepts connections; Ctrl-C (or SIGTERM) stops it."""

EXAMPLE_EPILOG = """\
examples:
  mcpkit example                         # http://127.0.0.1:8000/mcp
  mcpkit example --port 0                # any free port (the URL line says which)
  mcpkit example --transport stdio       # for a client that starts the server"""

DESCRIPTION = """\
mcpkit: a Model Context Protocol toolkit. Run MCP servers (the coding tools server, an
example, the hub), and configure, list and call the MCP servers you use."""

EPILOG = """\
first steps:
  mcpkit serve --workspace .             # the coding tools at http://127.0.0.1:65510/mcp
  mcpkit example                         # the example server at http://127.0.0.1:8000/mcp
  mcpkit COMMAND --help                  # what a command does, its options and defaults"""


def _example(args: argparse.Namespace) -> int:
    from mcpkit.examples.demo import server
    from mcpkit.serve_arguments import serve
    from mcpkit.serve_authorization import AuthOptionsError
    from mcpkit.transports.server.http.listen import ListenError

    def ready(where: str) -> None:
        how = "end stdin or press Ctrl-C" if where == "stdio" else "Ctrl-C"
        print(f"mcpkit example: the README's example server {'on' if where == 'stdio' else 'at'} "
              f"{where}; {how} to stop", file=sys.stderr, flush=True)

    try:
        serve(server, args, on_ready=ready)
    except (ListenError, AuthOptionsError) as exc:
        print(f"mcpkit example: {exc.message}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcpkit", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=__version__,
                        help="print the version and exit (as `mcpkit version` does)")
    sub = parser.add_subparsers(title="commands", dest="command", required=True,
                                metavar="COMMAND")
    from mcpkit.coding.cli import DESCRIPTION as SERVE_DESCRIPTION
    from mcpkit.coding.cli import EPILOG as SERVE_EPILOG
    from mcpkit.coding.cli import add_arguments, run

    serve_cmd = sub.add_parser("serve", help="run the built-in coding tools server",
                               description=SERVE_DESCRIPTION, epilog=SERVE_EPILOG,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(serve_cmd)
    serve_cmd.set_defaults(run=run)
    example = sub.add_parser("example", help="run the README's example server",
                             description=EXAMPLE_DESCRIPTION, epilog=EXAMPLE_EPILOG,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
    add_transport_arguments(example)
    example.set_defaults(run=_example)
    from mcpkit.hub.cli import add_parser as add_hub_parser

    add_hub_parser(sub)
    version = sub.add_parser("version", help="print the version",
                             description="Print mcpkit's version (as `mcpkit --version`).")
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


EXIT_INTERRUPTED = 130
"""Ctrl-C that came before a command could handle it (128 + SIGINT, as shells report it);
the servers handle it themselves once running, stop gracefully and exit 0."""


def main(argv: list[str] | None = None) -> int:
    try:
        parser = build_parser()
        args = parse(parser, sys.argv[1:] if argv is None else list(argv))
        code: int = args.run(args)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
