"""`mcpkit mcp …`, `mcpkit tools`, `mcpkit call`, driven as a user would: a subprocess per
command, real config files in a temporary HOME, real servers (`fixture_server.py`,
`cli_server.py`, one shared HTTP server)."""

from __future__ import annotations

import json
import os
import pty
import re
import stat
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.procs import free_port, mcp_http_server

HERE = Path(__file__).parent
SRC = str(HERE.parent.parent / "src")
FIXTURE = str(HERE / "fixture_server.py")
SHAPES = str(HERE / "cli_server.py")
PY = sys.executable
BROKEN = [PY, "-c", "import sys; sys.stdin.readline(); sys.exit('broken: no API key')"]
"""A server that dies at its first message (having read it, so the client always sees its
output end and its stderr)."""
RUN_TIMEOUT_S = 30


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@dataclass
class User:
    """A user with a HOME and a project directory of their own."""

    home: Path
    project: Path
    env: dict[str, str]

    def __call__(self, *argv: str, cwd: Path | None = None, stdin: str | None = None,
                 **env: str) -> Result:
        proc = subprocess.run([PY, "-m", "mcpkit", *argv], cwd=cwd or self.project,
                              env={**self.env, **env}, input=stdin, capture_output=True,
                              encoding="utf-8", timeout=RUN_TIMEOUT_S, check=False)
        # Expected failures are one line and a hint, never a traceback.
        assert "Traceback" not in proc.stderr, proc.stderr
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def ok(self, *argv: str, **kwargs: Any) -> Result:
        result = self(*argv, **kwargs)
        assert result.code == 0, result
        return result

    def fails(self, code: int, *argv: str, **kwargs: Any) -> Result:
        result = self(*argv, **kwargs)
        assert result.code == code, result
        assert result.out == "" or argv[-1] == "--json" or "--json" in argv, result
        return result

    @property
    def user_file(self) -> Path:
        return self.home / ".config" / "mcpkit" / "mcp.json"

    @property
    def project_file(self) -> Path:
        return self.project / ".mcpkit" / "mcp.json"

    def add_fixture(self, name: str, *flags: str, scope: str = "user") -> None:
        self.ok("mcp", "add", name, "--scope", scope, "--", PY, FIXTURE, "--name", name, *flags)

    def add_broken(self) -> None:
        self.ok("mcp", "add", "broken", "--", *BROKEN)

    def write(self, path: Path, servers: dict[str, Any]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"mcpServers": servers}))

    def servers(self, path: Path) -> dict[str, Any]:
        servers: dict[str, Any] = json.loads(path.read_text())["mcpServers"]
        return servers


@pytest.fixture
def user(tmp_path: Path) -> User:
    home, project = tmp_path / "home", tmp_path / "project"
    home.mkdir()
    project.mkdir()
    # This checkout's mcpkit, whatever the venv has installed.
    return User(home, project, {"HOME": str(home), "PATH": os.environ["PATH"],
                                "PYTHONPATH": SRC})


@pytest.fixture(scope="module")
def http_url() -> Iterator[str]:
    port = free_port()
    with mcp_http_server([PY, FIXTURE, "--name", "web", "--http", str(port)], port) as url:
        yield url


def error_line(result: Result) -> str:
    """The `mcpkit: error:` line (argparse's own errors say `mcpkit …: error:`)."""
    lines = [line for line in result.err.splitlines() if ": error: " in line]
    assert lines, result
    return lines[0]


def hint(result: Result) -> str:
    lines = [line for line in result.err.splitlines() if line.startswith("hint: ")]
    assert lines, result
    return lines[0]


# --- add, add-json -----------------------------------------------------------------------------


def test_add_a_command_server_to_the_user_file(user: User) -> None:
    done = user.ok("mcp", "add", "gh", "--env", "DEBUG=1", "--env", "GH_TOKEN=${GH_TOKEN}",
                   "--env-var", "HOME", "--cwd", "/srv", "--startup-timeout", "5",
                   "--tool-timeout", "90", "--", "npx", "-y", "server-github", "--", "--x")
    assert done.out == f"added stdio server gh in {user.user_file} (user scope)\n"
    assert user.servers(user.user_file) == {"gh": {
        "type": "stdio", "command": "npx", "args": ["-y", "server-github", "--", "--x"],
        "env": {"DEBUG": "1", "GH_TOKEN": "${GH_TOKEN}"},  # the reference, not the secret
        "env_vars": ["HOME"], "cwd": "/srv", "startup_timeout_sec": 5.0,
        "tool_timeout_sec": 90.0}}
    assert stat.S_IMODE(user.user_file.stat().st_mode) == 0o600

    again = user.fails(2, "mcp", "add", "gh", "--", "other")
    assert error_line(again) == f"mcpkit: error: MCP server 'gh' already exists in {user.user_file}"
    assert "--force" in hint(again)
    assert user.ok("mcp", "add", "gh", "--force", "--", "other").out.startswith("replaced ")
    assert user.servers(user.user_file)["gh"] == {"type": "stdio", "command": "other"}


