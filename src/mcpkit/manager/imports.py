"""Other tools' MCP config files, read into raw mcpkit entries (`mcpkit mcp import`).

    claude    ~/.claude.json, .mcp.json           {"mcpServers": {...}}; ~/.claude.json also
    (Code)                                        has per-project `projects.<dir>.mcpServers`
    claude-desktop claude_desktop_config.json     {"mcpServers": {...}}, in ~/.config/Claude
                                                  (Linux), ~/Library/Application Support/
                                                  Claude (macOS), %APPDATA%/Claude (Windows)
    cursor    .cursor/mcp.json, ~/.cursor/mcp.json {"mcpServers": {...}}; a url without type
                                                  is http
    vscode    .vscode/mcp.json, the profile's     {"servers": {...}, "inputs": [...]}
              mcp.json
    codex     .codex/config.toml,                  [mcp_servers.NAME] tables
              ~/.codex/config.toml
    opencode  opencode.json(c), .opencode/…,       {"mcp": {NAME: {"type": "local"|"remote"}}}
              ~/.config/opencode/opencode.json(c)

The result is what `configfile.write_server` takes: entries as they will stand in our file,
so each tool's variable syntax is rewritten into ours and every other `$` is escaped as `$$`
(our interpolation would otherwise read it):

    Claude Code      ${VAR}, ${VAR:-default}       kept (the same syntax)
    Claude Desktop   (none)                        `$` escaped
    Cursor, VS Code  ${env:VAR}                    ${VAR}
                     ${workspaceFolder}, ${userHome}, ${workspaceFolderBasename},
                     ${pathSeparator}              the value, now
                     ${input:ID} (VS Code)         ${ID as a variable name}, with a warning:
                                                   VS Code prompts, we read the environment
    Codex            (none); env_http_headers       Header: ${VAR}
    OpenCode         {env:VAR}                     ${VAR}; {file:…} is kept, with a warning

Login settings become the entry's `oauth` table (`oauth_settings`); a secret is never
carried over (Claude Code keeps it in its keychain), and settings with no mcpkit meaning are
dropped with a warning:

    Claude Code  oauth.clientId, .callbackPort      client_id, callback_port
                 oauth.scopes ("a b", one string)   scopes (a list)
                 oauth.authServerMetadataUrl        dropped (mcpkit discovers the metadata)
    Codex        oauth.client_id, .callback_port    client_id, callback_port
                 scopes                             scopes
                 mcp_oauth_callback_port,           callback_port, store of every URL
                 mcp_oauth_credentials_store        server (top-level keys)
                 oauth_resource, oauth.callback_url dropped (mcpkit uses the resource the
                                                    server's metadata names)

An entry that also has a static token (`bearer_token_env_var`, an `Authorization` header)
keeps the token and drops the login settings, with a warning: mcpkit takes one of the two.

Whatever else cannot be carried over (an `envFile`, approval modes…) is dropped
with a warning, and an entry that still fails our checks is skipped with one; a name we do
not accept is rewritten (with a warning). JSON of the editors and of OpenCode may have
comments and trailing commas (JSONC).

Every file is hostile input: it is read only up to `MAX_IMPORT_FILE_BYTES` (settable), and a
file that is not what it should be is a `ConfigError` naming the file and what is wrong.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard
from urllib.parse import urlsplit

from mcpkit.manager.config import MAX_NAME_LENGTH, ConfigError, check_name, json_type
from mcpkit.manager.configfile import check_raw_entry
from mcpkit.manager.interpolate import escape, is_variable_name

SOURCES = ("claude", "claude-desktop", "cursor", "vscode", "codex", "opencode")
MAX_IMPORT_FILE_BYTES = 64 * 1024 * 1024
"""The largest file `read_foreign` reads (~/.claude.json keeps history and grows large)."""

_DOLLAR_REFERENCE = re.compile(r"\$\{([^}]*)\}")
_OPENCODE_REFERENCE = re.compile(r"\{(env|file):([^}]*)\}")
_CLAUDE_VARIABLE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?::-(.*))?", re.DOTALL)
_NOT_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")
_NOT_VARIABLE_CHARS = re.compile(r"[^A-Za-z0-9_]+")
_WHITESPACE = re.compile(r"\s*")

_TYPES = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamable_http": "http",
          "streamableHttp": "http", "sse": "sse", "ws": "ws", "websocket": "ws"}
_COMMON_KEYS = ("command", "args", "env", "cwd", "url", "headers")
_CODEX_KEYS = ("command", "args", "env", "cwd", "url", "bearer_token_env_var", "enabled",
               "required", "startup_timeout_sec", "tool_timeout_sec", "enabled_tools",
               "disabled_tools")


@dataclass
class ImportResult:
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Name → raw mcpkit entry, ready for `configfile.write_server`."""
    warnings: list[str] = field(default_factory=list)


