"""A server's resources, prompts and whole catalog from the terminal.

    mcpkit resources list TARGET              the resources (URI, name, MIME type)
    mcpkit resources templates TARGET         the resource templates
    mcpkit resources read TARGET URI [-o FILE]
    mcpkit prompts list TARGET                the prompts and their arguments
    mcpkit prompts get TARGET NAME [key=value …] [--args JSON]
    mcpkit inspect TARGET [-o FILE]           a JSON report of the whole server

TARGET is a configured name or a URL, or left out with the server's command after `--`
(`cli_targets`). Lists are the ones the manager fetched when the server started, through
the client's bounded paginator (`mcpkit.client.listing`): a server whose list never ends
fails to start with a message that names the bound. `--json` prints what the server sent.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import msgspec

from mcpkit import __version__
from mcpkit.manager.cli_config import EXIT_FAILED, EXIT_OK, CliError
from mcpkit.manager.cli_render import cut, first_line, output_width, table
from mcpkit.manager.cli_servers import (
    connected,
    one_target,
    refuse_options,
    tool_arguments,
    trailing_pairs,
)
from mcpkit.manager.cli_targets import Target, resolve
from mcpkit.manager.managed import ManagedServer
from mcpkit.manager.manager import ServerManager
from mcpkit.protocol import types
from mcpkit.sizes import decoded_size

INSPECT_FORMAT = 1
"""The version of `mcpkit inspect`'s report layout."""


def _builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


async def _with_server(target: Target, work: Any, *extra: Any) -> Any:
    """Run `work(manager, server, *extra)` with the target's server started and ready."""
    async with connected(target) as manager:
        return await work(manager, manager.servers[target.config.name], *extra)


def _run(target: Target, work: Any, *extra: Any) -> Any:
    with target.redacting():
        return anyio.run(_with_server, target, work, *extra)


# --- resources ------------------------------------------------------------------------------


def run_resources_list(args: argparse.Namespace) -> int:
    return _show_listing(args, "resources", lambda server: server.resources,
                         ("URI", "NAME", "MIME TYPE", "DESCRIPTION"),
                         lambda r: [r.uri, r.name, _text(r.mime_type),
                                    first_line(_text(r.description))])


def run_resources_templates(args: argparse.Namespace) -> int:
    return _show_listing(args, "resource templates", lambda server: server.resource_templates,
                         ("URI TEMPLATE", "NAME", "MIME TYPE", "DESCRIPTION"),
                         lambda t: [t.uri_template, t.name, _text(t.mime_type),
                                    first_line(_text(t.description))])


def _show_listing(args: argparse.Namespace, what: str,
                  items_of: Callable[[ManagedServer], Sequence[Any]],
                  header: tuple[str, ...], row: Callable[[Any], list[str]]) -> int:
    """One list of the target's catalog: a table, or with --json what the server sent."""
    target = one_target(args, _words(args.target))

    async def listed(_: ServerManager, server: ManagedServer) -> list[Any]:
        return list(items_of(server))

    items: list[Any] = _run(target, listed)
    if args.json:
        _print_json(_builtins(items))
    elif not items:
        print(f"{target.label} has no {what}", file=sys.stderr)
    else:
        _print_table(header, [row(item) for item in items])
    return EXIT_OK


def run_resources_read(args: argparse.Namespace) -> int:
    target, rest = resolve(args, _words(args.target, args.uri), start_timeout=args.timeout)
    if len(rest) != 1:
        raise CliError("give one resource URI" if not rest else
                       f"unexpected {' '.join(rest[1:])!r} after the URI",
                       hint="mcpkit resources read TARGET URI (see `mcpkit resources list "
                            "TARGET` and `mcpkit resources templates TARGET`)")
    uri = rest[0]

    async def read(manager: ServerManager, server: ManagedServer) -> types.ReadResourceResult:
        return await manager.read_resource(server.name, uri)

    result: types.ReadResourceResult = _run(target, read)
    if args.json:
        _print_json(_builtins(result))
    elif args.output is not None:
        _write_contents(result.contents, Path(args.output), args.max_bytes)
    else:
        _print_contents(result.contents)
    return EXIT_OK


def _print_contents(contents: list[types.ResourceContents]) -> None:
    """Text as it is; binary contents as one line (size and type) and how to save them."""
    for item in contents:
        if isinstance(item.text, str):
            print(item.text)
        else:
            size = decoded_size(item.blob) if isinstance(item.blob, str) else 0
            print(f"[binary: {item.uri}, {_text(item.mime_type) or 'no MIME type'}, "
                  f"{size} bytes; save it with -o FILE]")


def _write_contents(contents: list[types.ResourceContents], path: Path, limit: int) -> None:
    if len(contents) != 1:
        raise CliError(f"the resource has {len(contents)} parts; -o writes a resource of one",
                       hint="see them all with --json")
    item = contents[0]
    if isinstance(item.text, str):
        data = item.text.encode("utf-8", "surrogatepass")
    elif isinstance(item.blob, str):
        if decoded_size(item.blob) > limit:
            raise CliError(f"{item.uri} is {decoded_size(item.blob)} bytes, over --max-bytes "
                           f"{limit}", hint="raise --max-bytes to write it", code=EXIT_FAILED)
        try:
            data = base64.b64decode(item.blob, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CliError(f"{item.uri}: the server sent a blob that is not base64",
                           code=EXIT_FAILED) from exc
    else:
        data = b""
    if len(data) > limit:
        raise CliError(f"{item.uri} is {len(data)} bytes, over --max-bytes {limit}",
                       hint="raise --max-bytes to write it", code=EXIT_FAILED)
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}", code=EXIT_FAILED) from exc
    mime = _text(item.mime_type) or "no MIME type"
    print(f"wrote {len(data)} bytes ({mime}) to {path}", file=sys.stderr)