def test_xdg_config_home_is_honoured(user: User, tmp_path: Path) -> None:
    xdg = tmp_path / "xdg"
    user.ok("mcp", "add", "a", "--", "cmd", XDG_CONFIG_HOME=str(xdg))
    assert user.servers(xdg / "mcpkit" / "mcp.json") == {"a": {"type": "stdio", "command": "cmd"}}
    assert not user.user_file.exists()


def test_add_url_servers(user: User) -> None:
    user.ok("mcp", "add", "docs", "--url", "https://example.com/mcp", "--header",
            "Authorization: Bearer ${DOCS_TOKEN}", "--header", "X-Team:core")
    user.ok("mcp", "add", "live", "--url", "wss://example.com/ws", "--disabled")
    user.ok("mcp", "add", "old", "--url", "https://example.com/sse", "--transport", "sse",
            "--bearer-token-env-var", "OLD_TOKEN")
    assert user.servers(user.user_file) == {
        "docs": {"type": "http", "url": "https://example.com/mcp",
                 "headers": {"Authorization": "Bearer ${DOCS_TOKEN}", "X-Team": "core"}},
        "live": {"type": "ws", "url": "wss://example.com/ws", "enabled": False},
        "old": {"type": "sse", "url": "https://example.com/sse",
                "bearer_token_env_var": "OLD_TOKEN"}}


@pytest.mark.parametrize(("argv", "message", "hinted"), [
    (["mcp", "add", "x"], "mcp add x: no server given", "-- COMMAND ARGS"),
    (["mcp", "add", "x", "npx", "-y", "srv"], "a command with options goes after --",
     "mcpkit mcp add x -- npx -y srv"),
    (["mcp", "add", "x", "--url", "http://h/mcp", "--", "cmd"], "not both", None),
    (["mcp", "add", "x", "--env", "NOVALUE", "--", "cmd"], "--env expects NAME=VALUE",
     "--env DEBUG=1"),
    (["mcp", "add", "x", "--header", "NoColon", "--url", "http://h/mcp"],
     "--header expects 'Name: value'", "Authorization"),
    (["mcp", "add", "x", "--env", "A=1", "--url", "http://h/mcp"],
     "--env only applies to a command (stdio) server", None),
    (["mcp", "add", "x", "--header", "A: 1", "--", "cmd"], "--header only applies to a URL",
     None),
    (["mcp", "add", "x", "--url", "http://h/mcp", "--transport", "ws"],
     "a ws url starts with ws:// or wss://", None),
    (["mcp", "add", "bad name", "--", "cmd"], "a server name is 1-64 characters", None),
    (["mcp", "add", "x", "--startup-timeout", "0", "--", "cmd"],
     "startup_timeout_sec\" must be between 0 and 3600", None),
])
def test_add_refuses_with_one_line_and_writes_nothing(user: User, argv: list[str], message: str,
                                                      hinted: str | None) -> None:
    result = user.fails(2, *argv)
    assert error_line(result).startswith("mcpkit: error: ")
    assert message in error_line(result)
    if hinted is not None:
        assert hinted in hint(result)
    assert not user.user_file.exists()


def test_add_argparse_errors(user: User) -> None:
    unknown = user.fails(2, "mcp", "add", "x", "--bogus", "--", "cmd")
    assert "unrecognized arguments: --bogus" in unknown.err
    missing = user.fails(2, "mcp", "add", "--", "cmd")
    assert "required: name" in missing.err
    assert not user.user_file.exists()


