"""`mcpkit mcp …`, `mcpkit tools`, `mcpkit call`, …: MCP servers, from a terminal.

    mcpkit mcp add NAME [-e K=V]… [--env-var NAME]… [--cwd DIR] [-s user|project|local]
                   -- COMMAND ARGS…
    mcpkit mcp add [-t http|sse|ws] NAME URL [-H 'K: V']… [--bearer-token-env-var NAME]
                   (options before or after NAME; Codex's --url URL works too)
    mcpkit mcp add-json NAME JSON          one entry as JSON (`-` reads it from stdin)
    mcpkit mcp list [--json] [--no-connect]
    mcpkit mcp get NAME [--json]           every field, secrets masked
    mcpkit mcp remove|enable|disable NAME [--scope user|project|local]
    mcpkit mcp test NAME [--json] [-v]     connect, list the tools, time it
    mcpkit mcp login NAME [--scopes S1,S2] [--no-browser] [--callback-port N]
    mcpkit mcp logout NAME                 forget the login (the tokens)
    mcpkit mcp auth status [NAME] [--json] issuer, client id, scopes, expiry, store; no token
    mcpkit mcp import --from claude|claude-desktop|cursor|vscode|codex|opencode [PATH]
                   [--dry-run]             every file of the tool, or PATH
    mcpkit mcp add-from-claude-desktop     = import --from claude-desktop
    mcpkit tools [TARGET] [--json]
    mcpkit call TARGET TOOL [--args JSON] [key=value …] [--json] [--timeout S]
                [--answer FIELD=VALUE … | --answers JSON | --decline] [--no-browser]
    mcpkit resources list|templates TARGET [--json]
    mcpkit resources read TARGET URI [--json] [-o FILE]
    mcpkit prompts list TARGET [--json]
    mcpkit prompts get TARGET NAME [--args JSON] [key=value …] [--json]
    mcpkit inspect TARGET [-o FILE]        a JSON report of the whole server

TARGET is a configured name or a URL (`-t http|sse|ws`, `-H 'K: V'`, `--bearer TOKEN`), or
is left out and the server's command follows `--` (`cli_targets`).

`add` writes the user file by default (`~/.config/mcpkit/mcp.json`, or under
$XDG_CONFIG_HOME); `--scope project` writes `.mcpkit/mcp.json` (the nearest existing one, or
in the current directory), `--scope local` the `.mcpkit/mcp.local.json` beside it (yours,
this project only; Claude Code's local scope). An entry of a later scope replaces the
earlier one of the same name: local over project over user. `remove`, `enable` and
`disable` edit the entry in effect; `--scope` picks one.

Exit codes: 0 ok; 1 the operation failed (a server did not start, also in `mcp list`; a tool
returned an error; nothing to import); 2 the command line or a config file is wrong. An
error is one line `mcpkit: error: …`, usually followed by `hint: …`; expected failures
print no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

from mcpkit.manager.cli_config import (
    EXIT_FAILED,
    EXIT_OK,
    SCOPES,
    CliError,
    ConfigFiles,
    Entry,
    expected_exit_code,
)
from mcpkit.transports.server.http.serve import positive_int

Command = Callable[[argparse.Namespace], int]
MAX_IMPORT_FILE_BYTES = 64 * 1024 * 1024
"""`imports.MAX_IMPORT_FILE_BYTES`, repeated so that building the parser imports nothing
heavy."""
INTERRUPTED = 130
LOGIN_TIMEOUT_S = 300.0
"""How long `mcp login` waits for the user to log in (the browser's redirect, a paste)."""
PROBE_TIMEOUT_S = 5.0
"""How long `mcp add` of a URL server waits to see whether the server requires login."""
TRANSPORT_CHOICES = ("http", "sse", "ws", "stdio")
MAX_RESOURCE_WRITE_BYTES = 64 * 1024 * 1024
"""What `mcpkit resources read -o FILE` writes at most (`--max-bytes`)."""
IMPORT_SOURCES = ("claude", "claude-desktop", "cursor", "vscode", "codex", "opencode")
"""`imports.SOURCES`, repeated so that building the parser imports nothing heavy."""


# --- the parsers --------------------------------------------------------------------------


def add_commands(sub: Any) -> None:
    """Register `mcp`, `tools` and `call` on the `mcpkit` subparsers."""
    from mcpkit.transports.server.http.serve import positive_int

    mcp = sub.add_parser("mcp", help="configure MCP servers (add, list, get, remove, test…)",
                         description="Configure the MCP servers of the user and the project "
                                     "(scopes: user, project, local).")
    verbs = mcp.add_subparsers(dest="verb", required=True, metavar="VERB")
    _add_parser(verbs)
    add_json = _command(verbs, "add-json", "cli_edit.run_add_json",
                        "add a server from its JSON entry")
    add_json.add_argument("name")
    add_json.add_argument("json", help="the entry, e.g. '{\"command\": \"npx\", \"args\": "
                                       "[\"-y\", \"pkg\"]}'; - reads stdin")
    _scope_option(add_json, "user")
    add_json.add_argument("--force", action="store_true", help="replace an existing entry")

    listing = _command(verbs, "list", "cli._run_list",
                       "the servers, their status and tool count")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.add_argument("--no-connect", action="store_true",
                         help="do not start the servers (status: enabled/disabled)")
    _timeout_option(listing)
    _verbose_option(listing)

    get = _command(verbs, "get", "cli._run_get", "one server's settings (secrets masked)")
    get.add_argument("name")
    get.add_argument("--json", action="store_true", help="print JSON")

    for name, about in (("remove", "remove a server"), ("enable", "enable a server"),
                        ("disable", "disable a server (its entry stays)")):
        verb = _command(verbs, name, f"cli_edit.run_{name}", about)
        verb.add_argument("name")
        _scope_option(verb, None)

    _login_commands(verbs)

    test = _command(verbs, "test", "cli_servers.run_test",
                    "connect to a server, list its tools, time it")
    test.add_argument("name")
    test.add_argument("--json", action="store_true", help="print JSON")
    _timeout_option(test)
    _verbose_option(test)

    imports = _command(verbs, "import", "cli_edit.run_import",
                       "import the servers of another tool's config")
    imports.add_argument("--from", dest="source", required=True, choices=IMPORT_SOURCES,
                         help="the tool: claude (Claude Code), claude-desktop, cursor, vscode, "
                              "codex or opencode")
    imports.add_argument("path", nargs="?", help="one file (default: every file of the tool "
                                                 "that exists, the user's and the project's)")
    imports.add_argument("--max-file-bytes", type=positive_int, metavar="N",
                         default=MAX_IMPORT_FILE_BYTES,
                         help="refuse a file larger than this (default: %(default)s)")
    _scope_option(imports, "user")
    imports.add_argument("--force", action="store_true", help="replace servers of the same name")
    imports.add_argument("--dry-run", action="store_true", help="show, write nothing")

    desktop = _command(verbs, "add-from-claude-desktop", "cli_edit.run_import",
                       "import Claude Desktop's servers (Claude Code's spelling of "
                       "`mcp import --from claude-desktop`)")
    desktop.set_defaults(source="claude-desktop", path=None,
                         max_file_bytes=MAX_IMPORT_FILE_BYTES)
    _scope_option(desktop, "user")
    desktop.add_argument("--force", action="store_true", help="replace servers of the same name")
    desktop.add_argument("--dry-run", action="store_true", help="show, write nothing")

    _add_server_commands(sub)


def _add_server_commands(sub: Any) -> None:
    """`tools`, `call`, `resources`, `prompts` and `inspect`: each takes TARGET, a configured
    name or a URL, or the server's command after `--` (`cli_targets`)."""
    tools = _command(sub, "tools", "cli_servers.run_tools",
                     "start the enabled servers (or one) and list their tools")
    tools.usage = ("mcpkit tools [TARGET] [options]\n"
                   "       mcpkit tools [options] -- COMMAND [ARGS...]")
    tools.add_argument("server", nargs="?", metavar="TARGET",
                       help="a configured server's name or a URL (default: every enabled "
                            "configured server)")
    tools.add_argument("--json", action="store_true",
                       help="print the tool objects (with server and exposed_name)")
    _timeout_option(tools)
    _target_options(tools)

    call = _command(sub, "call", "cli_servers.run_call", "call one tool of one server")
    call.usage = ("mcpkit call TARGET TOOL [key=value ...] [options]\n"
                  "       mcpkit call TOOL [key=value ...] [options] -- COMMAND [ARGS...]")
    call.add_argument("server", nargs="?", metavar="TARGET", help=_target_help())
    call.add_argument("tool", nargs="?", metavar="TOOL", help="the tool's name")
    call.add_argument("pairs", nargs="*", metavar="key=value",
                      help="arguments; values are JSON when they parse (n=3, on=true)")
    call.add_argument("--args", metavar="JSON", help="the arguments as a JSON object")
    call.add_argument("--json", action="store_true", help="print the whole result as JSON")
    call.add_argument("--timeout", type=float, metavar="S",
                      help="seconds to wait for the tool (default: its tool_timeout_sec, 60 "
                           "for a URL or command)")
    _answer_options(call)
    _target_options(call)

    resources = sub.add_parser("resources", help="list and read a server's resources",
                               description="List and read the resources of one server.")
    verbs = resources.add_subparsers(dest="verb", required=True, metavar="VERB")
    for verb, about in (("list", "the resources (URI, name, MIME type)"),
                        ("templates", "the resource templates (URI templates)")):
        listing = _command(verbs, verb, f"cli_catalog.run_resources_{verb}", about)
        _catalog_target(listing, f"mcpkit resources {verb}", "")
        listing.add_argument("--json", action="store_true", help="print what the server sent")
    read = _command(verbs, "read", "cli_catalog.run_resources_read",
                    "read one resource (binary contents: -o FILE)")
    _catalog_target(read, "mcpkit resources read", " URI")
    read.add_argument("uri", nargs="?", metavar="URI", help="the resource's URI")
    read.add_argument("--json", action="store_true", help="print the whole result as JSON")
    read.add_argument("-o", "--output", metavar="FILE",
                      help="write the contents to FILE (bytes as sent, for binary resources)")
    read.add_argument("--max-bytes", type=positive_int, default=MAX_RESOURCE_WRITE_BYTES,
                      metavar="N", help="the most -o writes (default: %(default)s)")

    prompts = sub.add_parser("prompts", help="list a server's prompts and get one",
                             description="List the prompts of one server and get one.")
    verbs = prompts.add_subparsers(dest="verb", required=True, metavar="VERB")
    listing = _command(verbs, "list", "cli_catalog.run_prompts_list",
                       "the prompts and their arguments")
    _catalog_target(listing, "mcpkit prompts list", "")
    listing.add_argument("--json", action="store_true", help="print what the server sent")
    get = _command(verbs, "get", "cli_catalog.run_prompts_get",
                   "get one prompt with its arguments filled in")
    _catalog_target(get, "mcpkit prompts get", " NAME [key=value ...]")
    get.add_argument("name", nargs="?", metavar="NAME", help="the prompt's name")
    get.add_argument("pairs", nargs="*", metavar="key=value", help="the prompt's arguments")
    get.add_argument("--args", metavar="JSON", help="the arguments as a JSON object")
    get.add_argument("--json", action="store_true", help="print the whole result as JSON")

    inspect = _command(sub, "inspect", "cli_catalog.run_inspect",
                       "a JSON report of a whole server: info, capabilities, tools, "
                       "resources, templates, prompts")
    _catalog_target(inspect, "mcpkit inspect", "")
    inspect.add_argument("-o", "--output", metavar="FILE",
                         help="write the report to FILE (default: print it)")


def _target_help() -> str:
    return ("a configured server's name, or a URL (http(s)://, ws(s)://); leave it out when "
            "the server's command follows --")


def _catalog_target(parser: argparse.ArgumentParser, command: str, rest: str) -> None:
    """TARGET and the options of a command about one server."""
    parser.usage = (f"{command} TARGET{rest} [options]\n"
                    f"       {command}{rest} [options] -- COMMAND [ARGS...]")
    parser.add_argument("target", nargs="?", metavar="TARGET", help=_target_help())
    _timeout_option(parser)
    _target_options(parser)


def _target_options(parser: argparse.ArgumentParser) -> None:
    from mcpkit.manager.cli_targets import add_target_options

    _verbose_option(parser)
    add_target_options(parser)
    parser.set_defaults(loose=True)  # `-- COMMAND ARGS…` is the server's command


def _answer_options(call: argparse.ArgumentParser) -> None:
    """How `call` answers a server that asks the user (`cli_elicit`)."""
    answering = call.add_argument_group(
        "answering the server", "a tool may ask for input while it runs; on a terminal you "
        "are asked, otherwise answer beforehand")
    answering.add_argument("--answer", action="append", metavar="FIELD=VALUE",
                           help="answer a form field beforehand (repeatable; typed as at "
                                "the prompt: age=36 agree=yes)")
    answering.add_argument("--answers", metavar="JSON",
                           help="answer form fields beforehand as a JSON object")
    answering.add_argument("--decline", action="store_true",
                           help="decline whatever the server asks (default: ask on a "
                                "terminal, fail elsewhere)")
    answering.add_argument("--no-browser", action="store_true",
                           help="for a link the server asks you to open: print it, do not "
                                "open the browser")


def _command(parsers: Any, name: str, run: str, about: str) -> argparse.ArgumentParser:
    """A subcommand whose `run` is `module.function` of `mcpkit.manager`, imported only when
    it runs (`mcpkit version` should not load the client stack)."""
    parser: argparse.ArgumentParser = parsers.add_parser(name, help=about, description=about)

    def command(args: argparse.Namespace) -> int:
        module, function = run.split(".")
        found: Command = getattr(importlib.import_module(f"mcpkit.manager.{module}"), function)
        return found(args)

    parser.set_defaults(run=_wrap(command), subparser=parser)
    return parser


def _add_parser(verbs: Any) -> None:
    add = _command(verbs, "add", "cli_edit.run_add",
                   "add a server: NAME URL, or NAME -- COMMAND ARGS…")
    add.usage = ("mcpkit mcp add [options] NAME URL\n"
                 "       mcpkit mcp add [options] NAME -- COMMAND [ARGS...]")
    add.description = (
        "Add a server. The Claude Code and Codex spellings work: options may come before\n"
        "or after NAME; a URL is an http server (ws:// and wss:// a WebSocket one) unless\n"
        "--transport says otherwise; a command goes after --. Examples:\n"
        "  mcpkit mcp add --transport http docs https://example.com/mcp\n"
        "  mcpkit mcp add docs https://example.com/mcp -H 'Authorization: Bearer ${TOKEN}'\n"
        "  mcpkit mcp add -e DEBUG=1 files -- npx -y @modelcontextprotocol/server-filesystem .")
    add.formatter_class = argparse.RawDescriptionHelpFormatter
    add.add_argument("name", help="the server's name (letters, digits, _ - .)")
    add.add_argument("--url", help="the server's URL (Codex's spelling; the same as giving "
                                   "URL after NAME)")
    add.add_argument("-t", "--transport", choices=TRANSPORT_CHOICES,
                     help="http (Streamable HTTP), sse (legacy HTTP+SSE), ws (WebSocket), or "
                          "stdio (a command) (default: stdio for a command, ws for ws:// and "
                          "wss:// URLs, else http)")
    add.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE",
                     help="a variable for the command, repeatable (kept as written: "
                          "'${GH_TOKEN}' stays a reference)")
    add.add_argument("--env-var", action="append", default=[], metavar="NAME",
                     help="pass this variable through from the environment, repeatable")
    add.add_argument("--cwd", help="the command's working directory")
    add.add_argument("-H", "--header", action="append", default=[], metavar="'K: V'",
                     help="an HTTP header for a URL server, repeatable (write secrets as "
                          "'Authorization: Bearer ${TOKEN}' to keep them out of the file)")
    add.add_argument("--bearer-token-env-var", metavar="NAME",
                     help="send `Authorization: Bearer $NAME` (URL servers)")
    _oauth_options(add)
    add.add_argument("--startup-timeout", type=float, metavar="S",
                     help="seconds the server has to start (default: 30)")
    add.add_argument("--tool-timeout", type=float, metavar="S",
                     help="seconds a tool call may take (default: 60)")
    add.add_argument("--disabled", action="store_true", help="add it disabled")
    add.add_argument("--no-probe", action="store_true",
                     help="do not connect to a URL server to see whether it requires login")
    add.add_argument("--probe-timeout", type=positive_float, metavar="S",
                     default=PROBE_TIMEOUT_S,
                     help="how long that check may take (default: %(default)s s; it never "
                          "fails the add)")
    _scope_option(add, "user")
    add.add_argument("--force", action="store_true", help="replace an entry of the same name")
    add.set_defaults(loose=True)


