"""`mcpkit hub upstream …`: a user's upstreams from the shell, through the hub's REST API with
their API token (what `curl` did before; the routes are api/routes/upstreams.py).

    mcpkit hub upstream add NAME URL [-t http|sse|ws] [-H 'K: V']… [--bearer TOKEN]
                            [--catalog-header 'K: V']… [--catalog-bearer TOKEN] …
    mcpkit hub upstream add NAME -- COMMAND ARGS…       a stdio upstream (if the hub allows)
    mcpkit hub upstream list
    mcpkit hub upstream get NAME|ID
    mcpkit hub upstream remove NAME|ID
    mcpkit hub upstream refresh NAME|ID                 fetch its catalog now
    mcpkit hub upstream tools NAME|ID [--refresh]

Each takes `--hub URL` (default $MCPKIT_HUB_URL, else http://127.0.0.1:8765), `--token`
(default $MCPKIT_HUB_TOKEN; never printed), `--timeout S` and `--json` (the API's objects,
secrets masked by the API). Exit status: 0 done, 1 the hub refused or could not be reached
(its message, with the field it names), 2 a usage mistake (no token, a malformed header).
Output from the hub is shown with control characters replaced: a hostile upstream's tool
description cannot drive the terminal.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mcpkit.hub.rest_client import DEFAULT_TIMEOUT_S, HubRequestError, HubRestClient
from mcpkit.hub.settings import DEFAULT_HOST, DEFAULT_PORT

if TYPE_CHECKING:
    from mcpkit.hub.cli_common import Subcommands

UPSTREAMS = "/api/v1/users/mcp/upstreams"
HUB_URL_ENV = "MCPKIT_HUB_URL"
HUB_TOKEN_ENV = "MCPKIT_HUB_TOKEN"
DEFAULT_HUB_URL = f"http://{DEFAULT_HOST}:{DEFAULT_PORT}"
MAX_PAGES = 1000
"""Pages one listing follows at most (a user's upstreams are capped far below; a tool list at
2000 items): a hub that kept answering with cursors cannot keep the command running."""
CELL_WIDTH = 60
"""Where a table cell (a URL, a description's first line) is cut, with `…`."""
EXIT_FAILED = 1
EXIT_USAGE = 2
UPSTREAM_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
TRANSPORTS = ("http", "sse", "ws", "stdio")


class _BadCommandLine(ValueError):
    """A mistake in the command line: exit status 2."""


Action = Callable[[HubRestClient, argparse.Namespace], int]


def add_upstream_command(commands: Subcommands) -> None:
    upstream = commands.add_parser(
        "upstream", help="your upstreams on a running hub (REST API, your API token)",
        description="Register, list, inspect, refresh and remove your upstreams on a running "
        "hub, through its REST API with your API token.",
    )
    actions = upstream.add_subparsers(dest="upstream_command", required=True, metavar="ACTION")

    add = _action(actions, "add", "register an upstream: NAME URL, or NAME -- COMMAND ARGS",
                  _add)
    add.add_argument("name", help="a slug, unique among your upstreams; prefixes its tools")
    add.add_argument("url", nargs="?", default=None, metavar="URL",
                     help="the server's URL; for a command the hub runs (stdio), give "
                     "`-- COMMAND ARGS…` instead")
    # mcpkit.cli.parse hands everything after `--` over as `args.trailing`, untouched
    add.set_defaults(loose=True, subparser=add)
    add.add_argument("-t", "--transport", choices=TRANSPORTS, default=None,
                     help="default: ws for ws(s):// URLs, http (Streamable HTTP) for other "
                     "URLs, stdio for a command")
    add.add_argument("-H", "--header", dest="headers", action="append", default=[],
                     metavar="'NAME: VALUE'", help="a header sent to the upstream (repeat; "
                     "stored encrypted, never shown again)")
    add.add_argument("--bearer", default=None, metavar="TOKEN",
                     help="sent to the upstream as Authorization: Bearer (stored encrypted)")
    add.add_argument("--catalog-header", dest="catalog_headers", action="append", default=[],
                     metavar="'NAME: VALUE'", help="a header its catalog fetches and health "
                     "checks send instead of the -H/--bearer ones (repeat; calls never do)")
    add.add_argument("--catalog-bearer", default=None, metavar="TOKEN",
                     help="the bearer token of its catalog fetches and health checks")
    add.add_argument("--disable-tool", dest="disabled_tools", action="append", default=[],
                     metavar="TOOL", help="hide this tool (repeat)")
    add.add_argument("--only-tool", dest="enabled_tools", action="append", default=None,
                     metavar="TOOL", help="expose only these tools (repeat; default: all)")
    add.add_argument("--disabled", action="store_true", help="register it switched off")
    add.add_argument("--no-refresh", action="store_true",
                     help="do not fetch its tools right after registering")
    add.add_argument("--connect-timeout", type=_seconds, default=None, metavar="S",
                     help="seconds to connect to it (default: the hub's, 10)")
    add.add_argument("--call-timeout", type=_seconds, default=None, metavar="S",
                     help="seconds a call may take (default: the hub's, 60)")

    _action(actions, "list", "list your upstreams and their health", _list)
    for name, help_text, run in (
        ("get", "one upstream, every field (secrets masked)", _get),
        ("remove", "remove an upstream and its catalog", _remove),
        ("refresh", "fetch an upstream's catalog now; shows its health", _refresh),
        ("tools", "an upstream's tools (the stored catalog)", _tools),
    ):
        parser = _action(actions, name, help_text, run)
        parser.add_argument("upstream", metavar="NAME|ID", help="the upstream's name or id")
        if name == "tools":
            parser.add_argument("--refresh", action="store_true",
                                help="ask the upstream first instead of reading the catalog")


def _action(actions: Any, name: str, help_text: str, run: Action) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = actions.add_parser(name, help=help_text,
                                                         description=help_text)
    parser.add_argument("--hub", default=None, metavar="URL",
                        help=f"the hub's address (default: ${HUB_URL_ENV}, else "
                        f"{DEFAULT_HUB_URL})")
    parser.add_argument("--token", default=None, metavar="TOKEN",
                        help=f"your API token (default: ${HUB_TOKEN_ENV}; an operator makes "
                        "one with `mcpkit hub token create USER`)")
    parser.add_argument("--timeout", type=_seconds, default=DEFAULT_TIMEOUT_S, metavar="S",
                        help=f"seconds one request may take (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    parser.set_defaults(run=_runner(run))
    return parser


def _runner(action: Action) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        try:
            client = _client(args)
            return action(client, args)
        except _BadCommandLine as error:
            return _fail(str(error), EXIT_USAGE)
        except HubRequestError as error:
            return _fail(error.message, EXIT_FAILED)

    return run


def _client(args: argparse.Namespace) -> HubRestClient:
    token = args.token or os.environ.get(HUB_TOKEN_ENV, "")
    if not token.strip():
        raise _BadCommandLine(f"no API token: pass --token or set ${HUB_TOKEN_ENV} (an operator "
                         "makes one with `mcpkit hub token create USER`)")
    hub = args.hub or os.environ.get(HUB_URL_ENV) or DEFAULT_HUB_URL
    try:
        return HubRestClient(hub, token.strip(), timeout_s=args.timeout)
    except ValueError as error:
        raise _BadCommandLine(str(error)) from None


# --- actions --------------------------------------------------------------------------------


def _add(client: HubRestClient, args: argparse.Namespace) -> int:
    """Register, then fetch the catalog at once (so `tools` has something to show): the
    registration stands even when the upstream cannot be reached yet - a warning says so."""
    created = client.call("POST", UPSTREAMS, body=_create_body(args))
    problem = None
    if created["enabled"] and not args.no_refresh:
        try:
            created = client.call("POST", f"{UPSTREAMS}/{created['id']}/refresh")
        except HubRequestError as error:
            if error.status != 502:
                raise
            problem = error.message
    if args.json:
        _print_json(created)
    else:
        health = "" if created["health_status"] == "unknown" else (
            f": {_clean(created['health_status'])}, {_tool_count(created)}")
        print(f"upstream {_clean(created['name'])} added (id {_clean(created['id'])}, "
              f"{_clean(created['transport'])} {_endpoint(created)}){health}")
    if problem is not None:
        print(f"mcpkit hub upstream: warning: its tools could not be fetched yet: "
              f"{_clean(problem, limit=None)} (the hub tries again at each health check; "
              "`upstream refresh` tries now)", file=sys.stderr)
    return 0


def _list(client: HubRestClient, args: argparse.Namespace) -> int:
    upstreams = list(_pages(client, UPSTREAMS, {}))
    if args.json:
        return _print_json(upstreams)
    if not upstreams:
        print("no upstreams yet: mcpkit hub upstream add NAME URL", file=sys.stderr)
        return 0
    rows = [("NAME", "TRANSPORT", "ENDPOINT", "ENABLED", "HEALTH", "TOOLS", "ID")]
    rows += [(u["name"], u["transport"], _endpoint(u), _yes(u["enabled"]), u["health_status"],
              str(u["tool_count"]), u["id"]) for u in upstreams]
    _print_table(rows)
    return 0


def _get(client: HubRestClient, args: argparse.Namespace) -> int:
    upstream = client.call("GET", f"{UPSTREAMS}/{_resolve(client, args.upstream)}")
    if args.json:
        return _print_json(upstream)
    _print_fields(upstream)
    return 0


def _remove(client: HubRestClient, args: argparse.Namespace) -> int:
    upstream = client.call("GET", f"{UPSTREAMS}/{_resolve(client, args.upstream)}")
    client.call("DELETE", f"{UPSTREAMS}/{upstream['id']}",
                query={"version": upstream["version"]})
    if args.json:
        return _print_json({"id": upstream["id"], "name": upstream["name"], "removed": True})
    print(f"upstream {_clean(upstream['name'])} removed")
    return 0


def _refresh(client: HubRestClient, args: argparse.Namespace) -> int:
    upstream = client.call("POST", f"{UPSTREAMS}/{_resolve(client, args.upstream)}/refresh")
    if args.json:
        return _print_json(upstream)
    print(f"upstream {_clean(upstream['name'])}: {_clean(upstream['health_status'])}, "
          f"{_tool_count(upstream)}")
    return 0


def _tools(client: HubRestClient, args: argparse.Namespace) -> int:
    upstream_id = _resolve(client, args.upstream)
    query = {"refresh": True} if args.refresh else {}
    tools = list(_pages(client, f"{UPSTREAMS}/{upstream_id}/tools", query))
    if args.json:
        return _print_json(tools)
    if not tools:
        print("no tools in the stored catalog (--refresh asks the upstream)", file=sys.stderr)
        return 0
    rows = [("NAME", "ALLOWED", "DESCRIPTION")]
    rows += [(t["name"], _yes(t["allowed"]), _first_line(t.get("description")))
             for t in tools]
    _print_table(rows)
    return 0


# --- requests -------------------------------------------------------------------------------


def _create_body(args: argparse.Namespace) -> dict[str, Any]:
    extras = getattr(args, "extras", [])
    command = getattr(args, "trailing", None) or []
    if extras:
        raise _BadCommandLine(f"unrecognized arguments: {' '.join(extras)} (a command the hub runs "
                         "goes after --: mcpkit hub upstream add NAME -- COMMAND ARGS)")
    if (args.url is None) == (not command):
        raise _BadCommandLine("give the upstream's URL, or after -- the command the hub runs "
                         "(mcpkit hub upstream add NAME URL | NAME -- COMMAND ARGS)")
    transport = args.transport or ("stdio" if command else _url_transport(args.url))
    body: dict[str, Any] = {"name": args.name, "transport": transport}
    if command:
        if transport != "stdio":
            raise _BadCommandLine(f"a {transport} upstream takes a URL, not a command after --")
        body["command"] = command
    else:
        body["url"] = args.url
    if args.headers:
        body["headers"] = dict(_header(text) for text in args.headers)
    if args.bearer is not None:
        body["bearer_token"] = args.bearer
    if args.catalog_headers:
        body["catalog_headers"] = dict(_header(text) for text in args.catalog_headers)
    if args.catalog_bearer is not None:
        body["catalog_bearer_token"] = args.catalog_bearer
    if args.disabled:
        body["enabled"] = False
    if args.disabled_tools:
        body["disabled_tools"] = args.disabled_tools
    if args.enabled_tools is not None:
        body["enabled_tools"] = args.enabled_tools
    if args.connect_timeout is not None:
        body["connect_timeout_s"] = args.connect_timeout
    if args.call_timeout is not None:
        body["call_timeout_s"] = args.call_timeout
    return body


def _url_transport(url: str) -> str:
    """ws for a ws(s):// URL, else http (Streamable HTTP; `-t sse` for the legacy one)."""
    return "ws" if url.lower().startswith(("ws://", "wss://")) else "http"


def _header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not name.strip():
        # the value is not echoed: it is usually a secret
        raise _BadCommandLine("--header: expected 'Name: value'")
    return name.strip(), value.strip()


def _resolve(client: HubRestClient, upstream: str) -> str:
    """The id of the caller's upstream named `upstream` (or `upstream` itself, an id)."""
    if UPSTREAM_ID.match(upstream):
        return upstream
    for item in _pages(client, UPSTREAMS, {}):
        if item["name"] == upstream:
            return str(item["id"])
    raise HubRequestError(f"you have no upstream named {upstream!r} "
                          "(mcpkit hub upstream list shows yours)", status=404)


def _pages(client: HubRestClient, path: str, query: dict[str, Any]) -> Iterator[Any]:
    """Every item of a paged listing, following `next_cursor` at most `MAX_PAGES` times."""
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = client.call("GET", path, query={**query, "cursor": cursor})
        if not isinstance(page, dict) or not isinstance(page.get("items"), list):
            raise HubRequestError(f"the hub's answer to GET {path} is not a page of items")
        yield from page["items"]
        cursor = page.get("next_cursor")
        if cursor is None:
            return
        if cursor in seen:
            raise HubRequestError(f"the hub's listing of {path} repeats a cursor")
        seen.add(cursor)
        query = {k: v for k, v in query.items() if k != "refresh"}  # refresh once, not per page
    raise HubRequestError(f"the hub's listing of {path} has more than {MAX_PAGES} pages")


# --- output ---------------------------------------------------------------------------------


def _fail(message: str, status: int) -> int:
    print(f"mcpkit hub upstream: error: {_clean(message, limit=None)}", file=sys.stderr)
    return status


def _print_json(value: Any) -> int:
    print(json.dumps(value, indent=2, ensure_ascii=False))
    return 0


def _print_fields(upstream: dict[str, Any]) -> None:
    headers = upstream.get("headers") or {}
    bearer = upstream.get("bearer_token_hint") if upstream.get("has_bearer") else None
    fields = [
        ("name", upstream["name"]),
        ("id", upstream["id"]),
        ("transport", upstream["transport"]),
        ("url" if upstream.get("url") else "command", _endpoint(upstream, limit=None)),
        ("enabled", _yes(upstream["enabled"])),
        ("health", f"{upstream['health_status']} (checked {_time(upstream['last_checked_at'])})"),
        ("last error", upstream.get("last_error") or "-"),
        *([("login", f"{upstream['login']['method']} {upstream['login']['path']}")]
          if upstream.get("login") else []),
        ("tools", f"{upstream['tool_count']} (catalog of {_time(upstream['catalog_updated_at'])})"),
        ("only tools", ", ".join(upstream["enabled_tools"])
            if upstream.get("enabled_tools") is not None else "all"),
        ("hidden tools", ", ".join(upstream["disabled_tools"]) or "none"),
        ("headers", ", ".join(f"{k}: {v}" for k, v in headers.items()) or "none"),
        ("bearer", bearer or "none"),
        ("catalog auth", _catalog_credentials(upstream)),
        ("timeouts", f"connect {upstream['connect_timeout_s']:g} s, "
                     f"call {upstream['call_timeout_s']:g} s"),
        ("created", _time(upstream["created_at"])),
        ("updated", f"{_time(upstream['updated_at'])} (version {upstream['version']})"),
    ]
    width = max(len(label) for label, _ in fields) + 1
    for label, value in fields:
        print(f"{label + ':':<{width}} {_clean(str(value), limit=None)}")


def _catalog_credentials(upstream: dict[str, Any]) -> str:
    """The catalog's own headers and bearer, masked; "as for calls" without any."""
    headers = upstream.get("catalog_headers") or {}
    shown = [f"{k}: {v}" for k, v in headers.items()]
    if upstream.get("has_catalog_bearer"):
        shown.append(f"bearer {upstream.get('catalog_bearer_token_hint') or '…'}")
    return ", ".join(shown) or "as for calls"


def _print_table(rows: Sequence[Sequence[str]]) -> None:
    cells = [[_clean(str(cell)) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    for row in cells:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
              .rstrip())


def _endpoint(upstream: dict[str, Any], limit: int | None = CELL_WIDTH) -> str:
    if upstream.get("url"):
        return _clean(str(upstream["url"]), limit=limit)
    return _clean(" ".join(str(part) for part in upstream.get("command") or []), limit=limit)


def _first_line(text: Any) -> str:
    if not isinstance(text, str) or not text.strip():
        return "-"
    return text.strip().splitlines()[0]


def _clean(text: str, limit: int | None = CELL_WIDTH) -> str:
    """`text` with control characters (escape sequences, newlines) shown as `?`, cut to
    `limit` characters with `…`."""
    shown = "".join(ch if ch.isprintable() else "?" for ch in str(text))
    if limit is not None and len(shown) > limit:
        return shown[: limit - 1] + "…"
    return shown


def _tool_count(upstream: dict[str, Any]) -> str:
    count = upstream["tool_count"]
    return f"{count} tool{'' if count == 1 else 's'}"


def _yes(flag: Any) -> str:
    return "yes" if flag else "no"


def _time(moment: Any) -> str:
    return "-" if not moment else str(moment).replace("T", " ")[:19] + "Z"


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds above 0")
    return value