def test_add_json(user: User) -> None:
    entry = {"url": "${BASE:-https://example.com}/mcp", "headers": {"X-Key": "${KEY}"}}
    done = user.ok("mcp", "add-json", "api", json.dumps(entry), "--scope", "project")
    assert done.out == f"added http server api in {user.project_file} (project scope)\n"
    assert user.servers(user.project_file) == {"api": entry}
    user.ok("mcp", "add-json", "piped", "-", stdin='{"command": "srv", "args": ["-v"]}')
    assert user.servers(user.user_file) == {"piped": {"command": "srv", "args": ["-v"]}}

    bad = user.fails(2, "mcp", "add-json", "x", '{"command": "srv",}')
    assert error_line(bad) == ("mcpkit: error: the entry is not valid JSON: Expecting property "
                               "name enclosed in double quotes at line 1, column 19")
    assert "mcpkit mcp add-json x '{" in hint(bad)
    not_object = user.fails(2, "mcp", "add-json", "x", '["srv"]')
    assert "server 'x': must be an object, not a list" in error_line(not_object)
    typo = user.fails(2, "mcp", "add-json", "x", '{"comand": "srv"}')
    assert "unknown key(s) comand" in error_line(typo)
    duplicate = user.fails(2, "mcp", "add-json", "api", '{"command": "srv"}',
                           "--scope", "project")
    assert "already exists" in error_line(duplicate)


# --- list, get, scopes -------------------------------------------------------------------------


def test_nothing_configured(user: User) -> None:
    empty = user.ok("mcp", "list")
    assert empty.out == "no MCP servers configured\n"
    assert "mcpkit mcp add" in hint(empty)
    assert user.ok("mcp", "list", "--json").json() == []
    unknown = user.fails(2, "mcp", "get", "x")
    assert error_line(unknown) == "mcpkit: error: no MCP server named 'x'"
    assert "no servers are configured" in hint(unknown)


def test_project_entries_override_user_entries(user: User) -> None:
    user.ok("mcp", "add", "shared", "--", "user-cmd")
    user.ok("mcp", "add", "mine", "--", "user-only")
    added = user.ok("mcp", "add", "shared", "--scope", "project", "--", "project-cmd")
    assert f"note: the user config also has shared ({user.user_file}); this one overrides it" \
        in added.out
    sub = user.project / "src" / "deep"
    sub.mkdir(parents=True)
    # From a subdirectory the nearest project file counts.
    rows = user.ok("mcp", "list", "--no-connect", "--json", cwd=sub).json()
    assert [(r["name"], r["scope"], r["target"], r["status"]) for r in rows] == [
        ("shared", "project", "project-cmd", "enabled"),
        ("mine", "user", "user-only", "enabled")]
    got = user.ok("mcp", "get", "shared", "--json", cwd=sub).json()
    assert (got["scope"], got["path"], got["overrides"]) == (
        "project", str(user.project_file), str(user.user_file))
    # `--scope project` from a subdirectory edits that same file, not a new one there.
    user.ok("mcp", "add", "proj2", "--scope", "project", "--", "p2", cwd=sub)
    assert not (sub / ".mcpkit").exists()
    assert list(user.servers(user.project_file)) == ["shared", "proj2"]

    # remove/disable find the project entry first, then the user's; --scope picks.
    disabled = user.ok("mcp", "disable", "shared", "--scope", "user")
    assert disabled.out == f"disabled shared in {user.user_file} (user scope)\n"
    assert user.servers(user.project_file)["shared"].get("enabled") is None
    removed = user.ok("mcp", "remove", "shared")
    assert removed.out.splitlines() == [
        f"removed shared from {user.project_file} (project scope)",
        f"note: the user config still has shared ({user.user_file})"]
    rows = user.ok("mcp", "list", "--no-connect", "--json").json()
    assert [(r["name"], r["scope"], r["enabled"]) for r in rows] == [
        ("shared", "user", False), ("mine", "user", True), ("proj2", "project", True)]
    gone = user.fails(2, "mcp", "remove", "mine", "--scope", "project")
    assert error_line(gone) == ("mcpkit: error: no MCP server named 'mine' in the project "
                                f"config ({user.project_file})")
    assert hint(gone) == "hint: known servers: proj2"


def test_enable_and_disable_show_in_list(user: User) -> None:
    user.add_fixture("fx")
    user.ok("mcp", "add", "other", "--", PY, FIXTURE, "--name", "other", "--fail")
    assert user.ok("mcp", "disable", "other").out.startswith("disabled other in ")
    assert user.servers(user.user_file)["other"]["enabled"] is False
    assert user.ok("mcp", "disable", "other").out.startswith("other is already disabled")
    rows = {r["name"]: r for r in user.ok("mcp", "list", "--json").json()}
    assert (rows["other"]["enabled"], rows["other"]["status"], rows["other"]["tools"]) == (
        False, "disabled", None)  # not started, so it did not fail
    assert (rows["fx"]["status"], rows["fx"]["tools"]) == ("ready", 8)
    assert user.ok("mcp", "enable", "other").out.startswith("enabled other in ")
    assert "enabled" not in user.servers(user.user_file)["other"]
    rows = {r["name"]: r for r in user.ok("mcp", "list", "--no-connect", "--json").json()}
    assert (rows["other"]["enabled"], rows["other"]["status"]) == (True, "enabled")
    unknown = user.fails(2, "mcp", "enable", "nope")
    assert hint(unknown) == "hint: known servers: fx, other"


