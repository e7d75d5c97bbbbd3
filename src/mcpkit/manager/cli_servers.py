"""The commands that start servers: `mcpkit mcp list` (status), `mcpkit mcp test`,
`mcpkit tools` and `mcpkit call` (`tools` and `call` also take a URL or a command instead of
a configured name: `cli_targets`).

Each starts only the servers it needs, through a `ServerManager` (so it behaves as an agent
using the same config would), and stops them before it returns. `required` is ignored here:
one server that fails is reported, it does not abort a listing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shlex
import sys
import time
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from mcpkit.manager import cli_elicit
from mcpkit.manager.catalog import ManagedTool
from mcpkit.manager.cli_config import EXIT_FAILED, EXIT_OK, CliError, ConfigFiles, Entry
from mcpkit.manager.cli_render import (
    StatusLine,
    cut,
    cut_middle,
    first_line,
    mask_url,
    one_line,
    output_width,
    parameter_lines,
    redact,
    result_text,
    tool_flags,
)
from mcpkit.manager.cli_targets import Target, prepared, resolve, stdio_command
from mcpkit.manager.config import ConfigError, ServerConfig, json_type
from mcpkit.manager.diagnose import diagnose
from mcpkit.manager.errors import ToolNotAllowed, UnknownTool
from mcpkit.manager.managed import Status
from mcpkit.manager.manager import ServerManager

PROGRESS_TICK_S = 0.1
SETTLED = (Status.READY, Status.FAILED, Status.NEEDS_AUTH, Status.DISABLED)


@dataclass
class Outcome:
    """What starting one server found."""

    status: str
    error: str | None = None
    tools: list[ManagedTool] = field(default_factory=list)
    startup_ms: int | None = None
    era: str | None = None
    protocol_version: str | None = None
    server_info: dict[str, str] | None = None
    failure: BaseException | None = None
    """The exception behind `error`, for `diagnose`."""
    transport: str | None = None
    login: str | None = None
    """For a server that needs a login: the command that logs in."""


# --- starting servers -------------------------------------------------------------------------


def startable(files: ConfigFiles, entries: Iterable[Entry], *, timeout: float | None
              ) -> tuple[list[ServerConfig], dict[str, Outcome]]:
    """The enabled entries as configs to start; what cannot start is already an outcome
    (`disabled`, or `invalid` with the reason: a bad entry, an unset variable)."""
    configs: list[ServerConfig] = []
    outcomes: dict[str, Outcome] = {}
    for entry in entries:
        if not entry.enabled:
            outcomes[entry.name] = Outcome("disabled")
            continue
        try:
            configs.append(prepared(files, entry, timeout=timeout))
        except ConfigError as exc:
            outcomes[entry.name] = Outcome("invalid", str(exc))
    return configs, outcomes


@contextlib.asynccontextmanager
async def running(configs: list[ServerConfig], *, environ: Mapping[str, str] | None = None,
                  client_options: dict[str, Any] | None = None, label: str | None = None
                  ) -> AsyncIterator[ServerManager]:
    """A started manager of `configs`; a progress line on stderr while they start.
    `environ`: where the configs' variables are read (default: this process's);
    `client_options`: extra `Client` arguments (how `call` answers a server that asks);
    `label`: how the progress line names a single server (default: its name)."""
    manager = ServerManager(configs, environ=environ, client_options=client_options)
    status = StatusLine()
    async with anyio.create_task_group() as tg:
        if status.enabled and configs:
            tg.start_soon(_draw_progress, manager, status, label)
        try:
            await manager.start()
        finally:
            tg.cancel_scope.cancel()
            status.clear()
    try:
        yield manager
    finally:
        await manager.close()


async def _draw_progress(manager: ServerManager, status: StatusLine, label: str | None
                         ) -> None:
    started = time.monotonic()
    names = list(manager.servers)
    while True:
        waiting = [n for n in names if manager.servers[n].status not in SETTLED]
        seconds = f" {time.monotonic() - started:.0f} s" if time.monotonic() - started >= 1 else ""
        if len(names) == 1:
            status.show(f"connecting to {label or names[0]}…{seconds}")
        else:
            status.show(f"connecting to {len(names)} servers… {len(names) - len(waiting)}/"
                        f"{len(names)} done{seconds}"
                        + (f" (waiting for {', '.join(waiting)})" if waiting else ""))
        await anyio.sleep(PROGRESS_TICK_S)


def survey(configs: list[ServerConfig], *, environ: Mapping[str, str] | None = None
           ) -> dict[str, Outcome]:
    """Start the servers in parallel, note what each did, stop them."""

    async def go() -> dict[str, Outcome]:
        outcomes: dict[str, Outcome] = {}
        async with running(configs, environ=environ) as manager:
            for name in manager.servers:
                outcomes[name] = outcome_of(manager, name)
        return outcomes

    return anyio.run(go)


def outcome_of(manager: ServerManager, name: str) -> Outcome:
    """What starting server `name` of a started manager found."""
    server = manager.servers[name]
    outcome = Outcome(server.status.value, server.error, failure=server.failure,
                      login=server.login)
    if server.status is Status.READY:
        outcome.tools = manager.tools(name)
        if server.startup_s is not None:
            outcome.startup_ms = round(server.startup_s * 1000)
        client = server.client
        if client is not None:
            outcome.transport = client.session.transport.kind
            outcome.era = client.era.value if client.era else None
            outcome.protocol_version = client.protocol_version
            if client.server_info is not None:
                outcome.server_info = {"name": client.server_info.name,
                                       "version": client.server_info.version}
    return outcome


def failed(config: ServerConfig, error: str | None, failure: BaseException | None = None,
           written: ServerConfig | None = None) -> CliError:
    """The error of a server that did not start: what went wrong and its fix
    (`diagnose`; `written`: the entry as written, shown instead of `config`)."""
    found = diagnose(config, error, failure, written)
    return CliError(found.message, hint=found.hint, code=EXIT_FAILED)


def connected_line(name: str, outcome: Outcome) -> str:
    """What `-v` says of a server that started: what, how, how fast."""
    details = [f"{outcome.transport or '?'}", f"era {outcome.era}",
               f"protocol {outcome.protocol_version}"]
    if outcome.server_info:
        details.append(f"server {outcome.server_info['name']} "
                       f"{outcome.server_info['version']}")
    count = len(outcome.tools)
    return (f"connected to {name} in {outcome.startup_ms} ms ({', '.join(details)}); "
            f"{count} tool{'' if count == 1 else 's'}")


def say_connected(outcomes: dict[str, Outcome], verbose: bool) -> None:
    """With -v, one line on stderr for each server that started."""
    if verbose:
        for name, outcome in outcomes.items():
            if outcome.status == Status.READY.value:
                print(f"mcpkit: {connected_line(name, outcome)}", file=sys.stderr)


# --- mcp test -------------------------------------------------------------------------------------


def run_test(args: argparse.Namespace) -> int:
    files = ConfigFiles()
    entry = files.entry(args.name)
    config = prepared(files, entry, timeout=args.timeout)
    outcome = survey([config])[config.name]
    ok = outcome.status == Status.READY.value
    if args.json:
        report = {
            "name": config.name, "scope": entry.scope, "type": config.type,
            "target": redact(_target(entry.config or config)), "enabled": entry.enabled, "ok": ok,
            "status": outcome.status, "error": redact(outcome.error),
            "startup_ms": outcome.startup_ms, "tools": [t.tool.name for t in outcome.tools],
            "era": outcome.era, "protocol_version": outcome.protocol_version,
            "server": outcome.server_info,
        }
        if not ok:
            found = diagnose(config, outcome.error, outcome.failure, entry.config)
            report.update(problem=found.kind, message=found.message, hint=found.hint)
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return EXIT_OK if ok else EXIT_FAILED
    if not ok:
        raise failed(config, outcome.error, outcome.failure, entry.config)
    say_connected({config.name: outcome}, args.verbose)
    count = len(outcome.tools)
    details = [f"era {outcome.era}", f"protocol {outcome.protocol_version}"]
    if outcome.server_info:
        details.append(f"server {outcome.server_info['name']} {outcome.server_info['version']}")
    print(f"ok: {config.name} ({config.type}) — connected in {outcome.startup_ms} ms, "
          f"{count} tool{'' if count == 1 else 's'} ({', '.join(details)})")
    if not entry.enabled:
        print(f"note: {config.name} is disabled in {entry.path}; "
              f"`mcpkit mcp enable {config.name}` turns it on")
    return EXIT_OK


def _target(config: ServerConfig) -> str:
    return config.describe_target() if config.type == "stdio" else mask_url(config.url or "")


# --- tools --------------------------------------------------------------------------------------


def run_tools(args: argparse.Namespace) -> int:
    files = ConfigFiles()
    if args.server is not None or stdio_command(args) is not None:
        target = one_target(args, [args.server] if args.server else [], files=files)
        with target.redacting():
            outcomes = survey([target.config], environ=target.environ)
            written = {target.config.name: target.entry.config if target.entry else None}
            return _show_tools(args, outcomes, target, {target.config.name: target.config},
                               written)
    configs, outcomes = startable(files, files.entries().values(), timeout=args.timeout)
    outcomes = {n: o for n, o in outcomes.items() if o.status != "disabled"}
    if not configs and not outcomes:
        if args.json:
            print("[]")
        print("no enabled MCP servers", file=sys.stderr)
        print(f"hint: {files.known_hint()}", file=sys.stderr)
        return EXIT_OK
    outcomes.update(survey(configs))
    return _show_tools(args, outcomes, None, {c.name: c for c in configs},
                       {n: e.config for n, e in files.entries().items()})


def one_target(args: argparse.Namespace, words: list[str], *,
               files: ConfigFiles | None = None) -> Target:
    """The target of a command that takes nothing but it (TARGET, or a command after --)."""
    target, rest = resolve(args, words, files=files, start_timeout=getattr(args, "timeout", None))
    if rest:
        raise CliError(f"unexpected {shlex.join(rest)!r} with the server's command",
                       hint="give a configured name or URL, or a command after --, not both")
    return target


def _show_tools(args: argparse.Namespace, outcomes: dict[str, Outcome], target: Target | None,
                started: dict[str, ServerConfig], written: dict[str, ServerConfig | None]
                ) -> int:
    """Print the tools of the servers that started; report the ones that did not
    (`started`: the configs as started; `written`: the entries as written, which are shown)."""
    say_connected(outcomes, args.verbose)
    failures = [n for n, o in outcomes.items() if o.status != Status.READY.value]
    if target is not None and target.direct and failures:
        outcome = outcomes[failures[0]]
        raise target.failure(outcome.error, outcome.failure)
    if args.json:
        import msgspec

        listed = [{**msgspec.to_builtins(t.tool), "server": t.server, "exposed_name": t.name}
                  for o in outcomes.values() for t in o.tools]
        print(json.dumps(listed, indent=2, ensure_ascii=False))
    else:
        labels = {target.config.name: target.label} if target is not None else {}
        _print_tools(outcomes, labels, exposed=target is None or not target.direct)
    report_failures(outcomes, started, written)
    return EXIT_FAILED if failures else EXIT_OK


def report_failures(outcomes: dict[str, Outcome], configs: dict[str, ServerConfig],
                    written: dict[str, ServerConfig | None]) -> None:
    """On stderr, for each server that did not start: what went wrong and its fix
    (`configs`: as started; `written`: the entries as written, which are shown)."""
    for name, outcome in outcomes.items():
        if outcome.status == Status.READY.value:
            continue
        config = configs.get(name)
        if outcome.status == Status.NEEDS_AUTH.value:
            print(f"mcpkit: {name} needs login (it asks for OAuth)", file=sys.stderr)
            print(f"hint: log in: `{outcome.login}`", file=sys.stderr)
        elif config is not None and outcome.status == Status.FAILED.value:
            found = diagnose(config, outcome.error, outcome.failure, written.get(name))
            print(f"mcpkit: error: {found.message}", file=sys.stderr)
            print(f"hint: {found.hint}", file=sys.stderr)
        else:  # invalid: the entry or a variable is wrong
            print(f"mcpkit: error: {name} is {outcome.status}: "
                  f"{redact(one_line(outcome.error or ''))}", file=sys.stderr)
            print(f"hint: `mcpkit mcp get {name}` shows its entry", file=sys.stderr)


def _print_tools(outcomes: dict[str, Outcome], labels: dict[str, str], *, exposed: bool
                 ) -> None:
    """Each server's tools; `exposed`: with the name an agent sees (`mcp__server__tool`)."""
    width = output_width()
    blocks = []
    for name, outcome in outcomes.items():
        if outcome.status != Status.READY.value:
            continue
        count = len(outcome.tools)
        # Names (a URL with ?task_id=…, tools that share a prefix) are cut in the middle, so
        # two of them never narrow to the same text; descriptions at the end.
        fit_name = (lambda text: cut_middle(text, width)) if width else str
        fit_text = (lambda text: cut(text, width)) if width else str
        lines = [fit_name(f"{labels.get(name, name)} ({count} tool{'' if count == 1 else 's'})")]
        for tool in outcome.tools:
            flags = "".join(f"  [{flag}]" for flag in tool_flags(tool.tool))
            shown = f" → {tool.name}" if exposed else ""
            lines.append(fit_name(f"  {tool.tool.name}{shown}{flags}"))
            described = first_line(tool.description)
            details = ([described] if described else []) + parameter_lines(tool.input_schema)
            lines += [fit_text(f"      {line}") for line in details]
        blocks.append("\n".join(lines))
    if blocks:
        print("\n\n".join(blocks))


