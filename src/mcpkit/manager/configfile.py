"""Config files: where they are, how they are read and merged, and how the CLI edits them.

Three scopes, each one file, later ones winning (the scopes of Claude Code):

    user     $XDG_CONFIG_HOME/mcpkit/mcp.json   (XDG_CONFIG_HOME unset: ~/.config/mcpkit/mcp.json)
             yours, in every project
    project  .mcpkit/mcp.json in the working directory or the nearest parent that has one:
             the project's, shared with it (checked in)
    local    .mcpkit/mcp.local.json next to it: yours, in this project only (a new one is
             listed in .mcpkit/.gitignore so that it is not checked in by mistake)

Either may be `mcp.toml` instead (both in one directory is an error: which one wins would be
a guess). A project entry replaces the user entry of the same name as a whole; fields are
not merged, so a project can rely on exactly what it wrote.

    JSON  {"mcpServers": {"docs": {"url": "https://example.com/mcp"}}, "other": "kept"}
    TOML  [mcp_servers.docs]                   (`[mcpServers.docs]` is read too)
          url = "https://example.com/mcp"

A missing `mcpServers` (or an empty file) means no servers. Duplicate keys anywhere in a JSON
file are refused, not resolved last-wins, since a server that silently vanishes is worse than
an error. Each entry's strings are interpolated (`interpolate.py`) and then checked by
`config.from_entry`. An entry written `"enabled": false` is not started, so an unset
variable in it is left as written instead of failing the whole file.

Editing (`write_server`, `remove_server`, `set_enabled`) works on the raw file, without
interpolation, so `${TOKEN}` stays `${TOKEN}`; other top-level keys, other servers and key
order are kept. Writes are atomic (a temporary file in the same directory, then
`os.replace`); a new file is created with mode 0600 because entries may hold secrets, an
existing one keeps its mode. TOML files are read but not edited: without a TOML writer
(stdlib has none) their comments and layout could not be kept.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpkit.manager.config import ConfigError, ServerConfig, from_entry, json_type
from mcpkit.manager.interpolate import interpolate

FILE_NAMES = ("mcp.json", "mcp.toml")
LOCAL_FILE_NAME = "mcp.local.json"
PROJECT_DIR = ".mcpkit"
SCOPES = ("user", "project", "local")
"""In the order they apply: an entry of a later scope replaces one of the same name."""
SERVERS_KEY = "mcpServers"
TOML_SERVERS_KEYS = ("mcp_servers", "mcpServers")
NEW_FILE_MODE = 0o600
MAX_CONFIG_FILE_BYTES = 16 * 1024 * 1024
"""A config file larger than this is refused (`max_bytes` of the readers sets another)."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://")


# --- where the files are ------------------------------------------------------------------


def user_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The user file to write: `$XDG_CONFIG_HOME/mcpkit/mcp.json`, else under ~/.config."""
    env = os.environ if environ is None else environ
    xdg = env.get("XDG_CONFIG_HOME", "")
    # The XDG spec says to ignore a relative XDG_CONFIG_HOME.
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "mcpkit" / "mcp.json"
    home = env.get("HOME")
    base = Path(home) if home else Path.home()
    return base / ".config" / "mcpkit" / "mcp.json"


def config_in(directory: Path) -> Path | None:
    """`directory/mcp.json` or `directory/mcp.toml`, whichever exists; None for neither."""
    found = [directory / name for name in FILE_NAMES if (directory / name).is_file()]
    if len(found) > 1:
        raise ConfigError(f"both {found[0]} and {found[1]} exist; keep one")
    return found[0] if found else None


def project_config_path(cwd: Path) -> Path | None:
    """The nearest `.mcpkit/mcp.json` (or `.toml`) in `cwd` or a parent; None when none."""
    start = cwd.resolve()
    for directory in (start, *start.parents):
        found = config_in(directory / PROJECT_DIR)
        if found is not None:
            return found
    return None


def default_project_path(cwd: Path) -> Path:
    """Where a new project file goes: `cwd/.mcpkit/mcp.json`."""
    return cwd / PROJECT_DIR / "mcp.json"


def local_config_path(cwd: Path) -> Path:
    """The local file (existing or not): `mcp.local.json` in the nearest `.mcpkit` directory
    that has a project or local file, else in `cwd/.mcpkit`."""
    start = cwd.resolve()
    for directory in (start, *start.parents):
        folder = directory / PROJECT_DIR
        if (folder / LOCAL_FILE_NAME).is_file() or config_in(folder) is not None:
            return folder / LOCAL_FILE_NAME
    return cwd / PROJECT_DIR / LOCAL_FILE_NAME


# --- reading ------------------------------------------------------------------------------


def read_servers(path: Path, environ: Mapping[str, str], scope: str, *,
                 max_bytes: int = MAX_CONFIG_FILE_BYTES) -> dict[str, ServerConfig]:
    """The checked, interpolated servers of one file, each with `.scope = scope`."""
    servers: dict[str, ServerConfig] = {}
    for name, entry in _servers_of(_read_document(path, max_bytes), path).items():
        config = _server_from_raw(name, entry, environ, path)
        config.scope = scope
        servers[name] = config
    return servers


def check_raw_entry(name: str, entry: object, where: str = "") -> ServerConfig:
    """Structural check of an entry as written (before interpolation), e.g. before writing.

    `${…}` must be well formed; everything `from_entry` checks is checked, except that a url
    holding a variable cannot have its scheme checked until the variable has a value."""
    interpolate(entry, _AnyValue(), _server_where(where, name))
    return _check_structure(name, entry, where)


@dataclass
class LoadedConfig:
    servers: dict[str, ServerConfig] = field(default_factory=dict)
    """User entries in file order, then the project's new names; project entries win."""
    paths: dict[str, Path] = field(default_factory=dict)
    """Scope name ("user", "project", "local") → the file read for it."""

    def enabled(self) -> list[ServerConfig]:
        return [server for server in self.servers.values() if server.enabled]

    def get(self, name: str) -> ServerConfig:
        server = self.servers.get(name)
        if server is not None:
            return server
        if self.servers:
            hint = f"known servers: {', '.join(self.servers)}"
        elif self.paths:
            hint = f"no servers in {', '.join(str(p) for p in self.paths.values())}"
        else:
            hint = "no config file was found"
        raise ConfigError(f"no server named {name!r}; {hint}")


