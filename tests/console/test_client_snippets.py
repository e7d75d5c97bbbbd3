"""The "Connect a client" snippets are valid for the client that reads them: JSON and TOML
parse to the documented shape, the shell commands split, and the mcpkit ones go through
mcpkit's own CLI (writing its config file under a temporary home); a hostile URL
stays data in every one (hypothesis)."""

from __future__ import annotations

import json
import shlex
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.cli import build_parser, main, parse
from mcpkit.hub.console.client_snippets import (
    EDITOR_REFERENCE,
    SERVER_NAME,
    SHELL_REFERENCE,
    TOKEN_VARIABLE,
    Snippet,
    snippets,
)

URL = "https://hub.example.com/mcp"
BEARER = f"Bearer {SHELL_REFERENCE}"


def by_client(mcp_url: str = URL) -> dict[str, Snippet]:
    return {snippet.client: snippet for snippet in snippets(mcp_url)}


def test_every_client_has_an_oauth_and_a_token_form_without_a_secret() -> None:
    found = by_client()
    assert set(found) == {"Claude Code", "Codex", "Cursor", "VS Code", "mcpkit"}
    for snippet in found.values():
        assert URL in snippet.oauth and URL in snippet.token
        assert TOKEN_VARIABLE not in snippet.oauth
        assert TOKEN_VARIABLE in snippet.token


def test_the_json_files_have_each_editors_shape() -> None:
    found = by_client()
    cursor_oauth = json.loads(found["Cursor"].oauth)
    assert cursor_oauth == {"mcpServers": {SERVER_NAME: {"url": URL}}}
    cursor_token = json.loads(found["Cursor"].token)["mcpServers"][SERVER_NAME]
    assert cursor_token["headers"] == {"Authorization": f"Bearer {EDITOR_REFERENCE}"}
    vscode_oauth = json.loads(found["VS Code"].oauth)
    assert vscode_oauth == {"servers": {SERVER_NAME: {"type": "http", "url": URL}}}
    vscode_token = json.loads(found["VS Code"].token)["servers"][SERVER_NAME]
    assert vscode_token["headers"]["Authorization"].endswith(EDITOR_REFERENCE)


def test_the_codex_toml_parses_to_an_mcp_servers_table() -> None:
    found = by_client()["Codex"]
    assert tomllib.loads(found.oauth) == {"mcp_servers": {SERVER_NAME: {"url": URL}}}
    assert tomllib.loads(found.token) == {"mcp_servers": {SERVER_NAME: {
        "url": URL, "bearer_token_env_var": TOKEN_VARIABLE}}}


def test_the_claude_code_commands_split_into_its_arguments() -> None:
    found = by_client()["Claude Code"]
    assert shlex.split(found.oauth) == ["claude", "mcp", "add", "--transport", "http",
                                        SERVER_NAME, URL]
    token = shlex.split(found.token)
    assert token[-2:] == ["--header", f"Authorization: {BEARER}"]  # expanded by Claude Code


def run_mcpkit(line: str) -> int:
    """The snippet's command through mcpkit's own CLI (`--no-probe`: no connection out)."""
    argv = shlex.split(line)
    assert argv[0] == "mcpkit"
    extra = ["--no-probe"] if argv[1:3] == ["mcp", "add"] else []
    return main([*argv[1:], *extra])


def test_the_mcpkit_commands_run_through_mcpkits_own_cli(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    found = by_client()["mcpkit"]
    add_line, login_line = found.oauth.splitlines()
    assert run_mcpkit(add_line) == 0
    written = json.loads((tmp_path / "mcpkit" / "mcp.json").read_text())
    entry = next(iter(written.values()))[SERVER_NAME]
    assert entry == {"type": "http", "url": URL}
    login = parse(build_parser(), shlex.split(login_line)[1:])  # parsed, not run: no browser
    assert login.name == SERVER_NAME and login.run is not None
    assert run_mcpkit(found.token + " --force") == 0
    written = json.loads((tmp_path / "mcpkit" / "mcp.json").read_text())
    entry = next(iter(written.values()))[SERVER_NAME]
    assert entry == {"type": "http", "url": URL, "bearer_token_env_var": TOKEN_VARIABLE}


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_url_stays_one_value_in_every_snippet(tail: str) -> None:
    url = "https://hub.example.com/" + tail
    found = by_client(url)
    assert json.loads(found["Cursor"].token)["mcpServers"][SERVER_NAME]["url"] == url
    assert json.loads(found["VS Code"].oauth)["servers"][SERVER_NAME]["url"] == url
    assert tomllib.loads(found["Codex"].token)["mcp_servers"][SERVER_NAME]["url"] == url
    assert shlex.split(found["Claude Code"].oauth)[-1] == url
    assert shlex.split(found["mcpkit"].token)[6] == url