def test_list_connects_and_reports_each_server(user: User) -> None:
    user.add_fixture("fx")
    user.add_broken()
    user.add_fixture("off")
    user.ok("mcp", "disable", "off")
    user.ok("mcp", "add", "needs", "--env", "T=${NOT_SET_ANYWHERE}", "--", "cmd")
    table = user("mcp", "list")
    assert table.code == 1  # as `mcp test`: a server failed
    lines = table.out.splitlines()
    assert lines[0].split() == ["NAME", "SCOPE", "TRANSPORT", "TARGET", "STATUS", "TOOLS"]
    rows = {line.split()[0]: line.split() for line in lines[1:5]}
    assert rows["fx"][-2:] == ["ready", "8"]
    assert rows["broken"][-2:] == ["failed", "-"]
    assert rows["off"][-2:] == ["disabled", "-"]
    assert rows["needs"][-2:] == ["invalid", "-"]
    # the problems, each with its fix, on stderr (no progress line: not a terminal)
    problems = table.err.splitlines()
    assert any(line.startswith("mcpkit: error: broken (stdio) failed: ") and
               "no API key" in line for line in problems), problems
    assert any(line.startswith("mcpkit: error: needs is invalid: ") and
               "NOT_SET_ANYWHERE" in line for line in problems), problems
    assert "hint: run the command yourself to see what it says: " in table.err

    listed = user("mcp", "list", "--json")
    assert listed.code == 1
    report = {r["name"]: r for r in listed.json()}
    assert set(report["fx"]) == {"name", "scope", "type", "target", "enabled", "status", "error",
                                 "tools", "startup_ms", "login"}
    assert report["fx"]["type"] == "stdio" and report["fx"]["target"].endswith("--name fx")
    assert report["fx"]["error"] is None and isinstance(report["fx"]["startup_ms"], int)
    assert report["broken"]["status"] == "failed"
    assert "exit code 1" in report["broken"]["error"]
    assert report["needs"]["status"] == "invalid"

    narrow = user("mcp", "list", "--no-connect", COLUMNS="70")
    assert all(len(line) <= 70 for line in narrow.out.splitlines()), narrow.out
    assert "…" in narrow.out


def test_get_masks_secrets(user: User) -> None:
    user.write(user.user_file, {
        "api": {"command": "srv", "args": ["--port", "1"],
                "env": {"GITHUB_TOKEN": "ghp_supersecretvalue123", "DB_PASSWORD": "hunter2",
                        "API_KEY": "${API_KEY}", "Auth_Header": "Bearer ${TOKEN}",
                        "DEBUG": "verbose"}},
        "web": {"url": "https://u:pa55word@example.com/mcp?api_key=k3y&mode=fast",
                "headers": {"Authorization": "Bearer sk-live-0123456789",
                            "X-Short": "abc", "X-Ref": "${REF}"},
                "bearer_token_env_var": "WEB_TOKEN", "enabled_tools": ["read_*"]}})
    secrets = ("supersecret", "hunter2", "pa55word", "k3y", "0123456789", "abc",
               "token-value-from-env")
    env = {"WEB_TOKEN": "token-value-from-env"}
    text = user.ok("mcp", "get", "api", **env).out
    assert "GITHUB_TOKEN=ghp_…****" in text and "DB_PASSWORD=****" in text
    assert "API_KEY=${API_KEY}" in text and "Auth_Header=Bearer ${TOKEN}" in text
    assert "DEBUG=verbose" in text
    assert re.search(r"args: +--port 1", text)
    web = user.ok("mcp", "get", "web", **env).out
    assert "Authorization: Bear…****" in web and "X-Short: ****" in web
    assert "X-Ref: ${REF}" in web and "WEB_TOKEN" in web
    assert re.search(r"enabled_tools: +read_\*", web)
    as_json = user.ok("mcp", "get", "web", "--json", **env).json()
    assert as_json["url"] == "https://u:****@example.com/mcp?api_key=****&mode=fast"
    assert as_json["headers"] == {"Authorization": "Bear…****", "X-Short": "****",
                                  "X-Ref": "${REF}"}
    assert as_json["bearer_token_env_var"] == "WEB_TOKEN"
    assert (as_json["type"], as_json["enabled"], as_json["tool_timeout_sec"]) == ("http", True, 60)
    listed = user.ok("mcp", "list", "--no-connect", "--json", **env).out
    for output in (text, web, json.dumps(as_json), listed):
        assert not any(secret in output for secret in secrets), output