def load(*, cwd: Path | None = None, environ: Mapping[str, str] | None = None,
         user_path: Path | None = None, project_path: Path | None = None,
         local_path: Path | None = None,
         max_file_bytes: int = MAX_CONFIG_FILE_BYTES) -> LoadedConfig:
    """The user file, then the project file over it, then the local one (per server name).

    Explicit paths replace the searched-for ones (an explicit project file has its local
    file beside it); a path that does not exist contributes nothing."""
    env = os.environ if environ is None else environ
    if user_path is None:
        user_path = config_in(user_config_path(env).parent)
    if project_path is None:
        project_path = project_config_path(Path.cwd() if cwd is None else cwd)
    if local_path is None:
        local_path = (project_path.parent / LOCAL_FILE_NAME if project_path is not None else
                      local_config_path(Path.cwd() if cwd is None else cwd))
    loaded = LoadedConfig()
    for scope, path in (("user", user_path), ("project", project_path), ("local", local_path)):
        if path is None or not path.exists():
            continue
        if scope != "user" and "user" in loaded.paths and _same_file(path, loaded.paths["user"]):
            continue
        loaded.paths[scope] = path
        loaded.servers.update(read_servers(path, env, scope, max_bytes=max_file_bytes))
    return loaded


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def _server_where(where: str, name: str) -> str:
    return f"{where}: server {name!r}" if where else f"server {name!r}"


def _server_from_raw(name: str, entry: object, environ: Mapping[str, str],
                     path: Path) -> ServerConfig:
    where = str(path)
    disabled = isinstance(entry, dict) and entry.get("enabled") is False
    value = interpolate(entry, environ, _server_where(where, name), keep_unset=disabled)
    if disabled:
        # Unset variables were kept as `${VAR}`: a url may not have its scheme yet.
        return _check_structure(name, value, where)
    return from_entry(name, value, where)


def _check_structure(name: str, entry: object, where: str) -> ServerConfig:
    url = entry.get("url") if isinstance(entry, dict) else None
    if not (isinstance(entry, dict) and isinstance(url, str) and "$" in url):
        return from_entry(name, entry, where)
    # The url is only known once its variables are: check its scheme when it is written out,
    # the rest against a stand-in of the declared type; then put the real url back.
    written = _SCHEME.match(url)
    if written is not None:
        stand_in = f"{written.group()}placeholder"
    else:
        stand_in = "ws://placeholder" if entry.get("type") in ("ws", "websocket") else \
            "http://placeholder"
    config = from_entry(name, {**entry, "url": stand_in}, where)
    config.url = url
    return config


class _AnyValue(Mapping[str, str]):
    """An environment in which every variable is set: interpolating with it checks syntax."""

    def __getitem__(self, key: str) -> str:
        return "set"

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _read_document(path: Path, max_bytes: int = MAX_CONFIG_FILE_BYTES) -> dict[str, Any]:
    """The whole file as an object; {} for an empty or missing file. A file over
    `max_bytes` is refused (read no further)."""
    try:
        with path.open("rb") as file:
            data = file.read(max_bytes + 1)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    if len(data) > max_bytes:
        raise ConfigError(f"{path}: larger than {max_bytes} bytes; not a config file mcpkit "
                          "reads")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    if not text.strip():
        return {}
    document = _parse_toml(text, path) if _is_toml(path) else _parse_json(text, path)
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: the top level must be an object, not "
                          f"{json_type(document)}")
    return document


