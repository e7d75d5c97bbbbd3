"""One `mcpServers` entry, checked: `from_entry`, `ServerConfig` and `to_entry`."""

from __future__ import annotations

from typing import Any

import pytest

from mcpkit.manager.config import (
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TOOL_TIMEOUT_S,
    KNOWN_KEYS,
    ConfigError,
    ServerConfig,
    from_entry,
)

WHERE = "/p/mcp.json"


def error_of(entry: object, name: str = "docs") -> str:
    with pytest.raises(ConfigError) as caught:
        from_entry(name, entry, WHERE)
    return str(caught.value)


def test_stdio_entry_with_every_field() -> None:
    config = from_entry("files", {
        "type": "stdio", "command": "npx", "args": ["-y", "server"], "env": {"DEBUG": "1"},
        "env_vars": ["GITHUB_TOKEN"], "cwd": "/srv", "enabled": False, "required": True,
        "startup_timeout_sec": 5, "tool_timeout_sec": 2.5, "enabled_tools": ["read_*"],
        "disabled_tools": ["read_secret"]}, WHERE)
    assert config == ServerConfig(
        name="files", type="stdio", command="npx", args=["-y", "server"], env={"DEBUG": "1"},
        env_vars=["GITHUB_TOKEN"], cwd="/srv", enabled=False, required=True,
        startup_timeout_sec=5.0, tool_timeout_sec=2.5, enabled_tools=["read_*"],
        disabled_tools=["read_secret"])
    assert config.target() == ["npx", "-y", "server"]
    assert config.client_kind == "stdio"
    assert config.describe_target() == "npx -y server"


def test_defaults() -> None:
    config = from_entry("files", {"command": "server"})
    assert config.type == "stdio"
    assert config.args == [] and config.env == {} and config.headers == {}
    assert config.enabled is True and config.required is False
    assert config.startup_timeout_sec == DEFAULT_STARTUP_TIMEOUT_S == 30
    assert config.tool_timeout_sec == DEFAULT_TOOL_TIMEOUT_S == 60
    assert config.enabled_tools is None and config.disabled_tools == []


@pytest.mark.parametrize(("entry", "kind", "client_kind"), [
    ({"url": "https://example.com/mcp"}, "http", "http"),
    ({"url": "wss://example.com/mcp"}, "ws", "websocket"),
    ({"url": "WS://example.com/mcp"}, "ws", "websocket"),
    ({"type": "sse", "url": "http://example.com/sse"}, "sse", "sse"),
    ({"type": "streamable-http", "url": "http://example.com/mcp"}, "http", "http"),
    ({"type": "streamableHttp", "url": "http://example.com/mcp"}, "http", "http"),
    ({"type": "websocket", "url": "ws://example.com/mcp"}, "ws", "websocket"),
])
def test_remote_types(entry: dict[str, Any], kind: str, client_kind: str) -> None:
    config = from_entry("remote", entry)
    assert config.type == kind
    assert config.client_kind == client_kind
    assert config.target() == entry["url"]


def test_error_names_where_and_server() -> None:
    assert error_of({"type": "carrier-pigeon", "url": "http://x"}) == (
        "/p/mcp.json: server 'docs': unknown type 'carrier-pigeon'; use one of "
        "stdio, http, sse, ws")
    assert error_of({"type": 3, "url": "http://x"}).endswith("unknown type 3; use one of "
                                                            "stdio, http, sse, ws")


def test_unknown_keys_are_refused_with_the_known_ones() -> None:
    message = error_of({"command": "x", "comand": "y", "argz": []})
    assert "unknown key(s) argz, comand" in message
    assert "known keys: " + ", ".join(sorted(KNOWN_KEYS)) in message


