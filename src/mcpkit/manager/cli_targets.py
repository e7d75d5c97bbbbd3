"""What a command talks to: a configured server's NAME, a URL, or a command after `--`.

    mcpkit tools files                                     a configured server
    mcpkit tools http://127.0.0.1:8000/mcp                 Streamable HTTP (era detected)
    mcpkit tools -t sse http://127.0.0.1:9000/sse          HTTP+SSE (2024-11-05)
    mcpkit tools ws://127.0.0.1:9000/mcp                   WebSocket
    mcpkit tools -- npx -y @modelcontextprotocol/server-everything        stdio
    mcpkit tools --command 'npx -y @modelcontextprotocol/server-everything'   (fastmcp's)

A URL takes `-H/--header 'K: V'` (repeatable) and `--bearer TOKEN` (or `$MCPKIT_BEARER`); a
command takes `-e/--env KEY=VALUE` (repeatable).
Every command resolves its target through `resolve` (one place, so all of them accept the
same forms). A URL or command becomes a `ServerConfig` like a configured entry, and is
started through the same `ServerManager`, so it behaves as a configured server would.

Secrets: the bearer token is not stored in the config (the config names the variable
MCPKIT_BEARER, read from `Target.environ`), and `Target.redact` blanks the token, every
header and `--env` value and a password or secret-looking query value of the URL out of
whatever the command prints about the connection (errors, -v logs).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import re
import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from mcpkit.manager.cli_config import (
    EXIT_FAILED,
    CliError,
    ConfigFiles,
    Entry,
    expected_exit_code,
)
from mcpkit.manager.config import ServerConfig
from mcpkit.manager.interpolate import is_variable_name
from mcpkit.manager.names import sanitize

if TYPE_CHECKING:
    from mcpkit.manager.diagnose import Diagnosis

BEARER_ENV = "MCPKIT_BEARER"
"""The variable `--bearer` defaults to (a token on the command line shows in `ps`)."""
TARGET_TRANSPORTS = ("http", "sse", "ws")
URL_SCHEMES = {"http": ("http", "https"), "sse": ("http", "https"), "ws": ("ws", "wss")}
MAX_HEADERS = 64
"""`--header` options of one command (a typo in a script loop, not a real need)."""
MAX_HEADER_BYTES = 8 * 1024
"""Bytes of one `--header` (name and value)."""
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP header name (RFC 9110 token)."""
MASK = "****"
MIN_SECRET_CHARS = 3