def default_paths(source: str, *, home: Path, cwd: Path,
                  environ: Mapping[str, str] | None = None) -> list[Path]:
    """Every file where `source` keeps servers (existing or not), the user's first, then the
    project's: the order in which the tool lets one entry override another."""
    env = os.environ if environ is None else environ
    app_support = home / "Library" / "Application Support"
    app_data = Path(env["APPDATA"]) if env.get("APPDATA") else home / "AppData" / "Roaming"
    config_home = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME", "").startswith(
        "/") else home / ".config"
    codex_home = Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
    user_dirs = list(dict.fromkeys((config_home, home / ".config", app_support, app_data)))
    candidates = {
        "claude": [home / ".claude.json", cwd / ".mcp.json"],
        "claude-desktop": [base / "Claude" / "claude_desktop_config.json"
                           for base in user_dirs],
        "cursor": [home / ".cursor" / "mcp.json", cwd / ".cursor" / "mcp.json"],
        "vscode": [*(base / "Code" / "User" / "mcp.json" for base in user_dirs),
                   cwd / ".vscode" / "mcp.json"],
        "codex": [codex_home / "config.toml", cwd / ".codex" / "config.toml"],
        "opencode": [directory / name
                     for directory in (home / ".config" / "opencode", cwd / ".opencode", cwd)
                     for name in ("opencode.json", "opencode.jsonc")],
    }
    return candidates[_check_source(source)]


def read_foreign(source: str, path: Path, *, cwd: Path | None = None,
                 home: Path | None = None,
                 max_bytes: int = MAX_IMPORT_FILE_BYTES) -> ImportResult:
    """The servers of `source`'s file at `path`; `cwd` picks the Claude project and stands in
    for the editors' workspace folder when the file is not in one."""
    readers: dict[str, Callable[[_Context], None]] = {
        "claude": _read_claude, "claude-desktop": _read_claude, "cursor": _read_cursor,
        "vscode": _read_vscode, "codex": _read_codex, "opencode": _read_opencode,
    }
    reader = readers[_check_source(source)]
    context = _Context(path, Path.cwd() if cwd is None else cwd,
                       Path.home() if home is None else home, max_bytes,
                       desktop=source == "claude-desktop")
    reader(context)
    return context.result


def _check_source(source: str) -> str:
    if source not in SOURCES:
        raise ConfigError(f"unknown source {source!r}; use one of {', '.join(SOURCES)}")
    return source