def test_broken_config_files(user: User) -> None:
    user.user_file.parent.mkdir(parents=True)
    user.user_file.write_text('{"mcpServers": {"a": {"command": "x"},\n}}')
    for argv in (["mcp", "list"], ["mcp", "add", "b", "--", "y"], ["tools"]):
        broken = user.fails(2, *argv)
        assert error_line(broken) == (f"mcpkit: error: {user.user_file}: invalid JSON at line 2, "
                                      "column 1: Expecting property name enclosed in double "
                                      "quotes")
    user.user_file.write_text('{"mcpServers": {"a": {"command": "x", "typo": 1}}}')
    invalid = user.fails(2, "mcp", "get", "a")
    assert "unknown key(s) typo" in error_line(invalid)
    assert hint(invalid) == f"hint: fix it in {user.user_file}"
    (user.project / ".mcpkit").mkdir()
    (user.project / ".mcpkit" / "mcp.toml").write_text('[mcp_servers.t]\ncommand = "x"\n')
    toml = user.fails(2, "mcp", "add", "c", "--scope", "project", "--", "y")
    assert "editing TOML is not supported" in error_line(toml)
    listed = user("mcp", "list", "--no-connect", "--json")
    assert listed.code == 1  # an invalid entry cannot start
    rows = listed.json()
    assert [(r["name"], r["scope"], r["status"]) for r in rows] == [
        ("a", "user", "invalid"), ("t", "project", "enabled")]


# --- test --------------------------------------------------------------------------------------


def test_test_a_working_and_a_failing_server(user: User) -> None:
    user.add_fixture("fx")
    user.add_broken()
    ok = user.ok("mcp", "test", "fx")
    assert re.fullmatch(r"ok: fx \(stdio\) — connected in \d+ ms, 8 tools \(era modern, "
                        r"protocol 2026-07-28, server fixture-fx 1\.0\.0\)\n", ok.out), ok.out
    report = user.ok("mcp", "test", "fx", "--json").json()
    assert (report["ok"], report["status"], report["era"], report["server"]) == (
        True, "ready", "modern", {"name": "fixture-fx", "version": "1.0.0"})
    assert "echo" in report["tools"] and isinstance(report["startup_ms"], int)

    failed = user.fails(1, "mcp", "test", "broken")
    assert error_line(failed).startswith("mcpkit: error: broken (stdio) failed: the server "
                                         "process")
    assert "exit code 1" in failed.err and "no API key" in failed.err  # the stderr tail
    assert hint(failed).startswith("hint: run the command yourself to see what it says: ")
    report = user.fails(1, "mcp", "test", "broken", "--json").json()
    assert (report["ok"], report["status"]) == (False, "failed")
    assert "no API key" in report["error"]

    unknown = user.fails(2, "mcp", "test", "nope")
    assert hint(unknown) == "hint: known servers: fx, broken"


def test_test_slow_and_unreachable_servers(user: User) -> None:
    user.add_fixture("slow", "--delay", "5")
    slow = user.fails(1, "mcp", "test", "slow", "--timeout", "0.5")
    assert "did not start within 0.5 s" in error_line(slow)
    assert "--timeout" in hint(slow)
    user.ok("mcp", "add", "gone", "--url", f"http://127.0.0.1:{free_port()}/mcp")
    gone = user.fails(1, "mcp", "test", "gone")
    assert re.fullmatch(r"mcpkit: error: gone: nothing is listening at 127\.0\.0\.1:\d+ "
                        r"\(connection refused\)", error_line(gone)), gone
    assert hint(gone).startswith("hint: start the server, or check the host and port of "
                                 "http://127.0.0.1:")
    user.ok("mcp", "add", "needs-token", "--url", "http://127.0.0.1:1/mcp",
            "--bearer-token-env-var", "NEEDED_TOKEN")
    unset = user.fails(2, "mcp", "test", "needs-token")
    assert "bearer_token_env_var NEEDED_TOKEN is not set" in error_line(unset)