@dataclass
class Target:
    """A server to start for one command."""

    config: ServerConfig
    label: str
    """How messages name it: the configured name, the masked URL or the command line."""
    entry: Entry | None = None
    """The configured entry; None for a URL or a command given directly."""
    environ: Mapping[str, str] = field(default_factory=lambda: os.environ)
    """Where the config's variables (bearer_token_env_var, env_vars) are read."""
    secrets: tuple[str, ...] = ()

    @property
    def direct(self) -> bool:
        return self.entry is None

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, MASK)
        return text

    def failure(self, error: str | None, failure: BaseException | None) -> CliError:
        """The error of this server not starting: `diagnose`'s one line and fix. For a URL
        or command given directly, the fix is said in this command's options (`--bearer`,
        `-H`, another URL) rather than as an `mcp add` line, which would do something else."""
        from mcpkit.manager.diagnose import diagnose

        if not self.direct:
            assert self.entry is not None
            found = diagnose(self.config, error, failure, self.entry.config)
            return CliError(found.message, hint=found.hint, code=EXIT_FAILED)
        shown = dataclasses.replace(self.config, name=self.label)
        found = diagnose(shown, error, failure, direct=True)
        return CliError(self.redact(found.message),
                        hint=self.redact(self._direct_hint(found, error)),
                        code=EXIT_FAILED)

    def _direct_hint(self, found: Diagnosis, error: str | None) -> str:
        """`diagnose`'s fix for a direct target, but said in this command's options where
        what was given decides it (a list past the client's bounds, credentials)."""
        if error and "(ListLimits." in error:
            from mcpkit.client.listing import MAX_LIST_BYTES, MAX_LIST_ITEMS, MAX_LIST_PAGES

            return (f"its list does not end within the client's bounds ({MAX_LIST_PAGES} "
                    f"pages, {MAX_LIST_ITEMS} items, {MAX_LIST_BYTES // 2**20} MiB: "
                    "mcpkit.client.ListLimits); the server is broken")
        if found.kind == "auth":
            if self.secrets:
                return ("the server refused the credentials given (--bearer, --header or "
                        f"${BEARER_ENV}); check them")
            return (f"the server requires authentication: give a token with --bearer TOKEN "
                    f"(or ${BEARER_ENV}), or a header with -H 'Authorization: ...'")
        return found.hint

    @contextlib.contextmanager
    def redacting(self) -> Iterator[None]:
        """Errors (and -v log lines) raised inside, with the secrets blanked out."""
        if not self.secrets:
            yield
            return
        log_filter = _Redact(self)
        handlers = logging.getLogger().handlers
        for handler in handlers:
            handler.addFilter(log_filter)
        try:
            yield
        except BrokenPipeError:
            raise  # `| head`: the command line's wrapper stops quietly
        except CliError as exc:
            exc.message = self.redact(exc.message)
            exc.hint = self.redact(exc.hint) if exc.hint else exc.hint
            raise
        except Exception as exc:
            code = expected_exit_code(exc)
            if code is None:
                raise
            raise CliError(self.redact(str(exc) or type(exc).__name__), code=code) from None
        finally:
            for handler in handlers:
                handler.removeFilter(log_filter)


class _Redact(logging.Filter):
    def __init__(self, target: Target) -> None:
        super().__init__()
        self.target = target

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.target.redact(record.getMessage())
        record.args = None
        return True


# --- the options ------------------------------------------------------------------------------


def add_target_options(parser: argparse.ArgumentParser) -> None:
    """`-t/--transport`, `-H/--header`, `--bearer` and `--command`, for a URL or a command
    given in place of a configured name."""
    group = parser.add_argument_group(
        "a server given directly (instead of a configured name)",
        "TARGET may be a URL, or leave it out and give the server's command after --: "
        "`-- python -m mcpkit serve --transport stdio`.")
    group.add_argument("-t", "--transport", choices=TARGET_TRANSPORTS,
                       help="how to reach a URL (default: ws for ws:// URLs, else http: "
                            "Streamable HTTP, falling back to HTTP+SSE for old servers)")
    group.add_argument("-H", "--header", action="append", default=[], metavar="'K: V'",
                       help="an HTTP header for a URL (repeatable); never printed")
    group.add_argument("--bearer", metavar="TOKEN",
                       help=f"send `Authorization: Bearer TOKEN` to a URL (default: "
                            f"${BEARER_ENV} when set); never printed")
    group.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE",
                       help="a variable for a command's server (repeatable; it gets these "
                            "and a minimal environment: PATH, HOME, LANG…); never printed")
    group.add_argument("--command", dest="command_line", metavar="'CMD ARGS'",
                       help="a stdio server's command line as one string (as fastmcp's "
                            "--command); the same as `-- CMD ARGS`")


# --- resolving ----------------------------------------------------------------------------------


def stdio_command(args: argparse.Namespace, *, pairs_after_dash: bool = False) -> list[str] | None:
    """The stdio command given with `--command` or after `--`, or None.

    `pairs_after_dash` (`call`, `prompts get`): what follows `--` may also be key=value
    pairs (a pair that starts with `-`); it is a command when its first word has no `=`."""
    trailing: list[str] | None = args.trailing
    if args.command_line is not None:
        if trailing and not _are_pairs(trailing, pairs_after_dash):
            raise CliError("give the server's command once: --command 'CMD ARGS' or "
                           "-- CMD ARGS, not both")
        command = shlex.split(args.command_line)
        if not command:
            raise CliError("--command is empty", hint="e.g. --command 'npx -y some-server'")
        return command
    if trailing is None or _are_pairs(trailing, pairs_after_dash):
        return None
    if not trailing:
        raise CliError("nothing after --", hint="give the server's command after --: "
                                                "-- python -m mcpkit serve --transport stdio")
    return list(trailing)