# --- call ---------------------------------------------------------------------------------------


def tool_arguments(args_json: str | None, pairs: list[str]
                   ) -> tuple[dict[str, Any], dict[str, str]]:
    """`--args` (a JSON object), then the `key=value` pairs over it. A value that parses as
    JSON is that (numbers, true, null, objects, quoted strings), anything else the text.
    Also returns each pair's text, for parameters the tool declares as strings."""
    arguments: dict[str, Any] = {}
    if args_json is not None:
        try:
            parsed = json.loads(args_json)
        except json.JSONDecodeError as exc:
            raise CliError(f"--args is not valid JSON: {exc.msg} at line {exc.lineno}, "
                           f"column {exc.colno}",
                           hint="quote the object for the shell: --args '{\"path\": \"x\"}'"
                           ) from exc
        if not isinstance(parsed, dict):
            raise CliError("--args must be a JSON object of the tool's arguments, not "
                           f"{json_type(parsed)}",
                           hint="e.g. --args '{\"path\": \"README.md\"}'")
        arguments.update(parsed)
    texts: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"expected key=value, not {pair!r}",
                           hint="give arguments as key=value pairs (values are JSON when they "
                                "parse: n=3 flag=true) or as --args JSON")
        texts[key] = value
        try:
            arguments[key] = json.loads(value)
        except json.JSONDecodeError:
            arguments[key] = value
    return arguments, texts


