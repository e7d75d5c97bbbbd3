"""The `mcpkit mcp` verbs that edit the config files: `add`, `add-json`, `remove`, `enable`,
`disable` and `import`.

Entries are written as given (`${VAR}` stays a reference, so `--env TOKEN='${GH_TOKEN}'`
stores no secret), checked with `check_raw_entry` before anything is written, through
`configfile`'s atomic editing (a new file is created 0600).
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from mcpkit.manager import configfile, imports
from mcpkit.manager.cli_config import EXIT_FAILED, EXIT_OK, CliError, ConfigFiles
from mcpkit.manager.cli_render import mask_url
from mcpkit.manager.interpolate import is_variable_name

# --- add, add-json --------------------------------------------------------------------------


def run_add(args: argparse.Namespace) -> int:
    command: list[str] = args.trailing or []
    if args.extras:
        shown = shlex.join(args.extras)
        if args.url or command or args.extras[0].startswith("-"):
            args.subparser.error(f"unrecognized arguments: {shown}")
        raise CliError(f"mcp add {args.name}: the server's command goes after --",
                       hint=f"mcpkit mcp add {args.name} -- {shown}")
    if args.url and command:
        raise CliError("give either --url or a command after --, not both")
    if not args.url and not command:
        raise CliError(f"mcp add {args.name}: no server given",
                       hint=f"give its command after --: mcpkit mcp add {args.name} -- "
                            "COMMAND ARGS..., or its URL: --url URL")
    entry = _stdio_entry(args, command) if command else _remote_entry(args)
    if args.startup_timeout is not None:
        entry["startup_timeout_sec"] = args.startup_timeout
    if args.tool_timeout is not None:
        entry["tool_timeout_sec"] = args.tool_timeout
    if args.disabled:
        entry["enabled"] = False
    return _write(args.name, entry, args.scope, args.force)


def _stdio_entry(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    _refuse(args, {"--header": args.header,
                   "--bearer-token-env-var": args.bearer_token_env_var,
                   "--transport": args.transport}, "a --url server")
    entry: dict[str, Any] = {"type": "stdio", "command": command[0]}
    if command[1:]:
        entry["args"] = command[1:]
    if args.env:
        entry["env"] = dict(_env_pair(pair) for pair in args.env)
    if args.env_var:
        entry["env_vars"] = list(args.env_var)
    if args.cwd is not None:
        entry["cwd"] = args.cwd
    return entry


def _remote_entry(args: argparse.Namespace) -> dict[str, Any]:
    _refuse(args, {"--env": args.env, "--env-var": args.env_var, "--cwd": args.cwd},
            "a command (stdio) server")
    url: str = args.url
    kind = args.transport or ("ws" if url.lower().startswith(("ws://", "wss://")) else "http")
    entry: dict[str, Any] = {"type": kind, "url": url}
    if args.header:
        entry["headers"] = dict(_header_pair(pair) for pair in args.header)
    if args.bearer_token_env_var is not None:
        entry["bearer_token_env_var"] = args.bearer_token_env_var
    return entry


def _refuse(args: argparse.Namespace, given: dict[str, object], meant_for: str) -> None:
    wrong = [option for option, value in given.items() if value]
    if wrong:
        raise CliError(f"{', '.join(wrong)} only apply to {meant_for}")


def _env_pair(pair: str) -> tuple[str, str]:
    name, sep, value = pair.partition("=")
    if not sep or not is_variable_name(name):
        raise CliError(f"--env expects NAME=VALUE with a variable name, not {pair!r}",
                       hint="e.g. --env DEBUG=1 --env TOKEN='${GH_TOKEN}'")
    return name, value


def _header_pair(pair: str) -> tuple[str, str]:
    name, sep, value = pair.partition(":")
    name = name.strip()
    if not sep or not name or any(c.isspace() for c in name):
        raise CliError(f"--header expects 'Name: value', not {pair!r}",
                       hint="e.g. --header 'Authorization: Bearer ${API_TOKEN}'")
    return name, value.strip()


def run_add_json(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.json == "-" else args.json
    try:
        entry = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"the entry is not valid JSON: {exc.msg} at line {exc.lineno}, "
                       f"column {exc.colno}",
                       hint=f"one JSON object, quoted for the shell: mcpkit mcp add-json "
                            f"{args.name} '{{\"command\": \"npx\", \"args\": [\"-y\", "
                            f"\"pkg\"]}}'") from exc
    return _write(args.name, entry, args.scope, args.force)


def _write(name: str, entry: object, scope: str, force: bool) -> int:
    config = configfile.check_raw_entry(name, entry)
    files = ConfigFiles()
    path = files.write_path(scope)
    exists = name in files.raw(scope)
    if exists and not force:
        raise CliError(f"MCP server {name!r} already exists in {path}",
                       hint=f"--force replaces it; `mcpkit mcp get {name}` shows it")
    assert isinstance(entry, dict)  # check_raw_entry refuses anything else
    configfile.write_server(path, name, entry, replace=force)
    verb = "replaced" if exists else "added"
    print(f"{verb} {config.type} server {name} in {path} ({scope} scope)")
    other = "project" if scope == "user" else "user"
    if name in files.raw(other):
        effect = "it overrides this one" if other == "project" else "this one overrides it"
        print(f"note: the {other} config also has {name} ({files.path(other)}); {effect}")
    return EXIT_OK


# --- remove, enable, disable ----------------------------------------------------------------


def run_remove(args: argparse.Namespace) -> int:
    files = ConfigFiles()
    scope, path = files.locate(args.name, args.scope)
    configfile.remove_server(path, args.name)
    print(f"removed {args.name} from {path} ({scope} scope)")
    other = "user" if scope == "project" else "project"
    if args.name in files.raw(other):
        print(f"note: the {other} config still has {args.name} ({files.path(other)})")
    return EXIT_OK


def run_enable(args: argparse.Namespace) -> int:
    return _set_enabled(args, True)


def run_disable(args: argparse.Namespace) -> int:
    return _set_enabled(args, False)


def _set_enabled(args: argparse.Namespace, enabled: bool) -> int:
    files = ConfigFiles()
    scope, path = files.locate(args.name, args.scope)
    word = "enabled" if enabled else "disabled"
    if (files.raw(scope)[args.name].get("enabled") is not False) == enabled:
        print(f"{args.name} is already {word} in {path} ({scope} scope)")
        return EXIT_OK
    configfile.set_enabled(path, args.name, enabled)
    print(f"{word} {args.name} in {path} ({scope} scope)")
    return EXIT_OK


# --- import ---------------------------------------------------------------------------------


def run_import(args: argparse.Namespace) -> int:
    files = ConfigFiles()
    source: str = args.source
    if args.path is not None:
        path = Path(args.path)
        if not path.is_file():
            raise CliError(f"no such file: {path}", code=EXIT_FAILED,
                           hint=f"give the path of a {source} config file")
    else:
        candidates = imports.default_paths(source, home=Path.home(), cwd=files.cwd)
        found = [p for p in candidates if p.is_file()]
        if not found:
            raise CliError(f"no {source} config found; looked for "
                           f"{', '.join(str(p) for p in candidates)}", code=EXIT_FAILED,
                           hint=f"give its path: mcpkit mcp import --from {source} PATH")
        path = found[0]
    result = imports.read_foreign(source, path, cwd=files.cwd, home=Path.home())
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if not result.servers:
        raise CliError(f"no MCP servers to import in {path}", code=EXIT_FAILED)
    target = files.write_path(args.scope)
    existing = files.raw(args.scope)
    added, skipped = [], []
    for name, entry in result.servers.items():
        if name in existing and not args.force:
            skipped.append(name)
            continue
        if not args.dry_run:
            configfile.write_server(target, name, entry, replace=True)
        added.append((name, entry))
    verb = "would import" if args.dry_run else "imported"
    count = len(added)
    print(f"{verb} {count} server{'' if count == 1 else 's'} from {path} into {target} "
          f"({args.scope} scope)" + (":" if added else ""))
    for name, entry in added:
        target_text = mask_url(entry["url"]) if "url" in entry else \
            shlex.join([entry.get("command", ""), *entry.get("args", [])])
        print(f"  + {name}  ({entry.get('type')}: {target_text})")
    if skipped:
        print(f"skipped {len(skipped)} already in {target} (--force replaces them):")
        for name in skipped:
            print(f"  = {name}")
    if args.dry_run:
        print("dry run: nothing was written")
    return EXIT_OK