def _are_pairs(trailing: list[str], pairs_allowed: bool) -> bool:
    return pairs_allowed and bool(trailing) and "=" in trailing[0]


def resolve(args: argparse.Namespace, words: list[str], *, files: ConfigFiles | None = None,
            pairs_after_dash: bool = False, start_timeout: float | None = None
            ) -> tuple[Target, list[str]]:
    """The target of a command and the rest of its positional words.

    With a stdio command (after `--` or `--command`) every word is the command's own
    (TOOL, URI, NAME…); otherwise the first word is the TARGET: a URL, or a configured
    name. `start_timeout` replaces the server's startup_timeout_sec. Words argparse could
    not place are refused here, unless the command takes key=value pairs
    (`pairs_after_dash`) and judges them itself."""
    if args.extras and not pairs_after_dash:
        args.subparser.error(f"unrecognized arguments: {' '.join(args.extras)}")
    command = stdio_command(args, pairs_after_dash=pairs_after_dash)
    if command is not None:
        _refuse_for_stdio(args)
        target, rest = _stdio_target(command, parse_env(args.env)), words
    elif not words:
        raise CliError("no server given",
                       hint="give a configured name, a URL (http://127.0.0.1:8000/mcp), or "
                            "the server's command after --")
    elif "://" in words[0]:
        target, rest = _url_target(args, words[0]), words[1:]
    else:
        _refuse_for_name(args, words[0])
        return configured(files or ConfigFiles(), words[0], timeout=start_timeout), words[1:]
    if start_timeout is not None:
        target.config.startup_timeout_sec = start_timeout
    return target, rest


def configured(files: ConfigFiles, name: str, *, timeout: float | None = None) -> Target:
    """A configured server, enabled, its variables expanded (CliError/ConfigError if not)."""
    entry = files.entry(name)
    if not entry.enabled:
        raise CliError(f"MCP server {entry.name!r} is disabled",
                       hint=f"enable it with `mcpkit mcp enable {entry.name}`")
    config = prepared(files, entry, timeout=timeout)
    return Target(config, name, entry=entry, environ=files.environ)


def prepared(files: ConfigFiles, entry: Entry, *, timeout: float | None) -> ServerConfig:
    """The interpolated config, ready to start (even when disabled); ConfigError when it
    cannot be (an invalid entry, an unset variable or bearer token)."""
    from mcpkit.manager.cli_render import redact_variables_of

    config = files.resolve(entry)
    config.bearer_token(files.environ)  # unset: an error now, not inside the manager
    redact_variables_of(entry.raw, files.environ)
    changes: dict[str, Any] = {"required": False, "enabled": True}
    if timeout is not None:
        changes["startup_timeout_sec"] = timeout
    return dataclasses.replace(config, **changes)


def _refuse_for_name(args: argparse.Namespace, name: str) -> None:
    given = [flag for flag, value in (("--transport", args.transport), ("--header", args.header),
                                      ("--bearer", args.bearer), ("--env", args.env)) if value]
    if given:
        raise CliError(f"{', '.join(given)} only apply to a URL or a command; {name!r} is a "
                       "configured server, whose settings are in its config",
                       hint=f"see them with `mcpkit mcp get {name}`, or give the URL instead")


def _refuse_for_stdio(args: argparse.Namespace) -> None:
    given = [flag for flag, value in (("--transport", args.transport), ("--header", args.header),
                                      ("--bearer", args.bearer)) if value]
    if given:
        raise CliError(f"{', '.join(given)} only apply to a URL, not to a command (stdio)")