def test_test_tools_and_call_over_http(user: User, http_url: str) -> None:
    user.ok("mcp", "add", "web", "--url", http_url, "--header", "X-Trace: ${TRACE:-none}")
    assert user.ok("mcp", "test", "web").out.startswith("ok: web (http) — connected in ")
    assert user.ok("call", "web", "echo", "text=over http").out == "web: over http\n"
    tools = user.ok("tools", "web", "--json").json()
    assert {t["exposed_name"] for t in tools} >= {"mcp__web__echo", "mcp__web__big"}


# --- tools -------------------------------------------------------------------------------------


def test_tools_lists_names_descriptions_and_parameters(user: User) -> None:
    user.add_fixture("fx")
    user.ok("mcp", "add", "shapes", "--", PY, SHAPES)
    user.add_fixture("off")
    user.ok("mcp", "disable", "off")
    listed = user.ok("tools")
    blocks = listed.out.split("\n\n")
    assert [block.splitlines()[0] for block in blocks] == ["fx (8 tools)", "shapes (5 tools)"]
    assert ("  echo → mcp__fx__echo  [read-only]\n"
            "      Echo the text back.\n"
            "      text: string (required)\n") in listed.out
    assert "  crash → mcp__fx__crash\n      Exit the server process.\n      (no parameters)" \
        in listed.out
    assert ("      Echo the arguments with their JSON types.\n"
            "      n: integer (required)\n"
            "      flag: boolean (required)\n"
            "      tags: array of string (required)\n"
            "      text: string (required)\n"
            "      extra: object | null = null\n") in listed.out
    assert "More lines" not in listed.out  # only the description's first line

    tools = user.ok("tools", "shapes", "--json").json()
    assert [t["name"] for t in tools] == ["shapes", "data", "typed", "refuse", "slow"]
    typed = tools[2]
    assert (typed["server"], typed["exposed_name"]) == ("shapes", "mcp__shapes__typed")
    assert typed["inputSchema"]["required"] == ["n", "flag", "tags", "text"]

    off = user.fails(2, "tools", "off")
    assert error_line(off) == "mcpkit: error: MCP server 'off' is disabled"
    assert hint(off) == "hint: enable it with `mcpkit mcp enable off`"
    unknown = user.fails(2, "tools", "nope")
    assert hint(unknown) == "hint: known servers: fx, shapes, off"


def test_tools_with_a_failing_server(user: User) -> None:
    user.add_fixture("fx", "--tools", "echo")
    user.add_broken()
    partial = user("tools")
    assert partial.code == 1
    assert partial.out.startswith("fx (1 tool)\n  echo → mcp__fx__echo")
    assert "mcpkit: error: broken (stdio) failed: " in partial.err
    assert "no API key" in partial.err
    assert hint(partial).startswith("hint: run the command yourself to see what it says: ")
    as_json = user("tools", "--json")
    assert as_json.code == 1
    assert [t["exposed_name"] for t in as_json.json()] == ["mcp__fx__echo"]
    one = user.fails(1, "tools", "broken")
    assert "broken (stdio) failed" in error_line(one)


# --- call --------------------------------------------------------------------------------------


def test_call_prints_results(user: User) -> None:
    user.add_fixture("fx")
    user.ok("mcp", "add", "shapes", "--", PY, SHAPES)
    assert user.ok("call", "fx", "echo", "text=hello world").out == "fx: hello world\n"
    # --args and pairs merge, pairs win; pairs may follow options; `--` protects a `-` pair.
    assert user.ok("call", "fx", "echo", "--args", '{"text": "a"}', "text=b").out == "fx: b\n"
    assert user.ok("call", "fx", "echo", "--timeout", "20", "--", "text=--d").out == "fx: --d\n"
    # Values are JSON when they parse, except for parameters declared as strings.
    typed = user.ok("call", "shapes", "typed", "n=3", "flag=true", 'tags=["a", "b"]', "text=42",
                    'extra={"k": 1}').out
    assert json.loads(typed) == {"n": 3, "flag": True, "tags": ["a", "b"], "text": "42",
                                 "extra": {"k": 1}}
    assert user.ok("call", "shapes", "shapes").out == (
        "[image: image/png, 8 bytes]\n[resource link: file:///tmp/report.txt (report)]\n")
    assert json.loads(user.ok("call", "shapes", "data").out) == {"answer": 42, "unit": "none"}

    wire = user.ok("call", "fx", "echo", "text=x", "--json").json()
    assert wire["content"] == [{"type": "text", "text": "fx: x"}]
    assert "isError" not in wire and wire["resultType"] == "complete"
    data = user.ok("call", "shapes", "data", "--json").json()
    assert data["structuredContent"] == {"answer": 42, "unit": "none"}