def _login_commands(verbs: Any) -> None:
    """`mcp login`, `mcp logout` and `mcp auth status` (`cli_login`)."""
    login = _command(verbs, "login", "cli_login.run_login",
                     "log in to a URL server (OAuth): in the browser, or --no-browser")
    login.add_argument("name")
    login.add_argument("--scopes", metavar="S1,S2",
                       help="the scopes to ask for this time, comma- or space-separated "
                            "(default: the entry's oauth.scopes, else what the server asks)")
    login.add_argument("--no-browser", action="store_true",
                       help="print the URL only; after logging in (on any machine), paste "
                            "the address the browser ends on")
    login.add_argument("--callback-port", type=int, metavar="PORT",
                       help="the loopback redirect's port (default: the entry's "
                            "oauth.callback_port, else the first free of mcpkit's range)")
    login.add_argument("--timeout", type=positive_float, metavar="S",
                       default=LOGIN_TIMEOUT_S,
                       help="how long to wait for the login (default: %(default)s s)")
    _verbose_option(login)
    logout = _command(verbs, "logout", "cli_login.run_logout",
                      "forget a URL server's login (its tokens)")
    logout.add_argument("name")
    auth = verbs.add_parser("auth", help="OAuth logins: status",
                            description="The OAuth logins mcpkit keeps.")
    auth_verbs = auth.add_subparsers(dest="auth_verb", required=True, metavar="VERB")
    status = _command(auth_verbs, "status", "cli_login.run_status",
                      "each URL server's login: issuer, client id, scopes, expiry, store "
                      "(never a token)")
    status.add_argument("name", nargs="?", help="one server (default: every URL server)")
    status.add_argument("--json", action="store_true", help="print JSON (no token in it)")


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def _oauth_options(add: argparse.ArgumentParser) -> None:
    """The entry's `oauth` table (`oauth_settings`), in Claude Code's and Codex's spellings."""
    oauth = add.add_argument_group(
        "logging in (OAuth, URL servers)", "how `mcpkit mcp login NAME` logs in; without "
        "these it uses what the server's metadata offers")
    oauth.add_argument("--client-id", metavar="ID",
                       help="a client registered with the server's authorization server")
    oauth.add_argument("--client-secret-env", metavar="NAME",
                       help="the environment variable holding that client's secret (the "
                            "secret itself is never written to the config)")
    oauth.add_argument("--client-secret", action="store_true", help=argparse.SUPPRESS)
    oauth.add_argument("--scopes", metavar="S1,S2",
                       help="the scopes to ask for, comma- or space-separated (default: what "
                            "the server asks for)")
    oauth.add_argument("--callback-port", type=int, metavar="PORT",
                       help="the port of the loopback redirect (http://127.0.0.1:PORT/"
                            "callback), for a client registered with that redirect")
    oauth.add_argument("--token-store", choices=("auto", "keyring", "file"),
                       help="where the login is kept (default: auto: the OS keyring, else "
                            "a 0600 file)")
    oauth.add_argument("--grant", choices=("authorization_code", "client_credentials"),
                       help="authorization_code: a user logs in (default); "
                            "client_credentials: the client itself, no browser")
    oauth.add_argument("--client-metadata-url", metavar="URL",
                       help="the https URL of this client's Client ID Metadata Document")