class _Context:
    """One import: the file, where it is used from, and what came out so far."""

    def __init__(self, path: Path, cwd: Path, home: Path, max_bytes: int, *,
                 desktop: bool = False) -> None:
        self.path = path
        self.cwd = cwd
        self.home = home
        self.max_bytes = max_bytes
        self.desktop = desktop or path.name == "claude_desktop_config.json"
        self.result = ImportResult()

    def warn(self, name: str, message: str) -> None:
        self.result.warnings.append(f"server {name!r}: {message}")

    def workspace(self, marker: str) -> Path:
        """The project a `.cursor/` or `.vscode/` file belongs to; `cwd` for a user file."""
        folder = self.path.parent
        if folder.name == marker and folder.parent.resolve() != self.home.resolve():
            return folder.parent
        return self.cwd

    def add(self, name: str, entry: dict[str, Any] | None) -> None:
        """Keep the entry under a name we accept, if it passes our checks."""
        if entry is None:
            return
        ours = self._our_name(name)
        try:
            check_raw_entry(ours, entry)
        except ConfigError as exc:
            self.result.warnings.append(f"skipped: {exc}")
            return
        self.result.servers[ours] = entry

    def _our_name(self, name: str) -> str:
        try:
            check_name(name, "")
        except ConfigError:
            pass
        else:
            if name not in self.result.servers:
                return name
        base = (_NOT_NAME_CHARS.sub("-", name).strip("-") or "server")[:MAX_NAME_LENGTH]
        ours, number = base, 1
        while ours in self.result.servers:
            number += 1
            suffix = f"-{number}"
            ours = base[:MAX_NAME_LENGTH - len(suffix)] + suffix
        if ours != name:
            self.warn(name, f"imported as {ours!r} (names are letters, digits, '_', '-' and "
                            f"'.', at most {MAX_NAME_LENGTH}, and unique)")
        return ours


# --- rewriting strings ----------------------------------------------------------------------

Rewrite = Callable[[str], str]


def _rewrite_all(value: Any, rewrite: Rewrite) -> Any:
    """`value` with every string in it rewritten (object keys kept)."""
    if isinstance(value, str):
        return rewrite(value)
    if isinstance(value, list):
        return [_rewrite_all(item, rewrite) for item in value]
    if isinstance(value, dict):
        return {key: _rewrite_all(item, rewrite) for key, item in value.items()}
    return value


def _rewrite_references(text: str, pattern: re.Pattern[str],
                        resolve: Callable[[re.Match[str]], str | None]) -> str:
    """Each match of `pattern` becomes `resolve(match)` (None: kept as literal text); every
    other `$` is escaped."""
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(escape(text[last:match.start()]))
        replacement = resolve(match)
        out.append(escape(match.group()) if replacement is None else replacement)
        last = match.end()
    out.append(escape(text[last:]))
    return "".join(out)


def _claude_code_rewrite(text: str) -> str:
    def resolve(match: re.Match[str]) -> str | None:
        variable = _CLAUDE_VARIABLE.fullmatch(match.group(1))
        if variable is None:
            return None
        name, default = variable.groups()
        return f"${{{name}}}" if default is None else f"${{{name}:-{escape(default)}}}"

    return _rewrite_references(text, _DOLLAR_REFERENCE, resolve)


def _editor_rewrite(context: _Context, server: str, workspace: Path,
                    inputs: dict[str, str] | None = None) -> Rewrite:
    """Cursor's and VS Code's `${…}` variables (`inputs` only for VS Code)."""
    values = {"workspaceFolder": str(workspace), "workspaceFolderBasename": workspace.name,
              "userHome": str(context.home), "pathSeparator": os.sep, "/": os.sep}

    def resolve(match: re.Match[str]) -> str | None:
        inner = match.group(1)
        if inner in values:
            return escape(values[inner])
        kind, _, argument = inner.partition(":")
        if kind == "env" and is_variable_name(argument):
            return f"${{{argument}}}"
        if kind == "input" and inputs is not None and argument:
            variable = _input_variable(argument)
            about = f" ({inputs[argument]})" if inputs.get(argument) else ""
            context.warn(server, f"${{input:{argument}}}{about} is prompted for by VS Code; "
                                 f"it became ${{{variable}}}: set {variable} in the "
                                 "environment")
            return f"${{{variable}}}"
        context.warn(server, f"{match.group()} cannot be translated; kept as literal text")
        return None

    return lambda text: _rewrite_references(text, _DOLLAR_REFERENCE, resolve)


def _input_variable(input_id: str) -> str:
    name = _NOT_VARIABLE_CHARS.sub("_", input_id).strip("_").upper() or "INPUT"
    return f"_{name}" if name[0].isdigit() else name


