"""The `oauth` table of a server entry (`oauth_settings`): what is accepted, what is refused
and how each refusal reads; what builds the `OAuth`; and the importers carrying Claude Code's
and Codex's login settings over, from files in their real shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.client.oauth import OAuth
from mcpkit.manager.config import ConfigError, from_entry
from mcpkit.manager.configfile import read_servers, write_server
from mcpkit.manager.imports import read_foreign
from mcpkit.manager.oauth_settings import (
    MAX_CALLBACK_PORT,
    MAX_SCOPES,
    MIN_CALLBACK_PORT,
    OAuthSettings,
)

URL = "https://mcp.example.com/mcp"


def entry(**oauth: Any) -> dict[str, Any]:
    return {"url": URL, "oauth": oauth}


def refused(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        from_entry("docs", raw, "mcp.json")
    return str(caught.value)


# --- the table ------------------------------------------------------------------------------


def test_every_key_read_and_written_back_unchanged() -> None:
    table = {"client_id": "my-app", "client_secret_env": "DOCS_SECRET",
             "scopes": ["read", "write"], "callback_port": 33418, "store": "keyring",
             "grant": "client_credentials",
             "client_metadata_url": "https://app.example/oauth/client.json"}
    config = from_entry("docs", entry(**table))
    assert config.oauth == OAuthSettings("my-app", "DOCS_SECRET", ("read", "write"), 33418,
                                         "keyring", "client_credentials",
                                         "https://app.example/oauth/client.json")
    assert config.to_entry()["oauth"] == table
    assert from_entry("docs", config.to_entry()).oauth == config.oauth
    # defaults are left out of what is written
    assert from_entry("d", entry(client_id="a")).to_entry()["oauth"] == {"client_id": "a"}
    assert from_entry("d", {"url": URL}).oauth is None


@pytest.mark.parametrize(("oauth", "message"), [
    ({"client_secret": "s3cr3t"}, '"oauth": a client secret is never written in a config '
     'file; put it in an environment variable and give that variable\'s name as '
     '"client_secret_env"'),
    ({"clientId": "a"}, '"oauth": unknown key(s) clientId; known keys: callback_port, '
     "client_id, client_metadata_url, client_secret_env, grant, scopes, store"),
    ({"client_id": 7}, '"client_id" must be a string, not a number'),
    ({"client_id": ""}, '"client_id" must be 1-512 characters, not 0'),
    ({"client_id": "x" * 513}, '"client_id" must be 1-512 characters, not 513'),
    ({"client_id": "a\nb"}, '"client_id" must not contain control characters'),
    ({"client_id": "a", "client_secret_env": "sk-live abc"}, '"client_secret_env" is the NAME '
     "of an environment variable (letters, digits and '_', e.g. DOCS_CLIENT_SECRET), not the "
     "secret itself"),
    ({"client_secret_env": "SECRET"}, '"client_secret_env" needs the "client_id" the secret '
     "belongs to"),
    ({"scopes": "read write"}, '"scopes" must be a list of strings, not a string'),
    ({"scopes": ["read write"]}, "\"scopes\": 'read write' is not a scope"),
    ({"scopes": [""]}, "\"scopes\": '' is not a scope"),
    ({"scopes": [f"s{i}" for i in range(MAX_SCOPES + 1)]}, f'"scopes" has {MAX_SCOPES + 1} '
     f"scopes; at most {MAX_SCOPES}"),
    ({"callback_port": 80}, f'"callback_port" must be between {MIN_CALLBACK_PORT} and '
     f"{MAX_CALLBACK_PORT}, not 80"),
    ({"callback_port": 70000}, "not 70000"),
    ({"callback_port": True}, '"callback_port" must be a port number, not a boolean'),
    ({"callback_port": "8080"}, '"callback_port" must be a port number, not a string'),
    ({"store": "disk"}, "\"store\" must be one of auto, keyring, file, not 'disk'"),
    ({"grant": "password"}, '"grant" must be one of authorization_code, client_credentials, '
     "not 'password'"),
    ({"grant": "client_credentials"}, 'the client_credentials grant needs a "client_id" and '
     'the "client_secret_env" holding its secret'),
    ({"grant": "client_credentials", "client_id": "a"}, "the client_credentials grant needs"),
    ({"client_metadata_url": "http://app.example/client.json"}, '"client_metadata_url" must '
     "be an https:// URL with a path"),
    ({"client_metadata_url": "https://app.example"}, "must be an https:// URL with a path"),
])
def test_refusals_name_the_key_and_the_fix(oauth: dict[str, Any], message: str) -> None:
    text = refused(entry(**oauth))
    assert text.startswith("mcp.json: server 'docs': \"oauth\"")
    assert message in text


def test_a_pasted_secret_is_not_repeated_in_the_error() -> None:
    text = refused(entry(client_id="a", client_secret_env="sk_live_51Habc.def"))
    assert "sk_live_51Habc" not in text


def test_oauth_is_for_url_servers_and_excludes_a_static_token() -> None:
    assert "\"oauth\" applies to URL servers" in refused(
        {"command": "npx", "oauth": {"client_id": "a"}})
    assert "\"oauth\" and bearer_token_env_var both give credentials" in refused(
        {"url": URL, "bearer_token_env_var": "T", "oauth": {}})
    assert "\"oauth\" and an Authorization header both give credentials" in refused(
        {"url": URL, "headers": {"authorization": "Bearer x"}, "oauth": {}})
    assert "must be an object, not a list" in refused({"url": URL, "oauth": []})
    # an empty table is a server that logs in with what its metadata offers
    assert from_entry("d", {"url": URL, "oauth": {}}).oauth == OAuthSettings()
    assert from_entry("d", {"type": "ws", "url": "wss://x/mcp", "oauth": {}}).oauth


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["client_id", "client_secret_env", "scopes",
                                        "callback_port", "store", "grant",
                                        "client_metadata_url", "other"]),
                       st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=40),
                                 st.lists(st.text(max_size=10), max_size=5)), max_size=6))
def test_any_table_is_accepted_or_refused_with_a_config_error(table: dict[str, Any]) -> None:
    try:
        settings_ = OAuthSettings.from_table(table, "server 'x'")
    except ConfigError as exc:
        assert str(exc).startswith("server 'x': \"oauth\"")
        return
    assert OAuthSettings.from_table(settings_.to_table(), "x") == settings_


# --- building the OAuth ------------------------------------------------------------------------


def test_build_reads_the_secret_from_the_environment_and_never_shows_it() -> None:
    config = from_entry("d", entry(client_id="my-app", client_secret_env="DOCS_SECRET",
                                   scopes=["read"], callback_port=40123))
    assert config.oauth is not None
    oauth = config.oauth.build(environ={"DOCS_SECRET": "hunter2-secret"})
    assert isinstance(oauth, OAuth)
    assert (oauth.client_id, oauth.scopes) == ("my-app", ["read"])
    assert oauth.redirect_uri == "http://127.0.0.1:40123/callback"
    assert "hunter2-secret" not in repr(oauth)
    assert oauth.redirect is None  # no user: a login that is needed fails, it never prompts
    with pytest.raises(ConfigError, match=r"oauth\.client_secret_env DOCS_SECRET is not set"):
        config.oauth.build(environ={})
    replaced = config.oauth.build(environ={"DOCS_SECRET": "x"}, scopes=["admin"])
    assert replaced.scopes == ["admin"]


# --- the importers ------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


CLAUDE_MCP_JSON = {
    "mcpServers": {
        "linear": {"type": "http", "url": "https://mcp.linear.app/mcp",
                   "oauth": {"clientId": "${LINEAR_CLIENT_ID}", "callbackPort": 8080,
                             "scopes": "read write"}},
        "sentry": {"type": "http", "url": "https://mcp.sentry.dev/mcp",
                   "oauth": {"clientId": "sentry-app",
                             "authServerMetadataUrl": "https://sentry.io/.well-known/x"}},
        "stripe": {"type": "http", "url": "https://mcp.stripe.com",
                   "headers": {"Authorization": "Bearer ${STRIPE_KEY}"},
                   "oauth": {"clientId": "stripe-app"}},
        "plain": {"type": "http", "url": "https://mcp.notion.com/mcp"},
    }
}


def test_claude_code_oauth_is_carried_over(tmp_path: Path) -> None:
    path = write(tmp_path / "project" / ".mcp.json", json.dumps(CLAUDE_MCP_JSON))
    result = read_foreign("claude", path, cwd=path.parent, home=tmp_path)
    assert result.servers["linear"]["oauth"] == {
        "client_id": "${LINEAR_CLIENT_ID}", "callback_port": 8080, "scopes": ["read", "write"]}
    assert result.servers["sentry"]["oauth"] == {"client_id": "sentry-app"}
    assert "oauth" not in result.servers["stripe"]  # the static token is what it uses
    assert result.servers["stripe"]["headers"] == {"Authorization": "Bearer ${STRIPE_KEY}"}
    assert "oauth" not in result.servers["plain"]
    warnings = "\n".join(result.warnings)
    assert "server 'sentry': oauth.authServerMetadataUrl is not imported" in warnings
    assert ("server 'stripe': has a static token and OAuth settings; the token is imported, "
            "the OAuth settings (client_id) are not") in warnings
    # written to our file and read back, interpolated, as a start would
    ours = tmp_path / "ours.json"
    for name, server in result.servers.items():
        write_server(ours, name, server)
    loaded = read_servers(ours, {"LINEAR_CLIENT_ID": "lin-123", "STRIPE_KEY": "k"}, "user")
    assert loaded["linear"].oauth == OAuthSettings(client_id="lin-123", scopes=("read", "write"),
                                                   callback_port=8080)


def test_claude_code_oauth_that_our_checks_refuse_skips_the_entry(tmp_path: Path) -> None:
    path = write(tmp_path / ".mcp.json", json.dumps({"mcpServers": {
        "bad": {"type": "http", "url": URL, "oauth": {"callbackPort": 80}},
        "odd": {"type": "http", "url": URL, "oauth": "yes"}}}))
    result = read_foreign("claude", path, cwd=tmp_path, home=tmp_path)
    assert "bad" not in result.servers
    assert any("callback_port\" must be between 1024 and 65535, not 80" in w
               for w in result.warnings)
    assert result.servers["odd"] == {"type": "http", "url": URL}
    assert "server 'odd': oauth must be an object, not a string; not imported" in result.warnings


CODEX_TOML = """\
mcp_oauth_callback_port = 5555
mcp_oauth_credentials_store = "file"

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
scopes = ["file_content:read", "offline_access"]
oauth_resource = "https://mcp.figma.com"