def _scope_option(parser: argparse.ArgumentParser, default: str | None) -> None:
    where = ("user: yours, every project; project: .mcpkit/mcp.json, shared; local: "
             ".mcpkit/mcp.local.json, yours, this project")
    about = (f"which config file: {where} (default: {default})" if default else
             f"which config file: {where} (default: the entry in effect: local, else "
             "project, else user)")
    parser.add_argument("-s", "--scope", choices=SCOPES, default=default, help=about)


def _timeout_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--timeout", type=float, metavar="S",
                        help="seconds each server has to start (default: its "
                             "startup_timeout_sec)")


def _verbose_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log what happens and, on success, what was connected (transport, "
                             "protocol era and version, server, time) on stderr")


# --- errors ---------------------------------------------------------------------------------


def _wrap(command: Command) -> Command:
    def run(args: argparse.Namespace) -> int:
        _setup_logging(getattr(args, "verbose", False))
        try:
            return command(args)
        except CliError as exc:
            return report(exc.message, exc.hint, exc.code)
        except KeyboardInterrupt:
            print("\nmcpkit: interrupted", file=sys.stderr)
            return INTERRUPTED
        except BrokenPipeError:
            # `mcpkit tools | head`: stop quietly, and keep the exit-time flush quiet too.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_FAILED
        except Exception as exc:
            expected = expected_exit_code(exc)
            if expected is None:
                raise
            return report(str(exc) or type(exc).__name__, None, expected)

    return run


