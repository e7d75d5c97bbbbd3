"""One server entry of a config file (`mcpServers.<name>`), checked.

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "."],
                  "env": {"DEBUG": "1"}, "env_vars": ["GITHUB_TOKEN"]},
        "docs":  {"type": "http", "url": "https://example.com/mcp",
                  "bearer_token_env_var": "DOCS_TOKEN", "tool_timeout_sec": 120},
        "linear": {"url": "https://mcp.linear.app/mcp",
                   "oauth": {"client_id": "my-app", "scopes": ["read"]}}}}

`type` is `stdio`, `http`, `sse` or `ws`; when absent it follows from `command` (stdio) or
from `url` (`ws(s)://` → ws, otherwise http). Unknown keys are refused, so a typo is an
error, not a silently ignored setting. `oauth` (URL servers) is checked by `oauth_settings`;
a server has one kind of credentials: `oauth`, or a static token (`bearer_token_env_var`, an
`Authorization` header), not both. String values are interpolated (`${VAR}`,
`${VAR:-default}`, `$$`) by `interpolate.py` before they reach `from_entry`.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mcpkit.manager.config_errors import ConfigError, json_type
from mcpkit.manager.oauth_settings import OAuthSettings

__all__ = ["ConfigError", "ServerConfig", "from_entry", "json_type"]

TRANSPORTS = ("stdio", "http", "sse", "ws")
CLIENT_KINDS = {"stdio": "stdio", "http": "http", "sse": "sse", "ws": "websocket"}
"""Config `type` → `mcpkit.Client(transport=...)`."""
DEFAULT_STARTUP_TIMEOUT_S = 30.0
DEFAULT_TOOL_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 3600.0
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")
MAX_NAME_LENGTH = 64

KNOWN_KEYS = frozenset({
    "type", "command", "args", "env", "env_vars", "cwd", "url", "headers",
    "bearer_token_env_var", "enabled", "required", "startup_timeout_sec", "tool_timeout_sec",
    "enabled_tools", "disabled_tools", "oauth",
})


@dataclass
class ServerConfig:
    name: str
    type: str
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    env_vars: list[str] = field(default_factory=list)
    """Names of variables passed through from this process's environment (stdio)."""
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    bearer_token_env_var: str | None = None
    oauth: OAuthSettings | None = None
    """How to log in (`mcpkit mcp login`): the entry's `oauth` table, checked."""
    enabled: bool = True
    required: bool = False
    """A required server that fails to start fails the whole manager."""
    startup_timeout_sec: float = DEFAULT_STARTUP_TIMEOUT_S
    tool_timeout_sec: float = DEFAULT_TOOL_TIMEOUT_S
    enabled_tools: list[str] | None = None
    """When set, only these tools (names or fnmatch patterns) are listed and callable."""
    disabled_tools: list[str] = field(default_factory=list)
    """Never listed or callable (names or fnmatch patterns); wins over `enabled_tools`."""
    scope: str | None = None
    """Where the entry came from ("user", "project", a path…): for display only."""

    # --- what a client needs -------------------------------------------------------------

    @property
    def client_kind(self) -> str:
        return CLIENT_KINDS[self.type]

    def target(self) -> str | list[str]:
        """What to hand `mcpkit.Client`: the URL, or the command line."""
        if self.type == "stdio":
            assert self.command is not None
            return [self.command, *self.args]
        assert self.url is not None
        return self.url

    def child_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        """What a stdio child gets on top of the minimal environment: `env_vars` taken from
        `environ` (this process's by default; missing ones skipped), then `env`."""
        source = os.environ if environ is None else environ
        passed = {name: source[name] for name in self.env_vars if name in source}
        return {**passed, **self.env}

    def bearer_token(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The token named by `bearer_token_env_var`; ConfigError when it is unset."""
        if self.bearer_token_env_var is None:
            return None
        source = os.environ if environ is None else environ
        token = source.get(self.bearer_token_env_var)
        if not token:
            raise ConfigError(f"server {self.name!r}: bearer_token_env_var "
                              f"{self.bearer_token_env_var} is not set")
        return token

    @property
    def static_credentials(self) -> bool:
        """A token given as it is (`bearer_token_env_var` or an `Authorization` header): a
        401 then means that token was refused, not that a login is needed."""
        return self.bearer_token_env_var is not None or any(
            key.lower() == "authorization" for key in self.headers)

    def allows_tool(self, tool: str) -> bool:
        """The allow/deny lists, applied to listing and calling alike."""
        if any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.disabled_tools):
            return False
        if self.enabled_tools is None:
            return True
        return any(fnmatch.fnmatchcase(tool, pattern) for pattern in self.enabled_tools)

    def describe_target(self) -> str:
        """One line for tables: the URL, or the command line."""
        if self.type == "stdio":
            return " ".join([self.command or "", *self.args]).strip()
        return self.url or ""

    # --- to and from the file ------------------------------------------------------------

    def to_entry(self) -> dict[str, Any]:
        """The `mcpServers.<name>` value, defaults left out (what `add` writes)."""
        entry: dict[str, Any] = {"type": self.type}
        defaults = ServerConfig(self.name, self.type)
        for key in sorted(KNOWN_KEYS - {"type"}):
            value = getattr(self, key)
            if value != getattr(defaults, key):
                entry[key] = value.to_table() if key == "oauth" else value
        return entry


def from_entry(name: str, entry: object, where: str = "") -> ServerConfig:
    """Check one `mcpServers` entry (already interpolated); ConfigError says what is wrong."""
    at = f"{where}: " if where else ""
    prefix = f"{at}server {name!r}"
    check_name(name, prefix)
    if not isinstance(entry, dict):
        raise ConfigError(f"{prefix}: must be an object, not {json_type(entry)}")
    unknown = sorted(set(entry) - KNOWN_KEYS)
    if unknown:
        raise ConfigError(f"{prefix}: unknown key(s) {', '.join(unknown)}; known keys: "
                          f"{', '.join(sorted(KNOWN_KEYS))}")
    reader = _Reader(entry, prefix)
    kind = _transport_of(entry, prefix)
    config = ServerConfig(
        name=name, type=kind,
        command=reader.string("command"), args=reader.strings("args") or [],
        env=reader.string_map("env"), env_vars=reader.strings("env_vars") or [],
        cwd=reader.string("cwd"), url=reader.string("url"),
        headers=reader.string_map("headers"),
        bearer_token_env_var=reader.string("bearer_token_env_var"),
        oauth=_oauth_of(entry, prefix),
        enabled=reader.boolean("enabled", True), required=reader.boolean("required", False),
        startup_timeout_sec=reader.seconds("startup_timeout_sec", DEFAULT_STARTUP_TIMEOUT_S),
        tool_timeout_sec=reader.seconds("tool_timeout_sec", DEFAULT_TOOL_TIMEOUT_S),
        enabled_tools=reader.strings("enabled_tools"),
        disabled_tools=reader.strings("disabled_tools") or [],
    )
    _check_target(config, prefix)
    return config


def _oauth_of(entry: dict[str, Any], prefix: str) -> OAuthSettings | None:
    if "oauth" not in entry:
        return None
    return OAuthSettings.from_table(entry["oauth"], prefix)


def check_name(name: str, prefix: str) -> None:
    if not name or len(name) > MAX_NAME_LENGTH or not set(name) <= NAME_CHARS:
        raise ConfigError(f"{prefix}: a server name is 1-{MAX_NAME_LENGTH} characters of "
                          "letters, digits, '_', '-' and '.'")


def _transport_of(entry: dict[str, Any], prefix: str) -> str:
    kind = entry.get("type")
    if kind is None:
        if "command" in entry:
            return "stdio"
        url = entry.get("url")
        if isinstance(url, str) and _scheme(url, prefix) in ("ws", "wss"):
            return "ws"
        if "url" in entry:
            return "http"
        raise ConfigError(f"{prefix}: needs a \"command\" (stdio) or a \"url\"")
    aliases = {"streamable-http": "http", "streamable_http": "http", "streamableHttp": "http",
               "websocket": "ws"}
    kind = aliases.get(kind, kind) if isinstance(kind, str) else kind
    if kind not in TRANSPORTS:
        raise ConfigError(f"{prefix}: unknown type {entry.get('type')!r}; use one of "
                          f"{', '.join(TRANSPORTS)}")
    return str(kind)


def _check_target(config: ServerConfig, prefix: str) -> None:
    if config.type == "stdio":
        if not config.command:
            raise ConfigError(f"{prefix}: a stdio server needs a \"command\"")
        if config.url is not None:
            raise ConfigError(f"{prefix}: a stdio server has no \"url\"")
        if config.oauth is not None:
            raise ConfigError(f"{prefix}: \"oauth\" applies to URL servers; a stdio server "
                              "gets its credentials through \"env\"")
        return
    if config.oauth is not None and config.static_credentials:
        given = ("bearer_token_env_var" if config.bearer_token_env_var
                 else "an Authorization header")
        raise ConfigError(f"{prefix}: \"oauth\" and {given} both give credentials; keep one "
                          "(oauth logs in with `mcpkit mcp login`, a token is sent as it is)")
    if config.command is not None:
        raise ConfigError(f"{prefix}: a {config.type} server has a \"url\", not a \"command\"")
    if not config.url:
        raise ConfigError(f"{prefix}: a {config.type} server needs a \"url\"")
    scheme = _scheme(config.url, prefix)
    wanted = ("ws", "wss") if config.type == "ws" else ("http", "https")
    if scheme not in wanted:
        raise ConfigError(f"{prefix}: a {config.type} url starts with "
                          f"{' or '.join(s + '://' for s in wanted)}, not {config.url!r}")


def _scheme(url: str, prefix: str) -> str:
    """The lower-case scheme of `url`; a URL urlsplit cannot split (e.g. "http://[::1/mcp",
    an unclosed IPv6 bracket) is a ConfigError, urlsplit's ValueError its cause."""
    try:
        return urlsplit(url).scheme.lower()
    except ValueError as exc:
        raise ConfigError(f"{prefix}: {url!r} is not a valid URL: {exc}") from exc


class _Reader:
    """Typed reads of one entry's keys, each failure naming the key."""

    def __init__(self, entry: dict[str, Any], prefix: str) -> None:
        self.entry = entry
        self.prefix = prefix

    def _fail(self, key: str, wanted: str) -> ConfigError:
        return ConfigError(f"{self.prefix}: \"{key}\" must be {wanted}, not "
                           f"{json_type(self.entry[key])}")

    def string(self, key: str) -> str | None:
        value = self.entry.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self._fail(key, "a string")

    def strings(self, key: str) -> list[str] | None:
        value = self.entry.get(key)
        if value is None:
            return None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return list(value)
        raise self._fail(key, "a list of strings")

    def string_map(self, key: str) -> dict[str, str]:
        value = self.entry.get(key)
        if value is None:
            return {}
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return dict(value)
        raise self._fail(key, "an object of strings")

    def boolean(self, key: str, default: bool) -> bool:
        value = self.entry.get(key, default)
        if isinstance(value, bool):
            return value
        raise self._fail(key, "true or false")

    def seconds(self, key: str, default: float) -> float:
        value = self.entry.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self._fail(key, "a number of seconds")
        if not 0 < value <= MAX_TIMEOUT_S:
            raise ConfigError(f"{self.prefix}: \"{key}\" must be between 0 and "
                              f"{MAX_TIMEOUT_S:g} seconds, not {value}")
        return float(value)