def _is_toml(path: Path) -> bool:
    return path.suffix.lower() == ".toml"


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{path}: nested too deeply to be a config file") from exc


def _parse_json(text: str, path: Path) -> Any:
    try:
        document = json.loads(text, object_pairs_hook=_KeyedPairs)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: "
                          f"{exc.msg}") from exc
    except RecursionError as exc:
        raise ConfigError(f"{path}: nested too deeply to be a config file") from exc
    try:
        return _plain(document, path, ())
    except RecursionError as exc:
        raise ConfigError(f"{path}: nested too deeply to be a config file") from exc


class _KeyedPairs(list[tuple[str, Any]]):
    """An object as parsed, pairs in order, duplicates kept: `_plain` judges them knowing
    where in the document they are."""


def _plain(value: Any, path: Path, at: tuple[str, ...]) -> Any:
    if isinstance(value, _KeyedPairs):
        result: dict[str, Any] = {}
        for key, item in value:
            if key in result:
                raise _duplicate(path, at, key)
            result[key] = _plain(item, path, (*at, key))
        return result
    if isinstance(value, list):
        return [_plain(item, path, at) for item in value]
    return value


def _duplicate(path: Path, at: tuple[str, ...], key: str) -> ConfigError:
    if at == (SERVERS_KEY,):
        return ConfigError(f"{path}: duplicate server name {key!r}")
    place = f" in {'.'.join(at)}" if at else " at the top level"
    return ConfigError(f"{path}: duplicate key {key!r}{place}")


def _servers_of(document: dict[str, Any], path: Path) -> dict[str, Any]:
    keys = TOML_SERVERS_KEYS if _is_toml(path) else (SERVERS_KEY,)
    present = [key for key in keys if key in document]
    if len(present) > 1:
        raise ConfigError(f"{path}: both {present[0]} and {present[1]} are set; keep one")
    if not present:
        return {}
    servers = document[present[0]]
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: \"{present[0]}\" must be an object, not "
                          f"{json_type(servers)}")
    return servers


# --- editing ------------------------------------------------------------------------------


def raw_servers(path: Path, *, max_bytes: int = MAX_CONFIG_FILE_BYTES
                ) -> dict[str, dict[str, Any]]:
    """The entries as written (not interpolated, not checked); {} when there is no file."""
    servers = _servers_of(_read_document(path, max_bytes), path)
    return {name: entry for name, entry in servers.items() if isinstance(entry, dict)}


def write_server(path: Path, name: str, entry: dict[str, Any], *,
                 replace: bool = False) -> None:
    """Add the entry (or, with `replace`, overwrite one of that name, in place)."""
    check_raw_entry(name, entry, str(path))
    with _editing(path) as servers:
        if name in servers and not replace:
            raise ConfigError(f"{path}: server {name!r} already exists")
        servers[name] = entry


def remove_server(path: Path, name: str) -> None:
    with _editing(path) as servers:
        _require(servers, name, path)
        del servers[name]


def set_enabled(path: Path, name: str, enabled: bool) -> None:
    """Disabling writes `"enabled": false`; enabling removes the key (true is the default)."""
    with _editing(path) as servers:
        entry = _require(servers, name, path)
        if not isinstance(entry, dict):
            raise ConfigError(f"{path}: server {name!r}: must be an object, not "
                              f"{json_type(entry)}")
        if enabled:
            entry.pop("enabled", None)
        else:
            entry["enabled"] = False
        check_raw_entry(name, entry, str(path))


def _require(servers: dict[str, Any], name: str, path: Path) -> Any:
    if name not in servers:
        known = f"; known: {', '.join(servers)}" if servers else ""
        raise ConfigError(f"{path}: no server named {name!r}{known}")
    return servers[name]


@contextlib.contextmanager
def _editing(path: Path) -> Iterator[dict[str, Any]]:
    """The raw `mcpServers` object to change in place; written back if the block succeeds."""
    if _is_toml(path):
        raise ConfigError(f"editing TOML is not supported; edit {path} by hand")
    document = _read_document(path)
    servers = document.setdefault(SERVERS_KEY, {})
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: \"{SERVERS_KEY}\" must be an object, not "
                          f"{json_type(servers)}")
    yield servers
    _write_atomically(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")


def _write_atomically(path: Path, text: str) -> None:
    # Write through a symlink (dotfile setups), not over it.
    target = path.resolve() if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                     suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