def report(message: str, hint: str | None, code: int) -> int:
    first, *rest = message.strip().splitlines() or [""]
    print(f"mcpkit: error: {first}", file=sys.stderr)
    for line in rest:
        print(f"  {line}", file=sys.stderr)
    if hint:
        print(f"hint: {hint}", file=sys.stderr)
    return code


def _setup_logging(verbose: bool) -> None:
    """Servers that fail are reported by the commands; the library's warnings would say it
    twice, so they show only with --verbose."""
    logger = logging.getLogger("mcpkit")
    if verbose:
        from mcpkit.manager.cli_render import RedactingFilter

        logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
        for handler in logging.getLogger().handlers:
            handler.addFilter(RedactingFilter())
    elif not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False


# --- list, get ------------------------------------------------------------------------------


def _run_list(args: argparse.Namespace) -> int:
    files = ConfigFiles()
    entries = files.entries()
    rows: list[dict[str, Any]] = []
    outcomes: dict[str, Any] = {}
    configs: list[Any] = []
    from mcpkit.manager.cli_render import redact

    if not args.no_connect and entries:
        from mcpkit.manager import cli_servers

        configs, outcomes = cli_servers.startable(files, entries.values(), timeout=args.timeout)
        outcomes.update(cli_servers.survey(configs))
        cli_servers.say_connected(outcomes, args.verbose)
    for entry in entries.values():
        outcome = outcomes.get(entry.name)
        status = ("invalid" if entry.error else "enabled" if entry.enabled else "disabled")
        rows.append({
            "name": entry.name, "scope": entry.scope,
            "type": entry.config.type if entry.config else entry.raw.get("type"),
            "target": _target(entry), "enabled": entry.enabled,
            "status": outcome.status if outcome else status,
            "error": redact(outcome.error) if outcome else entry.error,
            "tools": len(outcome.tools) if outcome and outcome.status == "ready" else None,
            "startup_ms": outcome.startup_ms if outcome else None,
            "login": outcome.login if outcome else None,
        })
    # As `mcp test`: 1 when a server that should have started did not (a disabled one
    # is not a failure; an invalid entry is; one that needs a login is not broken: its
    # line says how to log in).
    code = EXIT_FAILED if any(r["status"] in ("failed", "invalid") for r in rows) else EXIT_OK
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return code
    if not rows:
        print("no MCP servers configured")
        print(f"hint: {files.known_hint()}", file=sys.stderr)
        return EXIT_OK
    from mcpkit.manager.cli_render import output_width, table

    width = output_width()
    shown = {"needs_auth": "needs login"}
    cells = [[r["name"], r["scope"], str(r["type"] or "?"), r["target"],
              shown.get(r["status"], r["status"]),
              "-" if r["tools"] is None else str(r["tools"])] for r in rows]
    for line in table(("NAME", "SCOPE", "TRANSPORT", "TARGET", "STATUS", "TOOLS"), cells,
                      width=width, shrink=(3, 0)):
        print(line)
    if any(r["error"] for r in rows):
        from mcpkit.manager import cli_servers

        print()
        sys.stdout.flush()
        cli_servers.report_failures(
            {r["name"]: outcomes.get(r["name"]) or cli_servers.Outcome(r["status"], r["error"])
             for r in rows if r["error"]},
            {c.name: c for c in configs}, {n: e.config for n, e in entries.items()})
    return code


