"""Config files on disk: locations, JSON/TOML reading, every error, scopes, editing."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from mcpkit.manager import configfile
from mcpkit.manager.config import ConfigError
from mcpkit.manager.configfile import (
    LoadedConfig,
    check_raw_entry,
    config_in,
    default_project_path,
    load,
    project_config_path,
    raw_servers,
    read_servers,
    remove_server,
    set_enabled,
    user_config_path,
    write_server,
)

ENV = {"HOME": "/home/ann", "TOKEN": "s3cret"}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_json(path: Path, document: Any) -> Path:
    return write(path, json.dumps(document))


def error_of(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as caught:
        read_servers(path, ENV if environ is None else environ, "user")
    return str(caught.value)


# --- locations ---------------------------------------------------------------------------


def test_user_config_path() -> None:
    assert user_config_path({"HOME": "/home/ann"}) == Path("/home/ann/.config/mcpkit/mcp.json")
    assert user_config_path({"HOME": "/home/ann", "XDG_CONFIG_HOME": "/xdg"}) == \
        Path("/xdg/mcpkit/mcp.json")
    # empty or relative XDG_CONFIG_HOME is ignored, as the XDG spec says
    assert user_config_path({"HOME": "/h", "XDG_CONFIG_HOME": ""}) == \
        Path("/h/.config/mcpkit/mcp.json")
    assert user_config_path({"HOME": "/h", "XDG_CONFIG_HOME": "rel"}) == \
        Path("/h/.config/mcpkit/mcp.json")


def test_config_in_accepts_json_or_toml_but_not_both(tmp_path: Path) -> None:
    assert config_in(tmp_path) is None
    toml = write(tmp_path / "mcp.toml", "")
    assert config_in(tmp_path) == toml
    json_file = write(tmp_path / "mcp.json", "{}")
    with pytest.raises(ConfigError) as caught:
        config_in(tmp_path)
    assert str(caught.value) == f"both {json_file} and {toml} exist; keep one"


def test_project_file_is_found_from_a_subdirectory(tmp_path: Path) -> None:
    project = tmp_path / "repo"
    deep = project / "src" / "pkg"
    deep.mkdir(parents=True)
    assert project_config_path(deep) is None
    found = write_json(project / ".mcpkit" / "mcp.json", {})
    assert project_config_path(deep) == found
    assert project_config_path(project) == found
    # the nearest one wins
    nearer = write(project / "src" / ".mcpkit" / "mcp.toml", "")
    assert project_config_path(deep) == nearer


def test_project_file_both_formats_is_an_error(tmp_path: Path) -> None:
    write_json(tmp_path / ".mcpkit" / "mcp.json", {})
    write(tmp_path / ".mcpkit" / "mcp.toml", "")
    with pytest.raises(ConfigError, match="exist; keep one"):
        project_config_path(tmp_path)


def test_default_project_path(tmp_path: Path) -> None:
    assert default_project_path(tmp_path) == tmp_path / ".mcpkit" / "mcp.json"


# --- reading -------------------------------------------------------------------------------


def test_read_json_interpolates_and_checks(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"other": "ignored", "mcpServers": {
        "files": {"command": "${HOME}/bin/files", "args": ["$$1", "${NOPE:-d}"]},
        "docs": {"url": "https://example.com/mcp",
                 "headers": {"Authorization": "Bearer ${TOKEN}"}}}})
    servers = read_servers(path, ENV, "user")
    assert list(servers) == ["files", "docs"]
    assert servers["files"].command == "/home/ann/bin/files"
    assert servers["files"].args == ["$1", "d"]
    assert servers["docs"].headers == {"Authorization": "Bearer s3cret"}
    assert {server.scope for server in servers.values()} == {"user"}


def test_read_toml(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.toml", """
[mcp_servers.files]
command = "${HOME}/files"
args = ["-v"]
startup_timeout_sec = 5

[mcp_servers.files.env]
DEBUG = "1"

