"""Other tools' config files, written here in their real shapes, read into our entries."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mcpkit.manager.config import ConfigError
from mcpkit.manager.configfile import read_servers, write_server
from mcpkit.manager.imports import SOURCES, ImportResult, default_paths, read_foreign


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "work" / "app"
    path.mkdir(parents=True)
    return path


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def read(source: str, path: Path, project: Path, home: Path) -> ImportResult:
    return read_foreign(source, path, cwd=project, home=home)


def through_our_file(result: ImportResult, tmp_path: Path,
                     environ: dict[str, str]) -> dict[str, Any]:
    """Write the imported entries and load them back, as `mcpkit mcp import` then a start."""
    ours = tmp_path / "ours" / "mcp.json"
    for name, entry in result.servers.items():
        write_server(ours, name, entry)
    return read_servers(ours, environ, "user")


def test_default_paths(home: Path, project: Path) -> None:
    # every file, the user's first and the project's last (the project's entries win)
    assert default_paths("claude", home=home, cwd=project, environ={}) == [
        home / ".claude.json", project / ".mcp.json"]
    assert default_paths("claude-desktop", home=home, cwd=project, environ={}) == [
        home / ".config" / "Claude" / "claude_desktop_config.json",
        home / "Library" / "Application Support" / "Claude" / "claude_desktop_config.json",
        home / "AppData" / "Roaming" / "Claude" / "claude_desktop_config.json"]
    appdata = home / "roaming"
    assert default_paths("claude-desktop", home=home, cwd=project,
                         environ={"APPDATA": str(appdata)})[-1] == \
        appdata / "Claude" / "claude_desktop_config.json"
    assert default_paths("cursor", home=home, cwd=project, environ={}) == [
        home / ".cursor" / "mcp.json", project / ".cursor" / "mcp.json"]
    vscode = default_paths("vscode", home=home, cwd=project, environ={})
    assert (vscode[0], vscode[-1]) == (home / ".config" / "Code" / "User" / "mcp.json",
                                       project / ".vscode" / "mcp.json")
    assert default_paths("codex", home=home, cwd=project, environ={}) == [
        home / ".codex" / "config.toml", project / ".codex" / "config.toml"]
    assert default_paths("codex", home=home, cwd=project,
                         environ={"CODEX_HOME": str(home / "cx")})[0] == \
        home / "cx" / "config.toml"
    opencode = default_paths("opencode", home=home, cwd=project, environ={})
    assert opencode[-2:] == [project / "opencode.json", project / "opencode.jsonc"]
    assert home / ".config" / "opencode" / "opencode.json" in opencode
    assert set(SOURCES) == {"claude", "claude-desktop", "cursor", "vscode", "codex",
                            "opencode"}


def test_unknown_source(home: Path, project: Path) -> None:
    for call in (lambda: default_paths("zed", home=home, cwd=project),
                 lambda: read_foreign("zed", project / "x.json")):
        with pytest.raises(ConfigError, match="unknown source 'zed'; use one of claude, "):
            call()


def test_missing_and_broken_files(home: Path, project: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        read("claude", project / ".mcp.json", project, home)
    path = write(project / ".mcp.json", '{"mcpServers": {\n  "a": }')
    with pytest.raises(ConfigError, match=r"invalid JSON at line 2, column 8"):
        read("claude", path, project, home)
    path = write(project / ".mcp.json", "[]")
    with pytest.raises(ConfigError, match="top level must be an object"):
        read("claude", path, project, home)
    path = write(project / ".mcp.json", '{"mcpServers": ["a"]}')
    with pytest.raises(ConfigError, match="mcpServers must be an object, not a list"):
        read("claude", path, project, home)
    assert read("claude", write(project / ".mcp.json", ""), project, home) == ImportResult()


# --- Claude ----------------------------------------------------------------------------------


def test_claude_code_project_file(tmp_path: Path, home: Path, project: Path) -> None:
    path = write(project / ".mcp.json", json.dumps({"mcpServers": {
        "files": {"type": "stdio", "command": "npx",
                  "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/src"],
                  "env": {"PRICE": "5$", "KEY": "${API_KEY:-dev$key}"}},
        "api": {"type": "http", "url": "${API_BASE_URL:-https://api.example.com}/mcp",
                "headers": {"Authorization": "Bearer ${API_KEY}"}},
        "events": {"type": "sse", "url": "https://example.com/sse"}}}))
    result = read("claude", path, project, home)
    assert result.warnings == []
    assert result.servers == {
        "files": {"type": "stdio", "command": "npx",
                  "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/src"],
                  "env": {"PRICE": "5$$", "KEY": "${API_KEY:-dev$$key}"}},
        "api": {"type": "http", "url": "${API_BASE_URL:-https://api.example.com}/mcp",
                "headers": {"Authorization": "Bearer ${API_KEY}"}},
        "events": {"type": "sse", "url": "https://example.com/sse"}}
    servers = through_our_file(result, tmp_path, {"HOME": "/h", "API_KEY": "k"})
    assert servers["files"].args[-1] == "/h/src"
    assert servers["files"].env == {"PRICE": "5$", "KEY": "k"}
    assert servers["api"].url == "https://api.example.com/mcp"
    # empty counts as unset for a default, like the shell
    unset = through_our_file(result, tmp_path / "2", {"HOME": "/h", "API_KEY": ""})
    assert unset["files"].env["KEY"] == "dev$key"


def test_claude_json_user_and_this_projects_servers(home: Path, project: Path) -> None:
    path = write(home / ".claude.json", json.dumps({
        "numStartups": 41, "tipsHistory": {"memory-command": 40}, "userID": "xxx",
        "mcpServers": {"playwright": {"type": "stdio", "command": "npx",
                                      "args": ["@playwright/mcp@latest"], "env": {}},
                       "shared": {"type": "stdio", "command": "user-version"}},
        "projects": {
            str(project): {"allowedTools": [], "mcpServers": {
                "shared": {"type": "stdio", "command": "project-version"},
                "db": {"type": "stdio", "command": "db-mcp", "args": ["--ro"]}}},
            "/some/other/project": {"mcpServers": {
                "elsewhere": {"type": "stdio", "command": "nope"}}}}}))
    result = read("claude", path, project, home)
    assert list(result.servers) == ["playwright", "shared", "db"]
    assert result.servers["shared"] == {"type": "stdio", "command": "project-version"}
    assert result.servers["db"]["args"] == ["--ro"]
    assert result.warnings == []


def test_claude_desktop_has_no_variables(home: Path, project: Path) -> None:
    path = write(home / ".config" / "Claude" / "claude_desktop_config.json", json.dumps({
        "mcpServers": {"github": {"command": "npx",
                                  "args": ["-y", "@modelcontextprotocol/server-github"],
                                  "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_${abc}$"}}},
        "globalShortcut": "Ctrl+Space"}))
    result = read("claude", path, project, home)
    assert result.servers["github"]["env"] == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_$${abc}$$"}
    assert result.servers["github"]["type"] == "stdio"


def test_claude_dropped_keys_and_disabled(home: Path, project: Path) -> None:
    path = write(project / ".mcp.json", json.dumps({"mcpServers": {
        "a": {"command": "x", "disabled": True, "alwaysAllow": ["t"], "timeout": 5}}}))
    result = read("claude", path, project, home)
    assert result.servers["a"] == {"type": "stdio", "command": "x", "enabled": False}
    assert result.warnings == ["server 'a': not imported (no mcpkit equivalent): "
                               "alwaysAllow, timeout"]


# --- Cursor ----------------------------------------------------------------------------------


def test_cursor_project_file(home: Path, project: Path) -> None:
    path = write(project / ".cursor" / "mcp.json", """{
  // Cursor's files are JSONC
  "mcpServers": {
    "server-name": {
      "command": "npx",
      "args": ["-y", "mcp-server", "${workspaceFolder}/data", "${userHome}/.cache"],
      "env": {"API_KEY": "${env:MY_API_KEY}", "NAME": "${workspaceFolderBasename}"},
      "envFile": "${workspaceFolder}/.env",
    },
    "remote": {"url": "http://example.com:8000/mcp", "headers": {"X": "${foo}"}},
    /* a socket one */
    "socket": {"url": "wss://example.com/mcp"}
  }
}""")
    result = read("cursor", path, project, home)
    assert result.servers == {
        "server-name": {"type": "stdio", "command": "npx",
                        "args": ["-y", "mcp-server", f"{project}/data", f"{home}/.cache"],
                        "env": {"API_KEY": "${MY_API_KEY}", "NAME": "app"}},
        "remote": {"type": "http", "url": "http://example.com:8000/mcp",
                   "headers": {"X": "$${foo}"}},
        "socket": {"type": "ws", "url": "wss://example.com/mcp"}}
    assert result.warnings == [
        "server 'server-name': envFile '${workspaceFolder}/.env' is not imported; put its "
        "variables in the environment or in \"env\"",
        "server 'remote': ${foo} cannot be translated; kept as literal text"]


def test_cursor_user_file_uses_cwd_as_workspace(home: Path, project: Path) -> None:
    path = write(home / ".cursor" / "mcp.json", json.dumps({"mcpServers": {
        "a": {"command": "run", "args": ["${workspaceFolder}"]}}}))
    assert read("cursor", path, project, home).servers["a"]["args"] == [str(project)]


def test_cursor_unknown_type_is_skipped(home: Path, project: Path) -> None:
    path = write(project / ".cursor" / "mcp.json", json.dumps({"mcpServers": {
        "a": {"type": "grpc", "url": "x"}, "b": "npx b", "c": {"command": "c"}}}))
    result = read("cursor", path, project, home)
    assert list(result.servers) == ["c"]
    assert result.warnings == ["server 'a': skipped: unknown type 'grpc'",
                               "server 'b': skipped: must be an object, not a string"]


# --- VS Code ---------------------------------------------------------------------------------


def test_vscode_workspace_file(tmp_path: Path, home: Path, project: Path) -> None:
    path = write(project / ".vscode" / "mcp.json", """{
  "inputs": [
    {"type": "promptString", "id": "perplexity-key", "description": "Perplexity API Key",
     "password": true}
  ],
  "servers": {
    "Perplexity": {
      "type": "stdio",
      "command": "docker",
      "args": ["run", "-i", "--rm", "-e", "PERPLEXITY_API_KEY", "mcp/perplexity-ask"],
      "env": {"PERPLEXITY_API_KEY": "${input:perplexity-key}"},
      "dev": {"watch": "src/**/*.ts"}
    },
    "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"],
              "cwd": "${workspaceFolder}", "env": {"TOKEN": "${env:FETCH_TOKEN}"}},
    "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
    "legacy": {"type": "sse", "url": "http://localhost:3000/sse"}, // trailing comma next
  },
}""")
    result = read("vscode", path, project, home)
    assert result.servers == {
        "Perplexity": {"type": "stdio", "command": "docker",
                       "args": ["run", "-i", "--rm", "-e", "PERPLEXITY_API_KEY",
                                "mcp/perplexity-ask"],
                       "env": {"PERPLEXITY_API_KEY": "${PERPLEXITY_KEY}"}},
        "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"],
                  "cwd": str(project), "env": {"TOKEN": "${FETCH_TOKEN}"}},
        "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
        "legacy": {"type": "sse", "url": "http://localhost:3000/sse"}}
    assert result.warnings == [
        "server 'Perplexity': ${input:perplexity-key} (Perplexity API Key) is prompted for "
        "by VS Code; it became ${PERPLEXITY_KEY}: set PERPLEXITY_KEY in the environment",
        "server 'Perplexity': not imported (no mcpkit equivalent): dev"]
    with pytest.raises(ConfigError, match=r"\$\{PERPLEXITY_KEY\} is not set"):
        through_our_file(result, tmp_path, {})
    servers = through_our_file(result, tmp_path / "2", {"PERPLEXITY_KEY": "k",
                                                        "FETCH_TOKEN": "f"})
    assert servers["Perplexity"].env == {"PERPLEXITY_API_KEY": "k"}


def test_vscode_settings_json_shape(home: Path, project: Path) -> None:
    path = write(home / ".config" / "Code" / "User" / "settings.json", json.dumps({
        "editor.fontSize": 14, "mcp": {"servers": {"a": {"type": "stdio", "command": "x"}}}}))
    assert read("vscode", path, project, home).servers == {"a": {"type": "stdio",
                                                                 "command": "x"}}


def test_jsonc_keeps_comment_like_text_in_strings(home: Path, project: Path) -> None:
    path = write(project / ".vscode" / "mcp.json", r"""{"servers": {
  "a": {"type": "http", "url": "https://x.example/mcp", // a comment
        "headers": {"X": "a // b /* c */ \"d,}\" ,]"}}
}}""")
    result = read("vscode", path, project, home)
    assert result.servers["a"]["headers"] == {"X": 'a // b /* c */ "d,}" ,]'}


def test_jsonc_errors_keep_line_and_column(home: Path, project: Path) -> None:
    path = write(project / ".vscode" / "mcp.json", '{\n  /* c */ "servers": {\n  "a": x}}')
    with pytest.raises(ConfigError, match="invalid JSON at line 3, column 8"):
        read("vscode", path, project, home)
    write(path, '{"servers": {} /* never closed\n}')
    with pytest.raises(ConfigError, match="unclosed /\\* comment starting on line 1"):
        read("vscode", path, project, home)


# --- Codex -----------------------------------------------------------------------------------


CODEX_TOML = """
model = "o4-mini"