def test_call_tool_errors_and_usage_errors(user: User) -> None:
    user.add_fixture("fx")
    user.add_broken()
    user.ok("mcp", "add", "shapes", "--", PY, SHAPES)
    refused = user.fails(1, "call", "shapes", "refuse", "reason=no")
    assert (refused.out, refused.err) == ("", "refused: no\n")
    wire = user.fails(1, "call", "shapes", "refuse", "reason=no", "--json").json()
    assert wire["isError"] is True and wire["content"][0]["text"] == "refused: no"

    slow = user.fails(1, "call", "shapes", "slow", "seconds=10", "--timeout", "0.5")
    assert error_line(slow) == "mcpkit: error: shapes slow: no answer within 0.5 s"
    assert "--timeout" in hint(slow)

    bad_json = user.fails(2, "call", "fx", "echo", "--args", '{"text": }')
    assert error_line(bad_json) == ("mcpkit: error: --args is not valid JSON: Expecting value "
                                    "at line 1, column 10")
    not_object = user.fails(2, "call", "fx", "echo", "--args", '["x"]')
    assert "--args must be a JSON object of the tool's arguments, not a list" in \
        error_line(not_object)
    bad_pair = user.fails(2, "call", "fx", "echo", "text")
    assert error_line(bad_pair) == "mcpkit: error: expected key=value, not 'text'"
    assert "key=value" in hint(bad_pair)
    option = user.fails(2, "call", "fx", "echo", "text=x", "--bogus")
    assert "unrecognized arguments: --bogus" in option.err
    no_tool = user.fails(2, "call", "fx", "nope")
    assert error_line(no_tool) == "mcpkit: error: fx has no tool named 'nope'"
    assert hint(no_tool).startswith("hint: its tools: echo, write_note, env")
    no_server = user.fails(2, "call", "nope", "echo")
    assert hint(no_server) == "hint: known servers: fx, broken, shapes"
    down = user.fails(1, "call", "broken", "echo", "text=x")
    assert error_line(down).startswith("mcpkit: error: broken (stdio) failed: ")


# --- import ------------------------------------------------------------------------------------


def test_import_claude_project_file_by_default(user: User) -> None:
    (user.project / ".mcp.json").write_text(json.dumps({"mcpServers": {
        "files": {"type": "stdio", "command": "npx",
                  "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/src"],
                  "env": {"PRICE": "5$"}},
        "api": {"type": "http", "url": "https://api.example.com/mcp?key=s3cr3t",
                "headers": {"Authorization": "Bearer ${API_KEY}"}}}}))
    user.ok("mcp", "add", "files", "--", "mine")
    dry = user.ok("mcp", "import", "--from", "claude", "--dry-run")
    assert dry.out.splitlines() == [
        f"would import 1 server from {user.project / '.mcp.json'} into {user.user_file} "
        "(user scope):",
        "  + api  (http: https://api.example.com/mcp?key=****)",
        f"skipped 1 already in {user.user_file} (--force replaces them):",
        "  = files",
        "dry run: nothing was written"]
    assert list(user.servers(user.user_file)) == ["files"]
    done = user.ok("mcp", "import", "--from", "claude")
    assert done.out.startswith("imported 1 server from ")
    assert user.servers(user.user_file)["api"]["headers"] == {"Authorization": "Bearer ${API_KEY}"}
    assert user.servers(user.user_file)["files"] == {"type": "stdio", "command": "mine"}
    forced = user.ok("mcp", "import", "--from", "claude", "--force", "--scope", "project")
    assert forced.out.startswith(f"imported 2 servers from {user.project / '.mcp.json'} into "
                                 f"{user.project_file} (project scope):")
    assert user.servers(user.project_file)["files"]["env"] == {"PRICE": "5$$"}


