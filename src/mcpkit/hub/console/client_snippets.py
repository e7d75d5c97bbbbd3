"""The "Connect a client" snippets: how each MCP client is pointed at this hub's /mcp, in two
forms - OAuth (no secret: the client signs in through the hub's authorization server) and an
API token read from an environment variable (never written into the file itself).

Pure: `snippets(mcp_url)` gives the text; the page escapes it (autoescaped template), and
tests/console/test_client_snippets.py parses every JSON/TOML one and runs the mcpkit one
through mcpkit's own CLI parser. Shapes as the clients document them:

    Claude Code  `claude mcp add --transport http NAME URL` (+ `--header`); `${VAR}` in a
                 project's .mcp.json is expanded by Claude Code when it connects
    Codex        ~/.codex/config.toml `[mcp_servers.NAME]` url (+ bearer_token_env_var)
    Cursor       .cursor/mcp.json `{"mcpServers": {NAME: {"url", "headers"}}}`, `${env:VAR}`
    VS Code      .vscode/mcp.json `{"servers": {NAME: {"type": "http", "url", "headers"}}}`
    mcpkit       `mcpkit mcp add -t http NAME URL` (+ --bearer-token-env-var), then login
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

SERVER_NAME = "mcpkit-hub"
TOKEN_VARIABLE = "MCPKIT_HUB_TOKEN"
"""The environment variable every API-token snippet reads the token from."""
SHELL_REFERENCE = "${" + TOKEN_VARIABLE + "}"
"""The variable as Claude Code (and mcpkit) expand it in a header."""
EDITOR_REFERENCE = "${env:" + TOKEN_VARIABLE + "}"
"""The variable as Cursor and VS Code expand it in mcp.json."""


@dataclass(frozen=True, slots=True)
class Snippet:
    client: str
    where: str            # the file, or "terminal" for a command
    language: str         # "shell", "json" or "toml": what the tests parse it as
    oauth: str
    token: str


def _json(servers_key: str, entry: dict[str, object]) -> str:
    return json.dumps({servers_key: {SERVER_NAME: entry}}, indent=2)


def _toml_string(text: str) -> str:
    """A TOML basic string: a backslash, a quote and the control characters (DEL too, which
    TOML refuses literally) escaped; any other character as itself."""
    def escaped(char: str) -> str:
        if char in '"\\':
            return "\\" + char
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return f"\\u{ord(char):04x}"
        return char
    return '"' + "".join(escaped(char) for char in text) + '"'


def snippets(mcp_url: str) -> tuple[Snippet, ...]:
    bearer = f"Authorization: Bearer {SHELL_REFERENCE}"
    codex = f"[mcp_servers.{SERVER_NAME}]\nurl = {_toml_string(mcp_url)}\n"
    return (
        Snippet("Claude Code", "terminal", "shell",
                shlex.join(["claude", "mcp", "add", "--transport", "http", SERVER_NAME,
                            mcp_url]),
                shlex.join(["claude", "mcp", "add", "--transport", "http", "--scope",
                            "project", SERVER_NAME, mcp_url, "--header", bearer])),
        Snippet("Codex", "~/.codex/config.toml", "toml", codex,
                codex + f"bearer_token_env_var = {_toml_string(TOKEN_VARIABLE)}\n"),
        Snippet("Cursor", ".cursor/mcp.json", "json",
                _json("mcpServers", {"url": mcp_url}),
                _json("mcpServers", {"url": mcp_url, "headers": {
                    "Authorization": f"Bearer {EDITOR_REFERENCE}"}})),
        Snippet("VS Code", ".vscode/mcp.json", "json",
                _json("servers", {"type": "http", "url": mcp_url}),
                _json("servers", {"type": "http", "url": mcp_url, "headers": {
                    "Authorization": f"Bearer {EDITOR_REFERENCE}"}})),
        Snippet("mcpkit", "terminal", "shell",
                shlex.join(["mcpkit", "mcp", "add", "-t", "http", SERVER_NAME, mcp_url])
                + "\n" + shlex.join(["mcpkit", "mcp", "login", SERVER_NAME]),
                shlex.join(["mcpkit", "mcp", "add", "-t", "http", SERVER_NAME, mcp_url,
                            "--bearer-token-env-var", TOKEN_VARIABLE])),
    )