def as_declared(arguments: dict[str, Any], texts: dict[str, str],
                schema: dict[str, Any]) -> dict[str, Any]:
    """`text=42` for a parameter declared `"type": "string"` is the string "42"."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return arguments
    fixed = dict(arguments)
    for key, text in texts.items():
        prop = properties.get(key)
        if isinstance(prop, dict) and prop.get("type") == "string":
            fixed[key] = text
    return fixed


def run_call(args: argparse.Namespace) -> int:
    refuse_options(args)
    words = [w for w in (args.server, args.tool) if w is not None] + args.pairs + args.extras
    target, rest = resolve(args, words, pairs_after_dash=True)
    if not rest:
        raise CliError("which tool?", hint=f"list them with `mcpkit tools {_tools_target(args)}`")
    tool, pairs = rest[0], rest[1:]
    arguments, texts = tool_arguments(args.args, [*pairs, *trailing_pairs(args)])
    answers = cli_elicit.from_args(args)  # how to answer a server that asks the user
    with target.redacting():
        try:
            result = anyio.run(_call, target, tool, (arguments, texts), args.timeout,
                               answers.client_options(), args.verbose)
        except Exception as exc:
            cli_elicit.explain(answers, exc)
            raise
        cli_elicit.explain(answers, None)
    if args.json:
        import msgspec

        print(json.dumps(msgspec.to_builtins(result), indent=2, ensure_ascii=False))
    elif result.is_error is True:
        print(result_text(result), file=sys.stderr)
    else:
        text = result_text(result)
        if text:
            print(text)
    return EXIT_FAILED if result.is_error is True else EXIT_OK


def refuse_options(args: argparse.Namespace) -> None:
    """Words argparse could not place that look like options: a typo, or a key=value pair
    that starts with - (which goes after --, or into --args when -- gives the command)."""
    options = [extra for extra in args.extras if extra.startswith("-")]
    if options:
        where = ("into --args JSON" if args.trailing and "=" not in args.trailing[0]
                 else "after --")
        args.subparser.error(f"unrecognized arguments: {' '.join(options)} (a key=value "
                             f"pair that starts with - goes {where})")


def trailing_pairs(args: argparse.Namespace) -> list[str]:
    """key=value pairs after `--` (ones that start with -); `--` followed by a word without
    `=` is the server's command instead (`cli_targets.stdio_command`)."""
    trailing: list[str] = args.trailing or []
    return trailing if trailing and "=" in trailing[0] else []


