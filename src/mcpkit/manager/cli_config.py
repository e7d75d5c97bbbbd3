"""The config files as `mcpkit mcp` sees them: the three scopes, entries as written, and errors
that carry a hint and an exit code.

Entries are read as written (`configfile.raw_servers`, checked with `check_raw_entry`) so
that `list` and `get` show `${TOKEN}` rather than the token, and so that one entry with an
unset variable does not hide the others. Only the servers a command starts are interpolated
(`resolve`), each on its own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcpkit.errors import UsageError
from mcpkit.manager import configfile
from mcpkit.manager.config import ConfigError, ServerConfig, from_entry
from mcpkit.manager.interpolate import interpolate

SCOPES = configfile.SCOPES
"""user, project, local: later ones win (as in Claude Code); see `configfile`."""
EXIT_OK = 0
EXIT_FAILED = 1
"""The operation failed: a server did not start, a tool returned an error…"""
EXIT_USAGE = 2
"""The command line or a config file is wrong."""


class CliError(UsageError):
    """An expected failure: printed as `mcpkit: error: MESSAGE` and `hint: HINT`."""

    def __init__(self, message: str, *, hint: str | None = None,
                 code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


def expected_exit_code(exc: Exception) -> int | None:
    """The exit code of an error that is not a bug, None for one that is."""
    from mcpkit.manager.errors import ManagerError
    from mcpkit.protocol.errors import McpError

    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, ManagerError | McpError | OSError | TimeoutError):
        return EXIT_FAILED
    if "mcpkit.transports.client.base" in sys.modules:  # loaded by whatever raised it
        from mcpkit.transports.client.base import TransportError

        if isinstance(exc, TransportError):
            return EXIT_FAILED
    return None


@dataclass
class Entry:
    """One server as written in one file."""

    name: str
    scope: str
    path: Path
    raw: dict[str, Any]
    config: ServerConfig | None
    """Checked as written (values not interpolated); None when the entry is invalid."""
    error: str | None
    overrides: Path | None = None
    """The file of an earlier scope whose entry of the same name this one replaces."""

    @property
    def enabled(self) -> bool:
        return self.raw.get("enabled") is not False


class ConfigFiles:
    """The user, project and local files of a working directory."""

    def __init__(self, cwd: Path | None = None,
                 environ: Mapping[str, str] | None = None,
                 max_file_bytes: int = configfile.MAX_CONFIG_FILE_BYTES) -> None:
        self.cwd = Path.cwd() if cwd is None else cwd
        self.max_file_bytes = max_file_bytes
        self.environ = os.environ if environ is None else environ
        self.user = configfile.config_in(configfile.user_config_path(self.environ).parent)
        self.project = configfile.project_config_path(self.cwd)
        if self.user is not None and self.project is not None and _same(self.user,
                                                                        self.project):
            self.project = None
        local = configfile.local_config_path(self.cwd)
        self.local = local if local.is_file() else None
        self._raw: dict[str, dict[str, dict[str, Any]]] = {}

    def path(self, scope: str) -> Path | None:
        """The existing file of a scope, or None."""
        return {"user": self.user, "project": self.project, "local": self.local}[scope]

    def write_path(self, scope: str) -> Path:
        """Where a scope's entries are written: its file, or where a new one goes."""
        existing = self.path(scope)
        if existing is not None:
            return existing
        if scope == "user":
            return configfile.user_config_path(self.environ)
        if scope == "local":
            return configfile.local_config_path(self.cwd)
        return configfile.default_project_path(self.cwd)

    def raw(self, scope: str) -> dict[str, dict[str, Any]]:
        if scope not in self._raw:
            path = self.path(scope)
            self._raw[scope] = {} if path is None else \
                configfile.raw_servers(path, max_bytes=self.max_file_bytes)
        return self._raw[scope]

    def entries(self) -> dict[str, Entry]:
        """Every server, user entries first, a project entry replacing the user's, a local
        one replacing both."""
        merged: dict[str, Entry] = {}
        for scope in SCOPES:
            path = self.path(scope)
            if path is None:
                continue
            for name, raw in self.raw(scope).items():
                entry = _entry(name, scope, path, raw)
                if name in merged:
                    entry.overrides = merged[name].path
                merged[name] = entry
        return merged

    def entry(self, name: str) -> Entry:
        entry = self.entries().get(name)
        if entry is None:
            raise CliError(f"no MCP server named {name!r}", hint=self.known_hint())
        return entry

    def known_hint(self, scope: str | None = None) -> str:
        names = list(self.raw(scope)) if scope else list(self.entries())
        if names:
            return f"known servers: {', '.join(names)}"
        where = f" in the {scope} config" if scope else ""
        return (f"no servers are configured{where}; add one with `mcpkit mcp add NAME URL` "
                "or `mcpkit mcp add NAME -- COMMAND ARGS...`")

    def locate(self, name: str, scope: str | None) -> tuple[str, Path]:
        """The file to edit for `name`: the one whose entry is in effect (local, project, then
        user), unless `scope` says which."""
        for candidate in [scope] if scope else list(reversed(SCOPES)):
            path = self.path(candidate)
            if path is not None and name in self.raw(candidate):
                return candidate, path
        where = f" in the {scope} config ({self.write_path(scope)})" if scope else ""
        raise CliError(f"no MCP server named {name!r}{where}", hint=self.known_hint(scope))

    def shadowing(self, name: str, scope: str) -> list[str]:
        """Notes on the entries of `name` in the other scopes: which wins over which."""
        notes = []
        for other in SCOPES:
            path = self.path(other)
            if other == scope or path is None or name not in self.raw(other):
                continue
            later = SCOPES.index(other) > SCOPES.index(scope)
            effect = "it overrides this one" if later else "this one overrides it"
            notes.append(f"the {other} config also has {name} ({path}); {effect}")
        return notes

    def resolve(self, entry: Entry) -> ServerConfig:
        """The entry with its variables expanded and checked: what a client is built from."""
        if entry.error is not None:
            raise ConfigError(entry.error)
        where = str(entry.path)
        value = interpolate(entry.raw, self.environ, f"{where}: server {entry.name!r}")
        config = from_entry(entry.name, value, where)
        config.scope = entry.scope
        return config


def _entry(name: str, scope: str, path: Path, raw: dict[str, Any]) -> Entry:
    try:
        config = configfile.check_raw_entry(name, raw, str(path))
    except ConfigError as exc:
        return Entry(name, scope, path, raw, None, str(exc))
    config.scope = scope
    return Entry(name, scope, path, raw, config, None)


def _same(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False