def _target(entry: Entry) -> str:
    from mcpkit.manager.cli_render import mask_url

    if entry.config is None:
        return str(entry.raw.get("url") or entry.raw.get("command") or "?")
    if entry.config.type == "stdio":
        return entry.config.describe_target()
    return mask_url(entry.config.url or "")


def _run_get(args: argparse.Namespace) -> int:
    from mcpkit.manager.cli_render import mask, mask_env, mask_url

    files = ConfigFiles()
    entry = files.entry(args.name)
    config = entry.config
    if config is None:
        raise CliError(entry.error or "invalid entry", hint=f"fix it in {entry.path}")
    fields: dict[str, Any] = {
        "name": config.name, "scope": entry.scope, "path": str(entry.path),
        "overrides": str(entry.overrides) if entry.overrides else None,
        "type": config.type, "command": config.command, "args": config.args,
        "env": {k: mask_env(k, v) for k, v in config.env.items()},
        "env_vars": config.env_vars, "cwd": config.cwd,
        "url": mask_url(config.url) if config.url else None,
        "headers": {k: mask(v) for k, v in config.headers.items()},
        "bearer_token_env_var": config.bearer_token_env_var,
        "oauth": config.oauth.to_table() if config.oauth else None,
        "enabled": config.enabled, "required": config.required,
        "startup_timeout_sec": config.startup_timeout_sec,
        "tool_timeout_sec": config.tool_timeout_sec,
        "enabled_tools": config.enabled_tools, "disabled_tools": config.disabled_tools,
    }
    if args.json:
        print(json.dumps(fields, indent=2, ensure_ascii=False))
        return EXIT_OK
    print(config.name)
    for label, value in _get_lines(fields):
        print(f"  {label + ':' if label else '':<22}{value}")
    return EXIT_OK