def _tools_target(args: argparse.Namespace) -> str:
    if args.command_line is not None:
        return f"--command {shlex.quote(args.command_line)}"
    if args.trailing and "=" not in args.trailing[0]:
        return f"-- {shlex.join(args.trailing)}"
    return "TARGET"


@contextlib.asynccontextmanager
async def connected(target: Target, client_options: dict[str, Any] | None = None,
                    verbose: bool = False) -> AsyncIterator[ServerManager]:
    """A manager of the one server `target`, started and ready (CliError if it is not).
    The one place a single-server command (`call`, `resources`, `prompts`, `inspect`)
    connects."""
    async with running([target.config], environ=target.environ,
                       client_options=client_options, label=target.label) as manager:
        server = manager.servers[target.config.name]
        if server.status is not Status.READY:
            raise target.failure(server.error, server.failure)
        say_connected({target.config.name: outcome_of(manager, target.config.name)}, verbose)
        yield manager


async def _call(target: Target, tool: str,
                given: tuple[dict[str, Any], dict[str, str]], limit: float | None,
                client_options: dict[str, Any] | None = None, verbose: bool = False) -> Any:
    status = StatusLine()
    config = target.config

    def on_progress(progress: float, total: float | None, message: str | None) -> None:
        done = f"{progress:g}/{total:g}" if total else f"{progress:g}"
        status.show(f"{tool}: {done}" + (f" {message}" if message else ""))

    async with connected(target, client_options, verbose) as manager:
        status.show(f"calling {target.label} {tool}…")
        arguments, texts = given
        for listed in manager.tools(config.name):
            if listed.tool.name == tool:
                arguments = as_declared(arguments, texts, listed.input_schema)
        try:
            started = time.monotonic()
            result = await manager.call_server_tool(config.name, tool, arguments,
                                                    on_progress=on_progress, timeout=limit)
            if verbose:
                status.clear()
                print(f"mcpkit: {tool} answered in {round((time.monotonic() - started) * 1000)}"
                      f" ms" + (" (a tool error)" if result.is_error is True else ""),
                      file=sys.stderr)
            return result
        except UnknownTool as exc:
            names = ", ".join(t.tool.name for t in manager.tools(config.name)) or "none"
            raise CliError(f"{target.label} has no tool named {tool!r}",
                           hint=f"its tools: {names}") from exc
        except ToolNotAllowed as exc:
            raise CliError(str(exc), hint=f"see enabled_tools/disabled_tools: "
                                          f"`mcpkit mcp get {config.name}`") from exc
        except TimeoutError as exc:
            seconds = limit if limit is not None else config.tool_timeout_sec
            raise CliError(f"{target.label} {tool}: no answer within {seconds:g} s",
                           hint="give it longer with --timeout SECONDS",
                           code=EXIT_FAILED) from exc
        finally:
            status.clear()