@pytest.mark.parametrize(("entry", "expected"), [
    ({"command": 3}, '"command" must be a string, not a number'),
    ({"command": "x", "args": "--flag"}, '"args" must be a list of strings, not a string'),
    ({"command": "x", "args": ["a", 1]}, '"args" must be a list of strings, not a list'),
    ({"command": "x", "env": {"A": 1}}, '"env" must be an object of strings, not an object'),
    ({"command": "x", "env": ["A=1"]}, '"env" must be an object of strings, not a list'),
    ({"command": "x", "env_vars": "A"}, '"env_vars" must be a list of strings'),
    ({"command": "x", "enabled": "yes"}, '"enabled" must be true or false, not a string'),
    ({"command": "x", "required": 1}, '"required" must be true or false, not a number'),
    ({"command": "x", "startup_timeout_sec": "30"}, '"startup_timeout_sec" must be a number'),
    ({"command": "x", "tool_timeout_sec": True}, '"tool_timeout_sec" must be a number of '
                                                 "seconds, not a boolean"),
    ({"command": "x", "tool_timeout_sec": None}, '"tool_timeout_sec" must be a number of '
                                                 "seconds, not null"),
    ({"command": "x", "tool_timeout_sec": 0}, "between 0 and 3600 seconds, not 0"),
    ({"command": "x", "tool_timeout_sec": 3601}, "between 0 and 3600 seconds"),
    ({"command": "x", "enabled_tools": "read"}, '"enabled_tools" must be a list of strings'),
    ({"url": "http://x", "headers": {"A": None}}, '"headers" must be an object of strings'),
])
def test_wrong_value_types(entry: dict[str, Any], expected: str) -> None:
    assert expected in error_of(entry)


@pytest.mark.parametrize(("entry", "expected"), [
    ({}, 'needs a "command" (stdio) or a "url"'),
    ({"type": "stdio"}, 'a stdio server needs a "command"'),
    ({"type": "stdio", "command": ""}, 'a stdio server needs a "command"'),
    ({"command": "x", "url": "http://x"}, 'a stdio server has no "url"'),
    ({"type": "http", "command": "x"}, 'a http server has a "url", not a "command"'),
    ({"type": "http"}, 'a http server needs a "url"'),
    ({"type": "http", "url": "ftp://x"}, "a http url starts with http:// or https://"),
    ({"type": "ws", "url": "https://x"}, "a ws url starts with ws:// or wss://"),
])
def test_target_errors(entry: dict[str, Any], expected: str) -> None:
    assert expected in error_of(entry)


def test_entry_must_be_an_object() -> None:
    assert error_of(["npx"]).endswith("server 'docs': must be an object, not a list")


@pytest.mark.parametrize("name", ["", "a b", "ünï", "a/b", "x" * 65])
def test_bad_names(name: str) -> None:
    assert "a server name is 1-64 characters" in error_of({"command": "x"}, name)


def test_good_names() -> None:
    for name in ("a", "my-server_2.0", "x" * 64):
        assert from_entry(name, {"command": "x"}).name == name


def test_child_env_passes_named_variables_then_env() -> None:
    config = from_entry("s", {"command": "x", "env_vars": ["A", "B", "MISSING"],
                              "env": {"B": "from-env"}})
    assert config.child_env({"A": "1", "B": "2", "OTHER": "3"}) == {"A": "1", "B": "from-env"}


def test_bearer_token() -> None:
    config = from_entry("s", {"url": "http://x", "bearer_token_env_var": "TOKEN"})
    assert config.bearer_token({"TOKEN": "t"}) == "t"
    with pytest.raises(ConfigError, match="server 's': bearer_token_env_var TOKEN is not set"):
        config.bearer_token({})
    assert from_entry("s", {"url": "http://x"}).bearer_token({}) is None


def test_tool_filters() -> None:
    config = from_entry("s", {"command": "x", "enabled_tools": ["read_*", "list"],
                              "disabled_tools": ["read_secret"]})
    assert config.allows_tool("read_file")
    assert config.allows_tool("list")
    assert not config.allows_tool("read_secret")
    assert not config.allows_tool("write_file")
    assert from_entry("s", {"command": "x"}).allows_tool("anything")


def test_to_entry_leaves_defaults_out_and_round_trips() -> None:
    entry = {"type": "http", "url": "https://x/mcp", "headers": {"A": "b"},
             "tool_timeout_sec": 120.0, "enabled": False}
    config = from_entry("s", entry)
    assert config.to_entry() == {"type": "http", "enabled": False, "headers": {"A": "b"},
                                 "tool_timeout_sec": 120.0, "url": "https://x/mcp"}
    assert from_entry("s", config.to_entry()) == config
    assert from_entry("s", {"command": "x"}).to_entry() == {"type": "stdio", "command": "x"}