def test_import_from_every_other_tool(user: User) -> None:
    cursor = user.project / ".cursor" / "mcp.json"
    cursor.parent.mkdir()
    cursor.write_text("""{
  // Cursor's file: JSONC
  "mcpServers": {
    "browser": {"command": "npx", "args": ["-y", "browser-mcp"],
                "env": {"TOKEN": "${env:BROWSER_TOKEN}"}},
    "remote": {"url": "https://mcp.example.com/sse"},
  }
}""")
    assert "  + browser  (stdio: npx -y browser-mcp)" in \
        user.ok("mcp", "import", "--from", "cursor").out
    assert user.servers(user.user_file)["browser"]["env"] == {"TOKEN": "${BROWSER_TOKEN}"}

    vscode = user.project / ".vscode" / "mcp.json"
    vscode.parent.mkdir()
    vscode.write_text("""{
  "inputs": [{"type": "promptString", "id": "api-key", "description": "API Key",
              "password": true}],
  "servers": {
    "perplexity": {"type": "stdio", "command": "docker", "args": ["run", "-i", "pplx"],
                   "env": {"PPLX_KEY": "${input:api-key}"}, "dev": {"watch": "x"}},
  },
}""")
    imported = user.ok("mcp", "import", "--from", "vscode", "--scope", "project")
    assert "  + perplexity  (stdio: docker run -i pplx)" in imported.out
    assert imported.err.splitlines() == [
        "warning: server 'perplexity': ${input:api-key} (API Key) is prompted for by VS Code; "
        "it became ${API_KEY}: set API_KEY in the environment",
        "warning: server 'perplexity': not imported (no mcpkit equivalent): dev"]

    codex = user.home / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text("""model = "o3"

[mcp_servers.docs]
command = "uvx"
args = ["docs-mcp"]
startup_timeout_ms = 20000

[mcp_servers.github]
url = "https://api.githubcopilot.com/mcp/"
bearer_token_env_var = "GITHUB_PAT"
""")
    user.ok("mcp", "import", "--from", "codex")
    assert user.servers(user.user_file)["docs"] == {"type": "stdio", "command": "uvx",
                                                    "args": ["docs-mcp"],
                                                    "startup_timeout_sec": 20.0}
    assert user.servers(user.user_file)["github"]["bearer_token_env_var"] == "GITHUB_PAT"

    opencode = user.project / "elsewhere" / "opencode.jsonc"
    opencode.parent.mkdir()
    opencode.write_text("""{
  "$schema": "https://opencode.ai/config.json",
  "mcp": {
    "local-one": {"type": "local", "command": ["bun", "x", "my-mcp"], "enabled": true,
                  "environment": {"TOKEN": "{env:MY_TOKEN}"}},
    "jira": {"type": "remote", "url": "https://jira.example.com/mcp", "enabled": false},
  },
}""")
    user.ok("mcp", "import", "--from", "opencode", str(opencode))
    rows = {r["name"]: r for r in user.ok("mcp", "list", "--no-connect", "--json").json()}
    assert rows["local-one"]["target"] == "bun x my-mcp"
    assert (rows["jira"]["type"], rows["jira"]["enabled"]) == ("http", False)
    assert rows["perplexity"]["scope"] == "project"


def test_import_errors(user: User) -> None:
    nothing = user.fails(1, "mcp", "import", "--from", "claude")
    assert error_line(nothing).startswith(
        f"mcpkit: error: no claude config found; looked for {user.home / '.claude.json'}, "
        f"{user.project / '.mcp.json'}")
    assert hint(nothing) == "hint: give its path: mcpkit mcp import --from claude PATH"
    missing = user.fails(1, "mcp", "import", "--from", "cursor", "no/such.json")
    assert error_line(missing) == "mcpkit: error: no such file: no/such.json"
    unknown = user.fails(2, "mcp", "import", "--from", "emacs")
    assert "argument --from: invalid choice: 'emacs'" in unknown.err
    empty = user.project / "empty.json"
    empty.write_text('{"mcpServers": {}}')
    nothing_there = user.fails(1, "mcp", "import", "--from", "claude", str(empty))
    assert error_line(nothing_there) == f"mcpkit: error: no MCP servers to import in {empty}"
    broken = user.project / "broken.json"
    broken.write_text('{"mcpServers": ')
    bad = user.fails(2, "mcp", "import", "--from", "claude", str(broken))
    assert f"{broken}: invalid JSON at line 1, column 16" in error_line(bad)
    assert not user.user_file.exists()


# --- progress ----------------------------------------------------------------------------------


def test_progress_line_when_stderr_is_a_terminal(user: User) -> None:
    user.add_fixture("lazy", "--delay", "0.5")
    user.add_fixture("quick")
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([PY, "-m", "mcpkit", "mcp", "list"], cwd=user.project,
                              env=user.env, stdout=subprocess.PIPE, stderr=follower,
                              timeout=RUN_TIMEOUT_S, check=False)
        os.close(follower)
        drawn = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the terminal's other end is closed: all read
                break
            if not chunk:
                break
            drawn += chunk
    finally:
        os.close(leader)
    assert proc.returncode == 0
    assert "connecting to 2 servers… " in drawn.decode()
    assert "(waiting for lazy" in drawn.decode()
    assert drawn.endswith(b"\r\x1b[K")  # the line is cleared before the table
    assert b"\x1b" not in proc.stdout  # no escapes in the table