[mcp_servers.docs]
url = "https://example.com/mcp"
""")
    servers = read_servers(path, ENV, "project")
    assert servers["files"].command == "/home/ann/files"
    assert servers["files"].env == {"DEBUG": "1"}
    assert servers["files"].startup_timeout_sec == 5.0
    assert servers["docs"].type == "http"
    assert servers["docs"].scope == "project"


def test_toml_may_use_mcpServers_but_not_both(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.toml", '[mcpServers.a]\ncommand = "x"\n')
    assert list(read_servers(path, ENV, "user")) == ["a"]
    write(path, '[mcpServers.a]\ncommand = "x"\n[mcp_servers.b]\ncommand = "y"\n')
    assert error_of(path) == f"{path}: both mcp_servers and mcpServers are set; keep one"


def test_toml_syntax_error_has_path_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.toml", '[mcp_servers.a]\ncommand = "x\n')
    message = error_of(path)
    assert message.startswith(f"{path}: invalid TOML: ")
    assert "line 2" in message


def test_toml_duplicate_server_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.toml",
                 '[mcp_servers.a]\ncommand = "x"\n[mcp_servers.a]\ncommand = "y"\n')
    assert error_of(path).startswith(f"{path}: invalid TOML: ")


def test_bad_json_has_path_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", '{\n  "mcpServers": {\n    "a": {"command": "x",}\n}}')
    assert error_of(path) == (f"{path}: invalid JSON at line 3, column 26: "
                              "Expecting property name enclosed in double quotes")


def test_duplicate_server_name_in_json(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json",
                 '{"mcpServers": {"a": {"command": "x"}, "a": {"command": "y"}}}')
    assert error_of(path) == f"{path}: duplicate server name 'a'"


def test_duplicate_keys_elsewhere_in_json(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json",
                 '{"mcpServers": {"a": {"command": "x", "env": {"K": "1", "K": "2"}}}}')
    assert error_of(path) == f"{path}: duplicate key 'K' in mcpServers.a.env"
    write(path, '{"mcpServers": {}, "mcpServers": {}}')
    assert error_of(path) == f"{path}: duplicate key 'mcpServers' at the top level"
    write(path, '{"mcpServers": {"a": {"command": "x", "command": "y"}}}')
    assert error_of(path) == f"{path}: duplicate key 'command' in mcpServers.a"


@pytest.mark.parametrize(("text", "expected"), [
    ("[]", "the top level must be an object, not a list"),
    ('"servers"', "the top level must be an object, not a string"),
    ('{"mcpServers": []}', '"mcpServers" must be an object, not a list'),
    ('{"mcpServers": null}', '"mcpServers" must be an object, not null'),
])
def test_shape_errors(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / "mcp.json", text)
    assert error_of(path) == f"{path}: {expected}"


@pytest.mark.parametrize("text", ["", "  \n", "{}", '{"other": 1}', '{"mcpServers": {}}'])
def test_no_servers(tmp_path: Path, text: str) -> None:
    assert read_servers(write(tmp_path / "mcp.json", text), ENV, "user") == {}


def test_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"mcpServers": {"a": {"command": "x"}}}')
    assert list(read_servers(path, ENV, "user")) == ["a"]


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_bytes(b'{"mcpServers": {"\xff": 1}}')
    assert error_of(path).startswith(f"{path}: cannot read: ")


@pytest.mark.parametrize(("entry", "expected"), [
    ({"type": "grpc", "url": "http://x"}, "server 'a': unknown type 'grpc'"),
    ({"command": "x", "timeout": 5}, "server 'a': unknown key(s) timeout"),
    ({"command": "x", "args": "-v"}, "server 'a': \"args\" must be a list of strings"),
    ({"command": "x", "enabled": "no"}, "server 'a': \"enabled\" must be true or false"),
    ({"command": "x", "tool_timeout_sec": "60"}, "\"tool_timeout_sec\" must be a number"),
    ("npx server", "server 'a': must be an object, not a string"),
])
def test_entry_errors_name_file_and_server(tmp_path: Path, entry: object,
                                           expected: str) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"a": entry}})
    message = error_of(path)
    assert message.startswith(f"{path}: server 'a': ")
    assert expected in message


def test_bad_server_name(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"my server": {"command": "x"}}})
    assert "a server name is 1-64 characters" in error_of(path)


def test_unset_variable_names_variable_server_and_file(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"docs": {
        "url": "https://example.com", "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"}}}})
    assert error_of(path) == (f"{path}: server 'docs': ${{DOCS_TOKEN}} is not set "
                              "(use ${DOCS_TOKEN:-default} for a default)")


def test_malformed_reference_in_a_file(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"a": {"command": "${X"}}})
    assert error_of(path).startswith(f"{path}: server 'a': malformed '${{X'")


def test_interpolated_value_is_checked(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"a": {"url": "${URL}"}}})
    assert read_servers(path, {"URL": "wss://x/mcp"}, "user")["a"].type == "ws"
    assert "a http url starts with" in error_of(path, {"URL": "ftp://x"})


def test_disabled_server_tolerates_unset_variables(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {
        "docs": {"url": "${DOCS_URL}/mcp", "enabled": False,
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X": "${TOKEN}"}},
        "broken": {"command": "x", "enabled": False, "args": "-v"}}})
    with pytest.raises(ConfigError, match="\"args\" must be a list"):
        read_servers(path, ENV, "user")
    document = json.loads(path.read_text())
    del document["mcpServers"]["broken"]
    write_json(path, document)
    docs = read_servers(path, ENV, "user")["docs"]
    assert docs.enabled is False
    assert docs.url == "${DOCS_URL}/mcp"
    assert docs.headers == {"Authorization": "Bearer ${DOCS_TOKEN}", "X": "s3cret"}


# --- scopes --------------------------------------------------------------------------------


def test_project_replaces_user_entries_whole(tmp_path: Path) -> None:
    user = write_json(tmp_path / "user" / "mcp.json", {"mcpServers": {
        "a": {"command": "user-a", "env": {"K": "v"}, "required": True},
        "b": {"command": "user-b"},
        "c": {"command": "user-c", "enabled": False}}})
    project = write_json(tmp_path / "proj" / ".mcpkit" / "mcp.json", {"mcpServers": {
        "d": {"url": "http://localhost:1/mcp"},
        "a": {"command": "project-a"}}})
    loaded = load(environ=ENV, user_path=user, project_path=project)
    assert list(loaded.servers) == ["a", "b", "c", "d"]
    a = loaded.servers["a"]
    assert (a.command, a.env, a.required, a.scope) == ("project-a", {}, False, "project")
    assert loaded.servers["b"].scope == "user"
    assert loaded.paths == {"user": user, "project": project}
    assert [server.name for server in loaded.enabled()] == ["a", "b", "d"]
    assert loaded.get("d").url == "http://localhost:1/mcp"


def test_load_finds_both_files(tmp_path: Path) -> None:
    environ = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    user = write(tmp_path / "xdg" / "mcpkit" / "mcp.toml", '[mcp_servers.u]\ncommand = "x"\n')
    project = write_json(tmp_path / "repo" / ".mcpkit" / "mcp.json",
                         {"mcpServers": {"p": {"command": "y"}}})
    (tmp_path / "repo" / "sub").mkdir()
    loaded = load(cwd=tmp_path / "repo" / "sub", environ=environ)
    assert list(loaded.servers) == ["u", "p"]
    assert loaded.paths == {"user": user, "project": project}


def test_local_scope_wins_over_project_and_user(tmp_path: Path) -> None:
    # Claude Code's scopes: local (yours, this project) over project (shared) over user
    environ = {"HOME": str(tmp_path / "home")}
    write_json(tmp_path / "home" / ".config" / "mcpkit" / "mcp.json",
               {"mcpServers": {"a": {"command": "user-a"}, "u": {"command": "u"}}})
    write_json(tmp_path / "repo" / ".mcpkit" / "mcp.json",
               {"mcpServers": {"a": {"command": "project-a"}}})
    local = write_json(tmp_path / "repo" / ".mcpkit" / "mcp.local.json",
                       {"mcpServers": {"a": {"command": "local-a"}, "l": {"command": "l"}}})
    (tmp_path / "repo" / "sub").mkdir()
    loaded = load(cwd=tmp_path / "repo" / "sub", environ=environ)
    assert list(loaded.servers) == ["a", "u", "l"]
    assert (loaded.servers["a"].command, loaded.servers["a"].scope) == ("local-a", "local")
    assert loaded.paths["local"] == local
    # a local file alone (no project file) is found too, from a subdirectory
    (tmp_path / "repo" / ".mcpkit" / "mcp.json").unlink()
    alone = load(cwd=tmp_path / "repo" / "sub", environ=environ)
    assert alone.servers["a"].scope == "local" and "project" not in alone.paths


def test_load_uses_home_without_xdg(tmp_path: Path) -> None:
    home = tmp_path / "home"
    user = write_json(home / ".config" / "mcpkit" / "mcp.json",
                      {"mcpServers": {"u": {"command": "x"}}})
    (tmp_path / "elsewhere").mkdir()
    loaded = load(cwd=tmp_path / "elsewhere", environ={"HOME": str(home)})
    assert loaded.paths == {"user": user}


def test_load_with_nothing(tmp_path: Path) -> None:
    loaded = load(environ=ENV, user_path=tmp_path / "none.json",
                  project_path=tmp_path / "none" / "mcp.json")
    assert loaded == LoadedConfig()
    with pytest.raises(ConfigError, match="no server named 'x'; no config file was found"):
        loaded.get("x")


def test_get_lists_known_names(tmp_path: Path) -> None:
    user = write_json(tmp_path / "mcp.json", {"mcpServers": {"a": {"command": "x"},
                                                             "b": {"command": "y"}}})
    loaded = load(environ=ENV, user_path=user, project_path=tmp_path / "missing.json")
    with pytest.raises(ConfigError) as caught:
        loaded.get("c")
    assert str(caught.value) == "no server named 'c'; known servers: a, b"
    empty = write_json(tmp_path / "empty.json", {})
    loaded = load(environ=ENV, user_path=empty, project_path=tmp_path / "missing.json")
    with pytest.raises(ConfigError, match=f"no servers in {empty}"):
        loaded.get("c")


def test_same_file_for_both_scopes_is_read_once(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"a": {"command": "x"}}})
    loaded = load(environ=ENV, user_path=path, project_path=path)
    assert loaded.paths == {"user": path}
    assert loaded.servers["a"].scope == "user"


def test_an_error_in_either_file_fails_the_load(tmp_path: Path) -> None:
    user = write_json(tmp_path / "u.json", {"mcpServers": {"a": {"command": "x"}}})
    project = write(tmp_path / "p.json", "{oops")
    with pytest.raises(ConfigError, match=f"^{project}: invalid JSON at line 1, column 2"):
        load(environ=ENV, user_path=user, project_path=project)


# --- the raw check before writing ----------------------------------------------------------


def test_check_raw_entry_accepts_variables_and_refuses_bad_shapes() -> None:
    config = check_raw_entry("docs", {"url": "${DOCS_URL}/mcp",
                                      "headers": {"A": "Bearer ${T}"}})
    assert config.url == "${DOCS_URL}/mcp"
    assert check_raw_entry("w", {"type": "ws", "url": "${U}"}).type == "ws"
    assert check_raw_entry("s", {"command": "${HOME}/bin/s"}).command == "${HOME}/bin/s"
    with pytest.raises(ConfigError, match=r"^f: server 'docs': malformed"):
        check_raw_entry("docs", {"command": "${oops"}, "f")
    with pytest.raises(ConfigError, match="unknown key"):
        check_raw_entry("docs", {"command": "x", "bogus": 1})
    with pytest.raises(ConfigError, match="a http url starts with"):
        check_raw_entry("docs", {"url": "ftp://${HOST}/x"})


# --- editing -------------------------------------------------------------------------------


def test_write_creates_a_private_file_and_its_directories(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "mcp.json"
    write_server(path, "docs", {"url": "https://x/mcp",
                                "headers": {"Authorization": "Bearer ${TOKEN}"}})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == (
        '{\n  "mcpServers": {\n    "docs": {\n      "url": "https://x/mcp",\n'
        '      "headers": {\n        "Authorization": "Bearer ${TOKEN}"\n      }\n'
        "    }\n  }\n}\n")
    assert os.listdir(path.parent) == ["mcp.json"]


def test_edits_keep_other_keys_servers_order_and_mode(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", json.dumps({
        "$schema": "x", "mcpServers": {"b": {"command": "b", "env": {"T": "${T}"}},
                                       "a": {"command": "a"}},
        "other": {"nested": [1, "ü"]}}))
    path.chmod(0o644)
    write_server(path, "c", {"command": "c"})
    write_server(path, "b", {"command": "b2"}, replace=True)
    document = json.loads(path.read_text())
    assert list(document) == ["$schema", "mcpServers", "other"]
    assert document["other"] == {"nested": [1, "ü"]}
    assert list(document["mcpServers"]) == ["b", "a", "c"]
    assert document["mcpServers"]["b"] == {"command": "b2"}
    assert "ü" in path.read_text()  # written as text, not \u escapes
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert sorted(os.listdir(tmp_path)) == ["mcp.json"]


def test_write_refuses_an_existing_name_without_replace(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    write_server(path, "a", {"command": "x"})
    before = path.read_text()
    with pytest.raises(ConfigError, match=f"^{path}: server 'a' already exists$"):
        write_server(path, "a", {"command": "y"})
    assert path.read_text() == before


@pytest.mark.parametrize(("name", "entry", "expected"), [
    ("a", {"command": "x", "bogus": 1}, "unknown key(s) bogus"),
    ("a", {"command": "${X"}, "malformed"),
    ("a", {"type": "http"}, "needs a \"url\""),
    ("bad name", {"command": "x"}, "a server name is"),
])
def test_write_checks_the_entry_first(tmp_path: Path, name: str, entry: dict[str, Any],
                                      expected: str) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {}})
    before = path.read_text()
    with pytest.raises(ConfigError) as caught:
        write_server(path, name, entry)
    assert expected in str(caught.value)
    assert str(caught.value).startswith(str(path))
    assert path.read_text() == before


def test_written_entries_load_with_interpolation(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    write_server(path, "s", {"command": "${HOME}/s", "args": ["$$HOME"]})
    assert raw_servers(path) == {"s": {"command": "${HOME}/s", "args": ["$$HOME"]}}
    server = read_servers(path, ENV, "user")["s"]
    assert (server.command, server.args) == ("/home/ann/s", ["$HOME"])


def test_remove_server(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"x": 1, "mcpServers": {
        "a": {"command": "a"}, "b": {"command": "b"}}})
    remove_server(path, "a")
    assert json.loads(path.read_text()) == {"x": 1, "mcpServers": {"b": {"command": "b"}}}
    with pytest.raises(ConfigError, match=f"^{path}: no server named 'a'; known: b$"):
        remove_server(path, "a")
    remove_server(path, "b")
    with pytest.raises(ConfigError, match=r"no server named 'b'$"):
        remove_server(path, "b")


def test_remove_from_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no server named 'a'"):
        remove_server(tmp_path / "mcp.json", "a")
    assert not (tmp_path / "mcp.json").exists()


def test_set_enabled(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {
        "a": {"command": "a", "env": {"K": "${UNSET}"}}}})
    set_enabled(path, "a", False)
    assert raw_servers(path) == {"a": {"command": "a", "env": {"K": "${UNSET}"},
                                       "enabled": False}}
    assert read_servers(path, ENV, "user")["a"].enabled is False
    set_enabled(path, "a", True)
    assert raw_servers(path) == {"a": {"command": "a", "env": {"K": "${UNSET}"}}}
    with pytest.raises(ConfigError, match="no server named 'zz'"):
        set_enabled(path, "zz", True)


def test_set_enabled_on_a_broken_entry(tmp_path: Path) -> None:
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"a": "npx"}})
    with pytest.raises(ConfigError, match="server 'a': must be an object, not a string"):
        set_enabled(path, "a", False)
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"a": {"command": 1}}})
    with pytest.raises(ConfigError, match="must be a string"):
        set_enabled(path, "a", False)
    assert json.loads(path.read_text()) == {"mcpServers": {"a": {"command": 1}}}


def test_editing_refuses_a_broken_file(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.json", '{"mcpServers": []}')
    with pytest.raises(ConfigError, match='"mcpServers" must be an object, not a list'):
        write_server(path, "a", {"command": "x"})
    path = write(tmp_path / "mcp.json", '{"mcpServers": {"a": 1, "a": 2}}')
    with pytest.raises(ConfigError, match="duplicate server name 'a'"):
        write_server(path, "b", {"command": "x"})


def test_toml_is_not_edited(tmp_path: Path) -> None:
    path = write(tmp_path / "mcp.toml", '[mcp_servers.a]\ncommand = "x"\n')
    for edit in (lambda: write_server(path, "b", {"command": "y"}),
                 lambda: remove_server(path, "a"),
                 lambda: set_enabled(path, "a", False)):
        with pytest.raises(ConfigError) as caught:
            edit()
        assert str(caught.value) == f"editing TOML is not supported; edit {path} by hand"
    assert raw_servers(path) == {"a": {"command": "x"}}


def test_raw_servers(tmp_path: Path) -> None:
    assert raw_servers(tmp_path / "missing.json") == {}
    path = write_json(tmp_path / "mcp.json", {"mcpServers": {"a": {"url": "${U}"}}})
    assert raw_servers(path) == {"a": {"url": "${U}"}}


def test_write_goes_through_a_symlink(tmp_path: Path) -> None:
    real = write_json(tmp_path / "dotfiles" / "mcp.json", {"mcpServers": {}})
    link = tmp_path / "config" / "mcp.json"
    link.parent.mkdir()
    link.symlink_to(real)
    write_server(link, "a", {"command": "x"})
    assert link.is_symlink()
    assert raw_servers(real) == {"a": {"command": "x"}}


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    # os.replace cannot put a file over a directory: the write fails at the last step.
    target = tmp_path / "mcp.json"
    target.mkdir()
    with pytest.raises(OSError):
        configfile._write_atomically(target, "{}\n")
    assert target.is_dir()
    assert os.listdir(tmp_path) == ["mcp.json"]


def test_hostile_files_are_refused_precisely(tmp_path: Path) -> None:
    deep = write(tmp_path / "deep" / "mcp.json",
                 '{"mcpServers": ' + "[" * 100_000 + "]" * 100_000 + "}")
    toml = write(tmp_path / "deep" / "mcp.toml", "x = " + "[" * 100_000 + "]" * 100_000)
    for path in (deep, toml):
        with pytest.raises(ConfigError, match="nested too deeply to be a config file"):
            raw_servers(path)
    big = write_json(tmp_path / "big" / "mcp.json",
                     {"mcpServers": {"a": {"command": "x" * 200}}})
    with pytest.raises(ConfigError, match=r"mcp.json: larger than 100 bytes"):
        raw_servers(big, max_bytes=100)
    with pytest.raises(ConfigError, match=r"larger than 100 bytes"):
        load(environ=ENV, user_path=big, project_path=tmp_path / "none.json",
             max_file_bytes=100)
    assert list(raw_servers(big)) == ["a"]  # the default bound is far above it