# --- prompts --------------------------------------------------------------------------------


def run_prompts_list(args: argparse.Namespace) -> int:
    target = one_target(args, _words(args.target))

    async def listed(_: ServerManager, server: ManagedServer) -> list[types.Prompt]:
        return server.prompts

    prompts: list[types.Prompt] = _run(target, listed)
    if args.json:
        _print_json(_builtins(prompts))
        return EXIT_OK
    if not prompts:
        print(f"{target.label} has no prompts", file=sys.stderr)
        return EXIT_OK
    width = output_width()
    for prompt in prompts:
        lines = [prompt.name + (f" — {first_line(prompt.description)}"
                                if isinstance(prompt.description, str) and prompt.description
                                else "")]
        for argument in prompt.arguments or []:
            line = f"    {argument.name}" + (" (required)" if argument.required is True else "")
            if isinstance(argument.description, str) and argument.description.strip():
                line += f" — {first_line(argument.description)}"
            lines.append(line)
        if not prompt.arguments:
            lines.append("    (no arguments)")
        for line in lines:
            print(cut(line, width) if width else line)
    return EXIT_OK


def run_prompts_get(args: argparse.Namespace) -> int:
    refuse_options(args)
    words = _words(args.target, args.name) + args.pairs + args.extras
    target, rest = resolve(args, words, pairs_after_dash=True, start_timeout=args.timeout)
    if not rest:
        raise CliError("which prompt?", hint="list them with `mcpkit prompts list TARGET`")
    name, pairs = rest[0], rest[1:]
    given, texts = tool_arguments(args.args, [*pairs, *trailing_pairs(args)])
    # Prompt arguments are strings: a pair keeps its text (n=3 is "3"), a JSON value that
    # is not a string is sent as its JSON text.
    arguments = {key: texts.get(key, value if isinstance(value, str) else json.dumps(value))
                 for key, value in given.items()}

    async def get(_: ServerManager, server: ManagedServer) -> types.GetPromptResult:
        prompt = next((p for p in server.prompts if p.name == name), None)
        if prompt is None:
            known = ", ".join(p.name for p in server.prompts) or "none"
            raise CliError(f"{target.label} has no prompt named {name!r}",
                           hint=f"its prompts: {known}")
        missing = [a.name for a in prompt.arguments or []
                   if a.required is True and a.name not in arguments]
        if missing:
            raise CliError(f"prompt {name} needs {', '.join(missing)}",
                           hint="give them as key=value: "
                                + " ".join(f"{m}=VALUE" for m in missing))
        client = await server.ready_client()
        return await client.get_prompt(name, arguments)

    result: types.GetPromptResult = _run(target, get)
    if args.json:
        _print_json(_builtins(result))
        return EXIT_OK
    from mcpkit.manager.cli_render import content_text

    if isinstance(result.description, str) and result.description:
        print(f"# {result.description}")
    for index, message in enumerate(result.messages):
        if index or (isinstance(result.description, str) and result.description):
            print()
        print(f"[{message.role}]")
        print(content_text(message.content))
    return EXIT_OK


# --- inspect --------------------------------------------------------------------------------


def run_inspect(args: argparse.Namespace) -> int:
    target = one_target(args, _words(args.target))

    async def report(_: ServerManager, server: ManagedServer) -> dict[str, Any]:
        return inspection(target, server)

    found: dict[str, Any] = _run(target, report)
    text = json.dumps(found, indent=2, ensure_ascii=False)
    if args.output is None:
        print(text)
        return EXIT_OK
    try:
        Path(args.output).write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {args.output}: {exc.strerror or exc}",
                       code=EXIT_FAILED) from exc
    counts = ", ".join(f"{len(found[key])} {key}" for key in
                       ("tools", "resources", "templates", "prompts"))
    print(f"wrote {args.output}: {found['server']['name']} {found['server']['version']} "
          f"({counts})", file=sys.stderr)
    return EXIT_OK


def inspection(target: Target, server: ManagedServer) -> dict[str, Any]:
    """The report: the server (as it introduced itself), the connection, and its catalog
    as the server sent it (MCP wire names: camelCase)."""
    client = server.client
    assert client is not None
    info = _builtins(client.server_info) if client.server_info is not None else {}
    return {
        "format": INSPECT_FORMAT,
        "server": {
            **info,
            "instructions": client.instructions,
            "capabilities": client.server_capabilities,
        },
        "connection": {
            "target": target.label,
            "transport": target.config.type,
            "era": client.era.value if client.era else None,
            "protocolVersion": client.protocol_version,
            "supportedVersions": client.supported_versions,
            "startupMs": round(server.startup_s * 1000) if server.startup_s else None,
        },
        "tools": _builtins(server.tools),
        "resources": _builtins(server.resources),
        "templates": _builtins(server.resource_templates),
        "prompts": _builtins(server.prompts),
        "environment": {"mcpkit": __version__},
    }


# --- helpers --------------------------------------------------------------------------------


def _words(*given: str | None) -> list[str]:
    return [word for word in given if word is not None]


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _print_table(headers: tuple[str, ...], rows: list[list[str]]) -> None:
    for line in table(headers, rows, width=output_width(), shrink=len(headers) - 1):
        print(line)