[mcp_servers.docs]
command = "uvx"
args = ["docs-mcp", "--price", "5$"]
cwd = "/srv/docs"
env_vars = ["LOCAL_TOKEN", { name = "OTHER", source = "local" },
            { name = "REMOTE_TOKEN", source = "remote" }]
startup_timeout_ms = 20000
tool_timeout_sec = 120
enabled_tools = ["search", "open"]
disabled_tools = ["open"]
required = true

[mcp_servers.docs.env]
MODE = "ro"

[mcp_servers.github]
url = "https://api.githubcopilot.com/mcp/"
bearer_token_env_var = "GITHUB_PAT"
http_headers = { "X-Team" = "core" }
env_http_headers = { "X-Api-Key" = "GITHUB_API_KEY", "X-Bad" = "not a name" }
enabled = false
startup_timeout_sec = 15
default_tools_approval_mode = "prompt"

[profiles.fast]
model = "gpt-5"
"""


def test_codex_config(tmp_path: Path, home: Path, project: Path) -> None:
    path = write(home / ".codex" / "config.toml", CODEX_TOML)
    result = read("codex", path, project, home)
    assert result.servers == {
        "docs": {"type": "stdio", "command": "uvx", "args": ["docs-mcp", "--price", "5$$"],
                 "env": {"MODE": "ro"}, "cwd": "/srv/docs", "required": True,
                 "tool_timeout_sec": 120, "enabled_tools": ["search", "open"],
                 "disabled_tools": ["open"], "env_vars": ["LOCAL_TOKEN", "OTHER"],
                 "startup_timeout_sec": 20.0},
        "github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                   "bearer_token_env_var": "GITHUB_PAT", "enabled": False,
                   "startup_timeout_sec": 15,
                   "headers": {"X-Team": "core", "X-Api-Key": "${GITHUB_API_KEY}"}}}
    assert result.warnings == [
        "server 'docs': env_vars 'REMOTE_TOKEN' comes from a remote environment; "
        "not imported",
        "server 'github': env_http_headers 'X-Bad': 'not a name' is not a variable name; "
        "not imported",
        "server 'github': not imported (no mcpkit equivalent): default_tools_approval_mode"]
    servers = through_our_file(result, tmp_path, {"GITHUB_API_KEY": "k"})
    assert servers["docs"].args == ["docs-mcp", "--price", "5$"]
    assert servers["docs"].startup_timeout_sec == 20.0
    assert servers["github"].headers == {"X-Team": "core", "X-Api-Key": "k"}


def test_codex_bad_toml_and_bad_entries(home: Path, project: Path) -> None:
    path = write(home / ".codex" / "config.toml", "[mcp_servers.a\ncommand = 1\n")
    with pytest.raises(ConfigError, match=f"^{path}: invalid TOML: .*line 1"):
        read("codex", path, project, home)
    write(path, '[mcp_servers.a]\ncommand = "x"\nargs = "oops"\n'
                '[mcp_servers.b]\ntool_timeout_sec = 5\n[mcp_servers.c]\ncommand = "c"\n')
    result = read("codex", path, project, home)
    assert list(result.servers) == ["c"]
    assert result.warnings == [
        "skipped: server 'a': \"args\" must be a list of strings, not a string",
        "skipped: server 'b': a http server needs a \"url\""]


# --- OpenCode --------------------------------------------------------------------------------


def test_opencode_jsonc(tmp_path: Path, home: Path, project: Path) -> None:
    path = write(project / "opencode.jsonc", """{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "my-local-mcp-server": {
      "type": "local",
      // Or ["bun", "x", "my-mcp-command"]
      "command": ["npx", "-y", "my-mcp-command", "{env:DATA_DIR}/x", "$1"],
      "enabled": true,
      "environment": {
        "MY_ENV_VAR": "my_env_var_value",
        "TOKEN": "{env:MY_TOKEN}",
        "CERT": "{file:~/cert.pem}",
      },
      "timeout": 10000,
    },
    "jira": {
      "type": "remote",
      "url": "https://jira.example.com/mcp",
      "enabled": false,
      "headers": {"Authorization": "Bearer {env:JIRA_TOKEN}"},
      "oauth": false,
    },
  },
}""")
    result = read("opencode", path, project, home)
    assert result.servers == {
        "my-local-mcp-server": {
            "type": "stdio", "command": "npx",
            "args": ["-y", "my-mcp-command", "${DATA_DIR}/x", "$$1"],
            "env": {"MY_ENV_VAR": "my_env_var_value", "TOKEN": "${MY_TOKEN}",
                    "CERT": "{file:~/cert.pem}"},
            "enabled": True, "startup_timeout_sec": 10.0},
        "jira": {"type": "http", "url": "https://jira.example.com/mcp",
                 "headers": {"Authorization": "Bearer ${JIRA_TOKEN}"}, "enabled": False}}
    assert result.warnings == [
        "server 'my-local-mcp-server': {file:~/cert.pem} cannot be translated; kept as "
        "literal text",
        "server 'jira': not imported (no mcpkit equivalent): oauth"]
    servers = through_our_file(result, tmp_path, {"DATA_DIR": "/d", "MY_TOKEN": "t"})
    assert servers["my-local-mcp-server"].args[-2:] == ["/d/x", "$1"]


def test_opencode_nested_servers_and_bad_entries(home: Path, project: Path) -> None:
    path = write(home / ".config" / "opencode" / "opencode.json", json.dumps({"mcp": {
        "servers": {
            "ok": {"type": "local", "command": ["srv"]},
            "no-command": {"type": "local", "command": []},
            "odd": {"type": "docker", "image": "x"}}}}))
    result = read("opencode", path, project, home)
    assert result.servers == {"ok": {"type": "stdio", "command": "srv"}}
    assert result.warnings == [
        "server 'no-command': skipped: \"command\" must be a non-empty list of strings",
        "server 'odd': skipped: unknown type 'docker' (OpenCode has local and remote)"]


def test_opencode_without_mcp(home: Path, project: Path) -> None:
    path = write(project / "opencode.json", '{"model": "x"}')
    assert read("opencode", path, project, home) == ImportResult()


# --- names -----------------------------------------------------------------------------------


def test_names_we_do_not_accept_are_rewritten(tmp_path: Path, home: Path,
                                              project: Path) -> None:
    long_name = "n" * 70
    path = write(project / ".mcp.json", json.dumps({"mcpServers": {
        "my server": {"command": "a"}, "my-server": {"command": "b"},
        "ünï/code": {"command": "c"}, long_name: {"command": "d"}}}))
    result = read("claude", path, project, home)
    assert list(result.servers) == ["my-server", "my-server-2", "n-code", "n" * 64]
    assert result.servers["my-server"]["command"] == "a"
    assert result.servers["my-server-2"]["command"] == "b"
    assert result.warnings[0].startswith("server 'my server': imported as 'my-server' (")
    assert len(result.warnings) == 4
    assert len(through_our_file(result, tmp_path, {})) == 4


def test_default_paths_are_where_the_readers_look(home: Path, project: Path) -> None:
    # a file written at each tool's first default path reads back its server
    files = {
        "claude": '{"mcpServers": {"s": {"command": "x"}}}',
        "claude-desktop": '{"mcpServers": {"s": {"command": "x"}}}',
        "cursor": '{"mcpServers": {"s": {"command": "x"}}}',
        "vscode": '{"servers": {"s": {"type": "stdio", "command": "x"}}}',
        "codex": '[mcp_servers.s]\ncommand = "x"\n',
        "opencode": '{"mcp": {"s": {"type": "local", "command": ["x"]}}}',
    }
    for source, text in files.items():
        path = write(default_paths(source, home=home, cwd=project)[0], text)
        result = read(source, path, project, home)
        assert result.servers == {"s": {"type": "stdio", "command": "x"}}, source
        assert os.path.exists(path)