[mcp_servers.figma.oauth]
client_id = "figma-client"
callback_url = "https://devbox.example/callback"

[mcp_servers.notion]
url = "https://mcp.notion.com/mcp"

[mcp_servers.github]
url = "https://api.githubcopilot.com/mcp/"
bearer_token_env_var = "GITHUB_PAT"

[mcp_servers.files]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "."]
"""


def test_codex_oauth_keys_are_carried_over(tmp_path: Path) -> None:
    path = write(tmp_path / ".codex" / "config.toml", CODEX_TOML)
    result = read_foreign("codex", path, cwd=tmp_path, home=tmp_path)
    assert result.servers["figma"]["oauth"] == {
        "callback_port": 5555, "store": "file", "client_id": "figma-client",
        "scopes": ["file_content:read", "offline_access"]}
    # the top-level settings reach every URL server that logs in
    assert result.servers["notion"]["oauth"] == {"callback_port": 5555, "store": "file"}
    assert result.servers["github"] == {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                                        "bearer_token_env_var": "GITHUB_PAT"}
    assert "oauth" not in result.servers["files"]
    warnings = "\n".join(result.warnings)
    assert "server 'figma': oauth keys not imported (no mcpkit equivalent): callback_url" \
        in warnings
    assert "server 'figma': oauth_resource is not imported" in warnings
    assert "github" not in warnings  # nothing of its was dropped
    loaded = read_servers(_through(result.servers, tmp_path), {}, "user")
    assert loaded["figma"].oauth == OAuthSettings(
        client_id="figma-client", scopes=("file_content:read", "offline_access"),
        callback_port=5555, store="file")


def _through(servers: dict[str, dict[str, Any]], tmp_path: Path) -> Path:
    ours = tmp_path / "ours" / "mcp.json"
    for name, server in servers.items():
        write_server(ours, name, server)
    return ours