def _opencode_rewrite(context: _Context, server: str) -> Rewrite:
    def resolve(match: re.Match[str]) -> str | None:
        kind, argument = match.groups()
        if kind == "env" and is_variable_name(argument):
            return f"${{{argument}}}"
        context.warn(server, f"{match.group()} cannot be translated; kept as literal text")
        return None

    return lambda text: _rewrite_references(text, _OPENCODE_REFERENCE, resolve)


# --- reading files --------------------------------------------------------------------------


def _read_text(path: Path, max_bytes: int) -> str:
    """The file's text, refused past `max_bytes` (read no further than that)."""
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: no such file") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    if len(data) > max_bytes:
        raise ConfigError(f"{path}: larger than {max_bytes} bytes; not read (--max-file-bytes "
                          "sets the limit)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start + 1}, line {line})") from exc


def _read_json(path: Path, *, jsonc: bool, max_bytes: int) -> dict[str, Any]:
    text = _read_text(path, max_bytes)
    if not text.strip():
        return {}
    try:
        document = json.loads(_jsonc_to_json(text, path) if jsonc else text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{path}: nested too deeply to be a config file") from exc
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: the top level must be an object, not {json_type(document)}")
    return document


def _jsonc_to_json(text: str, path: Path) -> str:
    """Comments and trailing commas blanked out (same length, so JSON errors keep their line
    and column)."""
    chars = list(text)
    commas: list[int] = []
    in_string = False
    i = 0
    while i < len(text):
        char = text[i]
        if in_string:
            if char == "\\":
                i += 2
                continue
            in_string = char != '"'
        elif char == '"':
            in_string = True
        elif char == ",":
            commas.append(i)
        elif text.startswith("//", i) or text.startswith("/*", i):
            end = _comment_end(text, i, path)
            chars[i:end] = [c if c == "\n" else " " for c in text[i:end]]
            i = end
            continue
        i += 1
    blanked = "".join(chars)
    for comma in commas:
        after = _WHITESPACE.match(blanked, comma + 1)
        if after is not None and blanked[after.end():after.end() + 1] in ("}", "]"):
            chars[comma] = " "
    return "".join(chars)


def _comment_end(text: str, start: int, path: Path) -> int:
    if text.startswith("//", start):
        end = text.find("\n", start)
        return len(text) if end < 0 else end
    end = text.find("*/", start + 2)
    if end < 0:
        line = text.count("\n", 0, start) + 1
        raise ConfigError(f"{path}: unclosed /* comment starting on line {line}")
    return end + 2


def _object(value: Any, what: str, path: Path) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: {what} must be an object, not {json_type(value)}")
    return value


# --- one reader per tool --------------------------------------------------------------------


def _read_claude(context: _Context) -> None:
    document = _read_json(context.path, jsonc=False, max_bytes=context.max_bytes)
    servers = dict(_object(document.get("mcpServers"), "mcpServers", context.path))
    # ~/.claude.json: servers of the "local" scope live under the project's directory and
    # win over the user's, as in Claude Code.
    for directory, project in _object(document.get("projects"), "projects",
                                      context.path).items():
        if isinstance(project, dict) and _same_directory(directory, context.cwd):
            servers.update(_object(project.get("mcpServers"),
                                   f"projects.{directory}.mcpServers", context.path))
    # Claude Code expands ${VAR} and ${VAR:-default} itself; Claude Desktop does not.
    rewrite = escape if context.desktop else _claude_code_rewrite
    for name, raw in servers.items():
        context.add(name, _common_entry(context, name, raw, rewrite))


def _same_directory(written: str, cwd: Path) -> bool:
    return written == str(cwd) or Path(written).resolve() == cwd.resolve()


def _read_cursor(context: _Context) -> None:
    document = _read_json(context.path, jsonc=True, max_bytes=context.max_bytes)
    workspace = context.workspace(".cursor")
    for name, raw in _object(document.get("mcpServers"), "mcpServers", context.path).items():
        rewrite = _editor_rewrite(context, name, workspace)
        context.add(name, _common_entry(context, name, raw, rewrite))


def _read_vscode(context: _Context) -> None:
    document = _read_json(context.path, jsonc=True, max_bytes=context.max_bytes)
    # settings.json keeps the same object under "mcp".
    if "servers" not in document and isinstance(document.get("mcp"), dict):
        document = document["mcp"]
    inputs = {item["id"]: str(item.get("description", ""))
              for item in document.get("inputs") or []
              if isinstance(item, dict) and isinstance(item.get("id"), str)}
    workspace = context.workspace(".vscode")
    for name, raw in _object(document.get("servers"), "servers", context.path).items():
        rewrite = _editor_rewrite(context, name, workspace, inputs)
        context.add(name, _common_entry(context, name, raw, rewrite))


def _common_entry(context: _Context, name: str, raw: object,
                  rewrite: Rewrite) -> dict[str, Any] | None:
    """An `mcpServers`-style entry (Claude, Cursor, VS Code), which is close to ours."""
    if not isinstance(raw, dict):
        context.warn(name, f"skipped: must be an object, not {json_type(raw)}")
        return None
    kind = _common_type(raw)
    if kind is None:
        context.warn(name, f"skipped: unknown type {raw.get('type')!r}")
        return None
    entry: dict[str, Any] = {"type": kind}
    entry.update({key: _rewrite_all(raw[key], rewrite) for key in _COMMON_KEYS if key in raw})
    # Some tools write "disabled": true (Cline style), others "enabled": false.
    if isinstance(raw.get("disabled"), bool):
        entry["enabled"] = not raw["disabled"]
    if isinstance(raw.get("enabled"), bool):
        entry["enabled"] = raw["enabled"]
    if "envFile" in raw:
        context.warn(name, f"envFile {raw['envFile']!r} is not imported; put its variables "
                           "in the environment or in \"env\"")
    if "oauth" in raw:
        _add_oauth(context, name, entry, _claude_oauth(context, name, raw["oauth"], rewrite))
    _warn_dropped(context, name, raw, {"type", *_COMMON_KEYS, "disabled", "enabled",
                                       "envFile", "oauth"})
    return entry


def _claude_oauth(context: _Context, name: str, written: object,
                  rewrite: Rewrite) -> dict[str, Any]:
    """Claude Code's `oauth` object (clientId, callbackPort, scopes as one string)."""
    if not isinstance(written, dict):
        context.warn(name, f"oauth must be an object, not {json_type(written)}; not imported")
        return {}
    table: dict[str, Any] = {}
    if "clientId" in written:
        table["client_id"] = _rewrite_all(written["clientId"], rewrite)
    if "callbackPort" in written:
        table["callback_port"] = written["callbackPort"]
    scopes = written.get("scopes")
    if isinstance(scopes, str):
        table["scopes"] = scopes.split()
    elif scopes is not None:
        table["scopes"] = scopes  # our check names what is wrong with it
    if "authServerMetadataUrl" in written:
        context.warn(name, "oauth.authServerMetadataUrl is not imported: mcpkit discovers "
                           "the authorization server from the server's own metadata")
    dropped = sorted(set(written) - {"clientId", "callbackPort", "scopes",
                                     "authServerMetadataUrl"})
    if dropped:
        context.warn(name, f"oauth keys not imported (no mcpkit equivalent): "
                           f"{', '.join(dropped)}")
    return table


def _has_token(entry: dict[str, Any]) -> bool:
    headers = entry.get("headers")
    return bool(entry.get("bearer_token_env_var")) or (
        isinstance(headers, dict) and any(str(k).lower() == "authorization" for k in headers))


def _add_oauth(context: _Context, name: str, entry: dict[str, Any],
               table: dict[str, Any]) -> None:
    """Put the login settings in `entry`, unless it has a static token (mcpkit takes one)."""
    if not table:
        return
    if _has_token(entry):
        context.warn(name, "has a static token and OAuth settings; the token is imported, "
                           f"the OAuth settings ({', '.join(sorted(table))}) are not")
        return
    if entry.get("type") == "stdio":
        context.warn(name, "OAuth settings of a command (stdio) server are not imported")
        return
    entry["oauth"] = table


def _common_type(raw: dict[str, Any]) -> str | None:
    written = raw.get("type")
    if written is None:
        if "command" in raw:
            return "stdio"
        url = raw.get("url")
        return _remote_type(url) if isinstance(url, str) else "http"
    return _TYPES.get(written) if isinstance(written, str) else None


def _remote_type(url: str) -> str:
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:  # not a URL (e.g. "http://[::1"): our entry check skips it, saying why
        return "http"
    return "ws" if scheme in ("ws", "wss") else "http"


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _warn_dropped(context: _Context, name: str, raw: dict[str, Any], used: set[str]) -> None:
    dropped = [key for key in raw if key not in used]
    if dropped:
        context.warn(name, f"not imported (no mcpkit equivalent): {', '.join(dropped)}")


def _read_codex(context: _Context) -> None:
    try:
        document = tomllib.loads(_read_text(context.path, context.max_bytes))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{context.path}: invalid TOML: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{context.path}: nested too deeply to be a config file") from exc
    shared = _codex_shared_oauth(context, document)
    for name, raw in _object(document.get("mcp_servers"), "mcp_servers",
                             context.path).items():
        context.add(name, _codex_entry(context, name, raw, shared))


def _codex_shared_oauth(context: _Context, document: dict[str, Any]) -> dict[str, Any]:
    """The top-level keys that apply to every server's login."""
    shared: dict[str, Any] = {}
    if "mcp_oauth_callback_port" in document:
        shared["callback_port"] = document["mcp_oauth_callback_port"]
    if "mcp_oauth_credentials_store" in document:
        shared["store"] = document["mcp_oauth_credentials_store"]
    if "mcp_oauth_callback_url" in document:
        context.result.warnings.append(
            "mcp_oauth_callback_url is not imported: mcpkit's redirect is the loopback "
            "http://127.0.0.1:PORT/callback (callback_port)")
    return shared


def _codex_entry(context: _Context, name: str, raw: object,
                 shared: dict[str, Any] | None = None) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        context.warn(name, f"skipped: must be a table, not {json_type(raw)}")
        return None
    # Codex has no variable syntax in these values: every `$` is literal.
    entry: dict[str, Any] = {"type": "stdio" if "command" in raw else "http"}
    entry.update({key: _rewrite_all(raw[key], escape) for key in _CODEX_KEYS if key in raw})
    if "env_vars" in raw:
        entry["env_vars"] = _codex_env_vars(context, name, raw["env_vars"])
    milliseconds = raw.get("startup_timeout_ms")
    if "startup_timeout_sec" not in raw and _is_number(milliseconds):
        entry["startup_timeout_sec"] = milliseconds / 1000
    headers = _codex_headers(context, name, raw)
    if headers:
        entry["headers"] = headers
    oauth = _codex_oauth(context, name, raw)
    if entry["type"] != "stdio" and (oauth or not _has_token(entry)):
        oauth = {**(shared or {}), **oauth}  # the top-level keys apply to every URL server
    _add_oauth(context, name, entry, oauth)
    _warn_dropped(context, name, raw, {*_CODEX_KEYS, "env_vars", "startup_timeout_ms",
                                       "http_headers", "env_http_headers", "scopes", "oauth",
                                       "oauth_resource"})
    return entry


def _codex_oauth(context: _Context, name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """`scopes` and the `[mcp_servers.NAME.oauth]` table (client_id, callback_port)."""
    table: dict[str, Any] = {}
    if "scopes" in raw:
        table["scopes"] = _rewrite_all(raw["scopes"], escape)
    written = raw.get("oauth")
    if written is not None and not isinstance(written, dict):
        context.warn(name, f"oauth must be a table, not {json_type(written)}; not imported")
        written = None
    for key in ("client_id", "callback_port"):
        if written and key in written:
            table[key] = _rewrite_all(written[key], escape)
    dropped = sorted(set(written or {}) - {"client_id", "callback_port"})
    if dropped:
        context.warn(name, f"oauth keys not imported (no mcpkit equivalent): "
                           f"{', '.join(dropped)}")
    if "oauth_resource" in raw:
        context.warn(name, "oauth_resource is not imported: mcpkit asks for the resource "
                           "the server's metadata names (RFC 8707)")
    return table


def _codex_env_vars(context: _Context, name: str, written: object) -> object:
    """Names, or `{name, source}` tables; a "remote" source has no meaning here."""
    if not isinstance(written, list):
        return written  # our check reports the type
    names: list[object] = []
    for item in written:
        if isinstance(item, dict):
            if item.get("source", "local") != "local":
                context.warn(name, f"env_vars {item.get('name')!r} comes from a "
                                   f"{item.get('source')} environment; not imported")
                continue
            item = item.get("name")
        names.append(item)
    return names


def _codex_headers(context: _Context, name: str, raw: dict[str, Any]) -> dict[str, Any]:
    headers: dict[str, Any] = dict(_rewrite_all(raw.get("http_headers") or {}, escape))
    from_env = raw.get("env_http_headers") or {}
    if not isinstance(from_env, dict):
        context.warn(name, "env_http_headers is not a table; not imported")
        return headers
    for header, variable in from_env.items():
        if isinstance(variable, str) and is_variable_name(variable):
            headers[header] = f"${{{variable}}}"
        else:
            context.warn(name, f"env_http_headers {header!r}: {variable!r} is not a variable "
                               "name; not imported")
    return headers


def _read_opencode(context: _Context) -> None:
    document = _read_json(context.path, jsonc=True, max_bytes=context.max_bytes)
    servers = _object(document.get("mcp"), "mcp", context.path)
    # Newer files nest the servers one level down, under "mcp.servers".
    nested = servers.get("servers")
    if isinstance(nested, dict) and not {"type", "command", "url"} & set(nested):
        servers = nested
    for name, raw in servers.items():
        context.add(name, _opencode_entry(context, name, raw))


def _opencode_entry(context: _Context, name: str, raw: object) -> dict[str, Any] | None:
    if not isinstance(raw, dict):
        context.warn(name, f"skipped: must be an object, not {json_type(raw)}")
        return None
    kind = raw.get("type") or ("local" if "command" in raw else "remote")
    rewrite = _opencode_rewrite(context, name)
    if kind == "local":
        entry = _opencode_local(context, name, raw, rewrite)
        used = {"type", "command", "environment", "enabled", "timeout"}
    elif kind == "remote":
        url = raw.get("url")
        entry = {"type": _remote_type(url) if isinstance(url, str) else "http",
                 **{key: _rewrite_all(raw[key], rewrite) for key in ("url", "headers")
                    if key in raw}}
        used = {"type", "url", "headers", "enabled", "timeout"}
    else:
        context.warn(name, f"skipped: unknown type {kind!r} (OpenCode has local and remote)")
        return None
    if entry is None:
        return None
    if isinstance(raw.get("enabled"), bool):
        entry["enabled"] = raw["enabled"]
    # OpenCode's timeout (ms) bounds fetching the server's tools, which is part of startup.
    timeout = raw.get("timeout")
    if _is_number(timeout):
        entry["startup_timeout_sec"] = timeout / 1000
    _warn_dropped(context, name, raw, used)
    return entry


def _opencode_local(context: _Context, name: str, raw: dict[str, Any],
                    rewrite: Rewrite) -> dict[str, Any] | None:
    command = raw.get("command")
    if isinstance(command, str):
        command = [command]
    if not (isinstance(command, list) and command
            and all(isinstance(part, str) for part in command)):
        context.warn(name, "skipped: \"command\" must be a non-empty list of strings")
        return None
    entry: dict[str, Any] = {"type": "stdio", "command": rewrite(command[0])}
    if len(command) > 1:
        entry["args"] = [rewrite(part) for part in command[1:]]
    if "environment" in raw:
        entry["env"] = _rewrite_all(raw["environment"], rewrite)
    return entry