def _stdio_target(command: list[str], env: dict[str, str]) -> Target:
    name = sanitize(PurePath(command[0]).name)[:64]
    config = ServerConfig(name=name, type="stdio", command=command[0], args=command[1:],
                          env=env, required=False, scope="command line")
    return Target(config, shlex.join(command), secrets=_longest_first(env.values()))


def parse_env(given: list[str]) -> dict[str, str]:
    """`-e KEY=VALUE` options; an error names the variable, never its value."""
    env: dict[str, str] = {}
    for number, pair in enumerate(given, 1):
        key, sep, value = pair.partition("=")
        if not sep or not is_variable_name(key):
            raise CliError(f"--env number {number} is not KEY=VALUE with a variable name "
                           "(not shown: it may hold a secret)", hint="e.g. -e DEBUG=1")
        env[key] = value
    return env


def _longest_first(values: Iterable[str | None]) -> tuple[str, ...]:
    """The secrets to blank out, longest first (one may contain another); very short
    values are left alone (blanking "1" would garble every message)."""
    return tuple(sorted({v for v in values if v and len(v) >= MIN_SECRET_CHARS},
                        key=len, reverse=True))


def _url_target(args: argparse.Namespace, url: str) -> Target:
    from mcpkit.manager.cli_render import looks_secret, mask_url

    try:  # urlsplit and .port raise ValueError: an unclosed IPv6 bracket, a port over 65535
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise CliError(f"{mask_url(url)} is not a valid URL: {exc}") from exc
    scheme = parts.scheme.lower()
    kind = args.transport or ("ws" if scheme in ("ws", "wss") else "http")
    if scheme not in URL_SCHEMES[kind]:
        wanted = " or ".join(f"{s}://" for s in URL_SCHEMES[kind])
        raise CliError(f"a {kind} URL starts with {wanted}, not {scheme}://",
                       hint="ws:// URLs are WebSocket servers; http(s):// URLs take "
                            "--transport http or sse")
    if not parts.hostname:
        raise CliError(f"{mask_url(url)} has no host", hint="e.g. http://127.0.0.1:8000/mcp")
    if args.env:
        raise CliError("--env only applies to a command's server (stdio), not to a URL")
    headers = parse_headers(args.header)
    token = args.bearer if args.bearer is not None else os.environ.get(BEARER_ENV) or None
    if args.bearer is not None and not args.bearer.strip():
        raise CliError("--bearer is empty", hint=f"give the token, or set ${BEARER_ENV}")
    environ: dict[str, str] = dict(os.environ)
    if token is not None:
        environ[BEARER_ENV] = token
    name = sanitize(f"{parts.hostname}-{port}" if port else parts.hostname)[:64]
    config = ServerConfig(name=name, type=kind, url=url, headers=headers,
                          bearer_token_env_var=BEARER_ENV if token else None,
                          required=False, scope="command line")
    # What the URL itself carries is a secret too (a password, a ?token=…).
    in_url = [parts.password, *(value for key, value in parse_qsl(parts.query)
                                 if looks_secret(key))]
    secrets = _longest_first([token, *headers.values(), *in_url])
    return Target(config, mask_url(url), environ=environ, secrets=secrets)


def parse_headers(given: list[str]) -> dict[str, str]:
    """`-H 'Name: value'` options as a dict; an error names the header, never its value."""
    if len(given) > MAX_HEADERS:
        raise CliError(f"{len(given)} --header options; at most {MAX_HEADERS}")
    headers: dict[str, str] = {}
    for number, pair in enumerate(given, 1):
        name, sep, value = pair.partition(":")
        name, value = name.strip(), value.strip()
        if len(pair.encode("utf-8", "surrogatepass")) > MAX_HEADER_BYTES:
            raise CliError(f"--header number {number} is over {MAX_HEADER_BYTES} bytes")
        if not sep or not _TOKEN.match(name):
            raise CliError(f"--header number {number} is not 'Name: value' (not shown: it "
                           "may hold a secret)", hint="e.g. -H 'X-Api-Key: abc123'")
        if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in value):
            raise CliError(f"--header {name}: the value has a control character")
        headers[name] = value
    return headers