def _get_lines(fields: dict[str, Any]) -> list[tuple[str, str]]:
    stdio = fields["type"] == "stdio"
    lines = [("scope", f"{fields['scope']} ({fields['path']})")]
    if fields["overrides"]:
        lines.append(("overrides", f"the entry in {fields['overrides']}"))
    lines.append(("type", fields["type"]))
    shown = ("command", "args", "env", "env_vars", "cwd") if stdio else \
        ("url", "headers", "bearer_token_env_var", "oauth")
    for key in (*shown, "enabled", "required", "startup_timeout_sec", "tool_timeout_sec",
                "enabled_tools", "disabled_tools"):
        value = fields[key]
        if key == "oauth":
            lines.append((key, _oauth_line(value)))
        elif isinstance(value, dict):
            pairs = [f"{k}={v}" if key == "env" else f"{k}: {v}" for k, v in value.items()]
            lines += [(key if i == 0 else "", pair) for i, pair in enumerate(pairs)] or \
                [(key, "-")]
        elif isinstance(value, list):
            lines.append((key, shlex.join(value) if key == "args" else
                          ", ".join(value) if value else "-"))
        elif isinstance(value, bool):
            lines.append((key, "yes" if value else "no"))
        elif isinstance(value, float):
            lines.append((key, f"{value:g}"))
        else:
            lines.append((key, "all" if key == "enabled_tools" else "-")
                         if value is None else (key, str(value)))
    return lines


def _oauth_line(table: dict[str, Any] | None) -> str:
    """`client_id=…, scopes=a b, …` (the table holds no secret: only a variable's name)."""
    if not table:
        return "-"
    return ", ".join(f"{k}={' '.join(v) if isinstance(v, list) else v}"
                     for k, v in table.items())
