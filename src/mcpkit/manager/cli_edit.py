"""The `mcpkit mcp` verbs that edit the config files: `add`, `add-json`, `remove`, `enable`,
`disable` and `import`.

Entries are written as given (`${VAR}` stays a reference, so `--env TOKEN='${GH_TOKEN}'`
stores no secret), checked with `check_raw_entry` before anything is written, through
`configfile`'s atomic editing (a new file is created 0600).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from mcpkit.manager import configfile, imports
from mcpkit.manager.cli_config import EXIT_FAILED, EXIT_OK, SCOPES, CliError, ConfigFiles
from mcpkit.manager.cli_render import mask, mask_env, mask_url
from mcpkit.manager.config import ConfigError
from mcpkit.manager.interpolate import is_variable_name

# --- add, add-json --------------------------------------------------------------------------


def run_add(args: argparse.Namespace) -> int:
    command, url = _server_given(args)
    entry = _stdio_entry(args, command) if command else _remote_entry(args, url)
    if args.startup_timeout is not None:
        entry["startup_timeout_sec"] = args.startup_timeout
    if args.tool_timeout is not None:
        entry["tool_timeout_sec"] = args.tool_timeout
    if args.disabled:
        entry["enabled"] = False
    code = _write(args.name, entry, args.scope, args.force)
    if url and not args.disabled and not args.no_probe:
        _say_if_login_needed(args.name, args.probe_timeout)
    return code


def _say_if_login_needed(name: str, timeout: float) -> None:
    """Connect to the server just added, for at most `timeout` seconds: when it asks for a
    login, say so and name the command. Whatever else happens is not this command's
    business (`mcp test` is): the entry is written, and the add succeeds."""
    from mcpkit.manager import cli_servers
    from mcpkit.manager.cli_targets import prepared

    files = ConfigFiles()
    try:
        entry = files.entry(name)
        config = prepared(files, entry, timeout=timeout)
    except ConfigError:
        return  # e.g. a variable that is not set yet: nothing to probe with
    if config.static_credentials:
        return  # a 401 would be about that token, not a login
    try:
        outcome = cli_servers.survey([config])[name]
    except Exception:
        return
    if outcome.login is not None:
        print(f"{name} requires login (it asks for OAuth): run `{outcome.login}`")


def _server_given(args: argparse.Namespace) -> tuple[list[str], str]:
    """The command (after `--`, or the words after NAME) or the URL (`--url`, or the word
    after NAME) the user gave, in the spellings of Claude Code and Codex."""
    name: str = args.name
    trailing: list[str] = args.trailing or []
    words: list[str] = args.extras
    options = [word for word in words if word.startswith("-")]
    if options:
        if words and not words[0].startswith("-") and not looks_like_url(words[0]):
            # `mcp add fs npx -y pkg`: the command's own options: they need `--`.
            raise CliError(f"mcp add {name}: a command with options goes after --",
                           hint=_add_line(args, ["--", *words]))
        args.subparser.error(f"unrecognized arguments: {shlex.join(options)}")
    url: str = args.url or ""
    if words and looks_like_url(words[0]) and len(words) == 1 and not url:
        url, words = words[0], []
    if url and (words or trailing):
        raise CliError(f"mcp add {name}: give a URL or a command after --, not both")
    command = trailing or words
    if command and looks_like_url(command[0]):
        raise CliError(f"mcp add {name}: {command[0]!r} is a URL, not a command to run",
                       hint=f"a URL server is added without --: "
                            f"{_add_line(args, [command[0]])}")
    guess = _url_guess(command[0]) if command else None
    if guess and args.transport in (None, "stdio"):
        raise CliError(f"mcp add {name}: {command[0]!r} looks like a server's address, not a "
                       "command to run", hint=f"give it as a URL: {_add_line(args, [guess])}")
    if url and args.transport == "stdio":
        raise CliError(f"mcp add {name}: --transport stdio runs a command, not a URL",
                       hint=f"{_add_line(args, [url], transport='http')}, or a command: "
                            f"mcpkit mcp add {name} -- COMMAND ARGS...")
    if command and args.transport not in (None, "stdio"):
        guess = _url_guess(command[0]) if len(command) == 1 else None
        raise CliError(f"mcp add {name}: --transport {args.transport} needs the server's URL"
                       f", not the command {shlex.join(command)!r}",
                       hint=(f"did you mean {_add_line(args, [guess])}?" if guess else
                             f"give its URL: {_add_line(args, ['URL'])}"))
    if not url and not command:
        raise CliError(f"mcp add {name}: no server given",
                       hint=f"give its URL: mcpkit mcp add {name} URL, or its command "
                            f"after --: mcpkit mcp add {name} -- COMMAND ARGS...")
    return command, url


def looks_like_url(text: str) -> bool:
    """`scheme://…`: what no command is called."""
    return _URL.match(text) is not None


def _url_guess(text: str) -> str | None:
    """`localhost:8000/mcp` → `http://localhost:8000/mcp`; None when it does not look like a
    host and port."""
    return f"http://{text}" if _HOST_PORT.match(text) else None


def _add_line(args: argparse.Namespace, rest: list[str], *,
              transport: str | None = None) -> str:
    """`mcpkit mcp add …` as the user wrote it, with `rest` as its server: options that do
    not hold secrets are kept (a header's value could be a token: shown as 'K: …')."""
    parts = ["mcpkit", "mcp", "add"]
    chosen = transport or (args.transport if args.transport != "stdio" else None)
    if chosen:
        parts += ["--transport", chosen]
    if args.scope != "user":
        parts += ["--scope", args.scope]
    if rest and rest[0] == "--":  # a command: the options of a command server
        for pair in args.env:
            key, _, value = pair.partition("=")
            parts += ["--env", f"{key}={mask_env(key, value)}"]
    else:
        for header in args.header:
            key, _, value = header.partition(":")
            parts += ["--header", f"{key.strip()}: {mask(value.strip())}"]
    return shlex.join([*parts, args.name, *rest])


_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")
_HOST_PORT = re.compile(r"(localhost|\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:]+\]"
                        r"|[A-Za-z0-9.-]+\.[A-Za-z]{2,}):\d{1,5}(/\S*)?$")


def _stdio_entry(args: argparse.Namespace, command: list[str]) -> dict[str, Any]:
    _refuse(args, {"--header": args.header,
                   "--bearer-token-env-var": args.bearer_token_env_var,
                   **_oauth_flags(args)}, "a URL server")
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


def _remote_entry(args: argparse.Namespace, url: str) -> dict[str, Any]:
    _refuse(args, {"--env": args.env, "--env-var": args.env_var, "--cwd": args.cwd},
            "a command (stdio) server")
    kind = args.transport or ("ws" if url.lower().startswith(("ws://", "wss://")) else "http")
    entry: dict[str, Any] = {"type": kind, "url": url}
    if args.header:
        entry["headers"] = dict(_header_pair(pair) for pair in args.header)
    if args.bearer_token_env_var is not None:
        entry["bearer_token_env_var"] = args.bearer_token_env_var
    oauth = _oauth_table(args)
    if oauth:
        entry["oauth"] = oauth
    return entry


def _oauth_flags(args: argparse.Namespace) -> dict[str, object]:
    return {"--client-id": args.client_id, "--client-secret-env": args.client_secret_env,
            "--scopes": args.scopes, "--callback-port": args.callback_port,
            "--token-store": args.token_store, "--grant": args.grant,
            "--client-metadata-url": args.client_metadata_url}


def _oauth_table(args: argparse.Namespace) -> dict[str, Any]:
    """The `oauth` table of the flags given (checked with the rest of the entry)."""
    if args.client_secret:
        raise CliError("mcpkit writes no secret to its config: --client-secret is not taken",
                       hint="export the secret in a variable and name it: "
                            "--client-secret-env NAME")
    table: dict[str, Any] = {}
    for key in ("client_id", "client_secret_env", "callback_port", "grant",
                "client_metadata_url"):
        if getattr(args, key) is not None:
            table[key] = getattr(args, key)
    if args.token_store is not None:
        table["store"] = args.token_store
    if args.scopes is not None:
        table["scopes"] = split_scopes(args.scopes)
    return table


def split_scopes(text: str) -> list[str]:
    """`a,b c` → [a, b, c]: Codex separates scopes with commas, OAuth with spaces."""
    return [scope for scope in re.split(r"[,\s]+", text) if scope]


def _refuse(args: argparse.Namespace, given: dict[str, object], meant_for: str) -> None:
    wrong = [option for option, value in given.items() if value]
    if wrong:
        verb = "applies" if len(wrong) == 1 else "apply"
        raise CliError(f"{', '.join(wrong)} only {verb} to {meant_for}")


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
    _write_server(path, scope, name, entry, replace=force)
    verb = "replaced" if exists else "added"
    print(f"{verb} {config.type} server {name} in {path} ({scope} scope)")
    for note in files.shadowing(name, scope):
        print(f"note: {note}")
    return EXIT_OK


def _write_server(path: Path, scope: str, name: str, entry: dict[str, Any], *,
                  replace: bool) -> None:
    """`configfile.write_server`; a new local file is listed in `.mcpkit/.gitignore` (it is
    the user's own, like Claude Code's local scope, and may hold secrets)."""
    new = not path.exists()
    configfile.write_server(path, name, entry, replace=replace)
    ignore = path.parent / ".gitignore"
    if new and scope == "local" and not ignore.exists():
        ignore.write_text(f"{path.name}\n", encoding="utf-8")


# --- remove, enable, disable ----------------------------------------------------------------


def run_remove(args: argparse.Namespace) -> int:
    files = ConfigFiles()
    scope, path = files.locate(args.name, args.scope)
    configfile.remove_server(path, args.name)
    print(f"removed {args.name} from {path} ({scope} scope)")
    for other in SCOPES:
        if other != scope and args.name in files.raw(other):
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
    read = _read_sources(source, _import_paths(args, files), files, args.max_file_bytes)
    servers, origin = _merge(read)
    if not servers:
        where = ", ".join(str(path) for path, _ in read)
        raise CliError(f"no MCP servers to import in {where}", code=EXIT_FAILED)
    target = files.write_path(args.scope)
    existing = files.raw(args.scope)
    added = [name for name in servers if args.force or name not in existing]
    skipped = [name for name in servers if name not in added]
    if not args.dry_run:
        for name in added:
            _write_server(target, args.scope, name, servers[name], replace=True)
    _print_import(args, read, servers, origin, added, skipped, target)
    return EXIT_OK


def _import_paths(args: argparse.Namespace, files: ConfigFiles) -> list[Path]:
    """The file given, or every file of the tool that exists (user's, then project's)."""
    if args.path is not None:
        path = Path(args.path)
        if not path.is_file():
            raise CliError(f"no such file: {path}", code=EXIT_FAILED,
                           hint=f"give the path of a {args.source} config file")
        return [path]
    candidates = list(dict.fromkeys(
        imports.default_paths(args.source, home=Path.home(), cwd=files.cwd)))
    found = [path for path in candidates if path.is_file()]
    if not found:
        raise CliError(f"no {args.source} config found; looked for "
                       f"{', '.join(str(p) for p in candidates)}", code=EXIT_FAILED,
                       hint=f"give its path: mcpkit mcp import --from {args.source} PATH")
    return found


def _read_sources(source: str, paths: list[Path], files: ConfigFiles,
                  max_bytes: int) -> list[tuple[Path, imports.ImportResult]]:
    """Each file read (all of them before anything is written: one bad file stops the
    import, naming that file)."""
    read = []
    for path in paths:
        try:
            result = imports.read_foreign(source, path, cwd=files.cwd, home=Path.home(),
                                          max_bytes=max_bytes)
        except ConfigError as exc:
            others = "" if len(paths) == 1 else \
                f", or import another file alone: mcpkit mcp import --from {source} PATH"
            raise CliError(str(exc), hint=f"fix the file{others}") from exc
        where = f"{path}: " if len(paths) > 1 else ""
        for warning in result.warnings:
            print(f"warning: {where}{warning}", file=sys.stderr)
        read.append((path, result))
    return read


def _merge(read: list[tuple[Path, imports.ImportResult]]
           ) -> tuple[dict[str, dict[str, Any]], dict[str, Path]]:
    """All files' servers; a name in several files takes the last file's entry (the
    project's over the user's, as the tool itself does), and a different entry under the
    same name is reported as a conflict."""
    servers: dict[str, dict[str, Any]] = {}
    origin: dict[str, Path] = {}
    for path, result in read:
        for name, entry in result.servers.items():
            if name in servers and servers[name] != entry:
                print(f"conflict: {name!r} is in {origin[name]} and in {path} with different "
                      f"settings; importing the one in {path}", file=sys.stderr)
            if name not in servers or servers[name] != entry:
                origin[name] = path
            servers[name] = entry
    return servers, origin


def _print_import(args: argparse.Namespace, read: list[tuple[Path, imports.ImportResult]],
                  servers: dict[str, dict[str, Any]], origin: dict[str, Path],
                  added: list[str], skipped: list[str], target: Path) -> None:
    verb = "would import" if args.dry_run else "imported"
    count = len(added)
    sources = ", ".join(str(path) for path, _ in read)
    print(f"{verb} {count} server{'' if count == 1 else 's'} from {sources} into {target} "
          f"({args.scope} scope)" + (":" if added else ""))
    several = len(read) > 1
    for name in added:
        entry = servers[name]
        target_text = mask_url(entry["url"]) if "url" in entry else \
            shlex.join([entry.get("command", ""), *entry.get("args", [])])
        whence = f"  from {origin[name]}" if several else ""
        print(f"  + {name}  ({entry.get('type')}: {target_text}){whence}")
    if skipped:
        print(f"skipped {len(skipped)} already in {target} (--force replaces them):")
        for name in skipped:
            print(f"  = {name}")
    if args.dry_run:
        print("dry run: nothing was written")
