"""Issue 21, as a newcomer types it: `mcpkit mcp add` in the Claude Code and Codex spellings,
hints that do what they say, failures that name their cause and fix (401, refused, 404, TLS,
not MCP), `-v` on success, `mcp list`'s exit code and narrow terminals, and `mcp import` of
every file a tool keeps. Each command is a subprocess with HOME and the project in tmp dirs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.manager.test_cli import PY, SRC, User, error_line, hint
from tests.procs import free_port, mcp_http_server, stop_process, wait_for_port

from mcpkit.manager.cli_render import table

PLAIN_HTTP = str(Path(__file__).parent / "plain_http.py")
TOKEN = "first-contact-token-5ec2et"


def suggested(result: Any) -> list[str]:
    """The `mcpkit mcp add …` command a hint suggests, as argv after `mcpkit`."""
    found = re.search(r"mcpkit (mcp add .*?)(?:`|, or |\?$|$)", hint(result))
    assert found, result
    return shlex.split(found.group(1))


# --- mcp add ------------------------------------------------------------------------------------


def test_add_accepts_the_claude_code_and_codex_spellings(user: User) -> None:
    url = "http://127.0.0.1:9/mcp"
    user.ok("mcp", "add", "--transport", "http", "a", url)             # claude, options first
    user.ok("mcp", "add", "b", "--transport", "http", url)             # options after NAME
    user.ok("mcp", "add", "c", url, "-H", "X-Api-Key: k", "-H", "X-Team:core")  # no -t: http
    user.ok("mcp", "add", "-t", "sse", "d", "http://127.0.0.1:9/sse")
    user.ok("mcp", "add", "e", "wss://127.0.0.1:9/ws")                 # ws:// and wss://: ws
    user.ok("mcp", "add", "f", "--url", url, "--bearer-token-env-var", "F_TOKEN")  # codex
    user.ok("mcp", "add", "-t", "stdio", "-e", "A=1", "--env", "B=${B}", "g", "--",
            "npx", "-y", "pkg")
    user.ok("mcp", "add", "h", "npx", "pkg")                           # claude, without --
    assert user.servers(user.user_file) == {
        "a": {"type": "http", "url": url}, "b": {"type": "http", "url": url},
        "c": {"type": "http", "url": url, "headers": {"X-Api-Key": "k", "X-Team": "core"}},
        "d": {"type": "sse", "url": "http://127.0.0.1:9/sse"},
        "e": {"type": "ws", "url": "wss://127.0.0.1:9/ws"},
        "f": {"type": "http", "url": url, "bearer_token_env_var": "F_TOKEN"},
        "g": {"type": "stdio", "command": "npx", "args": ["-y", "pkg"],
              "env": {"A": "1", "B": "${B}"}},
        "h": {"type": "stdio", "command": "npx", "args": ["pkg"]}}


def test_scopes_user_project_local(user: User) -> None:
    user.ok("mcp", "add", "-s", "user", "same", "--", "user-cmd")
    user.ok("mcp", "add", "-s", "project", "same", "--", "project-cmd")
    local = user.ok("mcp", "add", "--scope", "local", "same", "--", "local-cmd")
    local_file = user.project / ".mcpkit" / "mcp.local.json"
    assert local.out.splitlines()[0] == f"added stdio server same in {local_file} (local scope)"
    assert "it overrides this one" not in local.out and "this one overrides it" in local.out
    # the local file is the user's own: a new one is kept out of git
    assert (user.project / ".mcpkit" / ".gitignore").read_text() == "mcp.local.json\n"
    # later scopes win, as in Claude Code: local over project over user
    (row,) = user.ok("mcp", "list", "--no-connect", "--json").json()
    assert (row["scope"], row["target"]) == ("local", "local-cmd")
    # a subdirectory of the project sees the same local file
    deeper = user.project / "src" / "pkg"
    deeper.mkdir(parents=True)
    (row,) = user.ok("mcp", "list", "--no-connect", "--json", cwd=deeper).json()
    assert row["scope"] == "local"
    user.ok("mcp", "remove", "same")  # the entry in effect: the local one
    assert user.servers(local_file) == {}
    (row,) = user.ok("mcp", "list", "--no-connect", "--json").json()
    assert row["scope"] == "project"
    bad = user.fails(2, "mcp", "add", "-s", "global", "x", "--", "cmd")
    assert "invalid choice: 'global' (choose from 'user', 'project', 'local')" in bad.err


def test_hints_suggest_what_was_meant_and_it_works(user: User) -> None:
    url = "http://127.0.0.1:9/mcp"
    # a URL after -- would be a stdio server running the URL: refused, and the hint adds it
    # as the URL server it is
    cases = [
        (["mcp", "add", "web", "--", url], "'http://127.0.0.1:9/mcp' is a URL, not a command",
         {"type": "http", "url": url}),
        (["mcp", "add", "-t", "stdio", "web", url], "--transport stdio runs a command",
         {"type": "http", "url": url}),
        (["mcp", "add", "web", "localhost:8000/mcp"], "looks like a server's address",
         {"type": "http", "url": "http://localhost:8000/mcp"}),
        (["mcp", "add", "-e", "DEBUG=1", "web", "npx", "-y", "pkg"],
         "a command with options goes after --",
         {"type": "stdio", "command": "npx", "args": ["-y", "pkg"], "env": {"DEBUG": "1"}}),
    ]
    for argv, message, meant in cases:
        refused = user.fails(2, *argv)
        assert message in error_line(refused), refused
        assert not user.user_file.exists()
        user.ok(*suggested(refused))
        assert user.servers(user.user_file) == {"web": meant}, argv
        user.user_file.unlink()
    secret = user.fails(2, "mcp", "add", "web", "-H", f"Authorization: Bearer {TOKEN}", "--",
                        url)
    assert TOKEN not in secret.err  # the hint repeats the header, masked
    nothing = user.fails(2, "mcp", "add", "web")
    assert hint(nothing) == ("hint: give its URL: mcpkit mcp add web URL, or its command after "
                             "--: mcpkit mcp add web -- COMMAND ARGS...")
    empty = user.ok("mcp", "list")
    assert "`mcpkit mcp add NAME URL` or `mcpkit mcp add NAME -- COMMAND ARGS...`" in empty.err


# --- failures, each with its cause and fix ------------------------------------------------------


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcpkit serve --token`: answers 401 without the token."""
    port = free_port()
    workspace = tmp_path_factory.mktemp("workspace")
    argv = [PY, "-m", "mcpkit", "serve", "--port", str(port), "--token", TOKEN,
            "--workspace", str(workspace)]
    with mcp_http_server(argv, port, env={"PYTHONPATH": SRC, "HOME": str(workspace),
                                          "TMPDIR": str(workspace),
                                          "PATH": os.environ["PATH"]}) as url:
        yield url


@pytest.fixture(scope="module")
def plain_http() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen([PY, PLAIN_HTTP, str(port)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process(proc)


def test_authentication_failures_say_so_and_how_to_fix_them(user: User, token_server: str
                                                              ) -> None:
    user.ok("mcp", "add", "--transport", "http", "tok", token_server)
    needs = user.fails(1, "mcp", "test", "tok")
    assert error_line(needs) == (f"mcpkit: error: tok requires authentication (HTTP 401 from "
                                 f"{token_server}: missing or wrong bearer token)")
    assert "is the server running" not in needs.err
    fix = suggested(needs)
    assert fix == ["mcp", "add", "--force", "--transport", "http", "tok", token_server,
                   "--header", "Authorization: Bearer ${TOK_TOKEN}"]
    assert "set TOK_TOKEN in the environment" in hint(needs)
    # the same words wherever the server is started; never "tok is failed"
    for argv in (["tools"], ["call", "tok", "read_file", "path=x"]):
        again = user.fails(1, *argv)
        assert "tok requires authentication (HTTP 401" in again.err
        assert "is failed" not in again.err and "is the server running" not in again.err
    report = user("mcp", "test", "tok", "--json")
    assert report.code == 1
    assert (report.json()["problem"], report.json()["hint"]) == ("auth", hint(needs)[6:])

    user.ok(*fix)  # the hint, as typed
    assert user.ok("mcp", "test", "tok", TOK_TOKEN=TOKEN).out.startswith("ok: tok (http)")
    wrong = user.fails(1, "mcp", "test", "tok", TOK_TOKEN="not-the-token")
    assert error_line(wrong).startswith("mcpkit: error: tok refused the token it was given "
                                        "(HTTP 401 from ")
    assert hint(wrong) == ("hint: check the token in its Authorization header: "
                           "`mcpkit mcp get tok` shows the entry")
    assert "not-the-token" not in wrong.err


def test_connection_failures_each_have_their_own_message(user: User, plain_http: str) -> None:
    refused_port = free_port()
    servers = {
        "down": f"http://127.0.0.1:{refused_port}/mcp",
        "path": f"http://{plain_http}/missing/mcp",
        "web": f"http://{plain_http}/mcp",
        "moved": f"http://{plain_http}/moved/mcp",
        "tls": f"https://{plain_http}/mcp",
    }
    user.write(user.user_file, {name: {"url": url} for name, url in servers.items()})
    expected = {
        "down": (f"down: nothing is listening at 127.0.0.1:{refused_port} (connection "
                 "refused)", "start the server, or check the host and port of"),
        "path": (f"path: nothing at {servers['path']} (HTTP 404)",
                 "the URL's path is wrong"),
        "web": (f"web: {servers['web']} does not answer as an MCP server (it answered "
                "text/html)", "check that the URL is the server's MCP endpoint"),
        "moved": (f"moved: {servers['moved']} redirects to /elsewhere/mcp (HTTP 302)",
                  "if you trust it, use that URL"),
        "tls": (f"tls: TLS with {plain_http} failed (WRONG_VERSION_NUMBER)",
                "the server speaks plain HTTP, not TLS: `mcpkit mcp add --force --transport "
                f"http tls http://{plain_http}/mcp`"),
    }
    # mcp list: every problem with its fix, and exit 1 as `mcp test`
    listed = user("mcp", "list")
    assert listed.code == 1
    problems = listed.err.splitlines()
    for message, fix in expected.values():
        assert any(line.startswith(f"mcpkit: error: {message}") for line in problems), problems
        assert any(line.startswith(f"hint: {fix}") for line in problems), problems
    assert listed.err.count("hint: ") == len(expected)
    assert "is the server running" not in listed.err
    # mcp test: the same words
    tested = user.fails(1, "mcp", "test", "tls")
    assert error_line(tested).startswith(f"mcpkit: error: {expected['tls'][0]}")
    assert hint(tested).startswith(f"hint: {expected['tls'][1]}")


def test_a_server_given_directly_gets_fixes_in_the_commands_options(user: User,
                                                                    plain_http: str) -> None:
    """The same failures as above for a URL given on the command line: the fix says what to
    change in what was given, never an `mcpkit mcp` line (there is no entry to edit)."""
    refused = f"http://127.0.0.1:{free_port()}/mcp"
    expected = {
        refused: "start the server, or check the host and port of the URL",
        f"http://{plain_http}/missing/mcp":
            "the URL's path is wrong: check where the server serves MCP (often /mcp)",
        f"http://{plain_http}/moved/mcp":
            "redirects are not followed: if you trust where it points, give that URL",
        f"https://{plain_http}/mcp":
            "the server speaks plain HTTP, not TLS: give the http:// (or ws://) URL",
        f"http://{plain_http}/teapot/mcp": "check the URL and that the server runs",
    }
    for url, fix in expected.items():
        failed = user.fails(1, "tools", url)
        assert hint(failed) == f"hint: {fix}", failed
    user.write(user.user_file, {"pot": {"url": f"http://{plain_http}/teapot/mcp"}})
    configured = user.fails(1, "tools", "pot")
    assert hint(configured) == "hint: check the URL and the entry: `mcpkit mcp get pot`"


# --- -v, mcp list -------------------------------------------------------------------------------


def test_verbose_says_what_connected(user: User) -> None:
    user.add_fixture("fx")
    tested = user.ok("mcp", "test", "-v", "fx")
    assert re.search(r"^mcpkit: connected to fx in \d+ ms \(stdio, era modern, protocol "
                     r"2026-07-28, server fixture-fx 1\.0\.0\); 8 tools$", tested.err, re.M), \
        tested.err
    called = user.ok("call", "-v", "fx", "echo", "text=hi")
    assert called.out == "fx: hi\n"
    assert re.search(r"^mcpkit: connected to fx in \d+ ms ", called.err, re.M), called.err
    assert re.search(r"^mcpkit: echo answered in \d+ ms$", called.err, re.M), called.err
    quiet = user.ok("mcp", "test", "fx")
    assert "connected to" not in quiet.err
    assert user.ok("mcp", "list").out.splitlines()[1].split()[-2:] == ["ready", "8"]


@pytest.mark.parametrize("columns", [40, 60, 80])
def test_narrow_terminals_keep_rows_apart(user: User, columns: int) -> None:
    base = "http://127.0.0.1:9/mcp?workspace=/home/someone/projects/long-name&task_id="
    prefix = "task-runner-for-the-long-project-"
    user.write(user.user_file, {f"{prefix}{n}": {"url": f"{base}{n}", "enabled": False}
                                for n in ("abc", "abd", "xyz")})
    rows = user.ok("mcp", "list", "--no-connect", COLUMNS=str(columns)).out.splitlines()[1:]
    assert len(rows) == 3
    names = [row.split()[0] for row in rows]
    targets = [row.split()[3] for row in rows]
    assert len(set(names)) == 3 and len(set(targets)) == 3, rows
    assert all(t.endswith(("abc", "abd", "xyz")) for t in targets), rows


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab/?=_", min_size=0, max_size=40), min_size=1, max_size=6),
       st.integers(min_value=10, max_value=60))
def test_cut_cells_stay_distinct(texts: list[str], width: int) -> None:
    rows = [[text, "x"] for text in texts]
    lines = table(("COL", "X"), rows, width=width, shrink=0)[1:]
    shown = [line[:-1].rstrip() for line in lines]  # the column before the last cell
    for i, a in enumerate(texts):
        for j, b in enumerate(texts):
            if a != b:
                assert shown[i] != shown[j], (texts, width, lines)


# --- mcp import ---------------------------------------------------------------------------------


def test_import_reads_every_file_and_names_conflicts(user: User) -> None:
    (user.home / ".claude.json").write_text(json.dumps({
        "mcpServers": {"shared": {"command": "user-version"}, "mine": {"command": "m"}},
        "projects": {str(user.project): {"mcpServers": {"here": {"command": "h"}}},
                     "/elsewhere": {"mcpServers": {"there": {"command": "t"}}}}}))
    (user.project / ".mcp.json").write_text(json.dumps({
        "mcpServers": {"shared": {"command": "project-version"},
                       "api": {"type": "http", "url": "https://example.com/mcp"}}}))
    dry = user.ok("mcp", "import", "--from", "claude", "--dry-run")
    claude_json, mcp_json = user.home / ".claude.json", user.project / ".mcp.json"
    assert dry.out.splitlines()[0] == (f"would import 4 servers from {claude_json}, {mcp_json} "
                                       f"into {user.user_file} (user scope):")
    assert f"  + here  (stdio: h)  from {claude_json}" in dry.out
    assert f"  + shared  (stdio: project-version)  from {mcp_json}" in dry.out
    assert "there" not in dry.out  # another project's servers
    assert dry.err == (f"conflict: 'shared' is in {claude_json} and in {mcp_json} with different "
                       f"settings; importing the one in {mcp_json}\n")

    desktop = user.home / ".config" / "Claude" / "claude_desktop_config.json"
    desktop.parent.mkdir(parents=True)
    desktop.write_text(json.dumps({"mcpServers": {"fs": {"command": "npx", "args": ["$HOME"]}}}))
    done = user.ok("mcp", "import", "--from", "claude-desktop")
    assert done.out.splitlines()[0].startswith(f"imported 1 server from {desktop} ")
    assert user.servers(user.user_file)["fs"]["args"] == ["$$HOME"]  # no variables there
    again = user.ok("mcp", "add-from-claude-desktop", "--dry-run")
    assert "skipped 1 already in" in again.out


def test_import_refuses_hostile_files_precisely(user: User) -> None:
    claude_json, mcp_json = user.home / ".claude.json", user.project / ".mcp.json"
    claude_json.write_text(json.dumps({"mcpServers": {"a": {"command": "a"}}}))
    mcp_json.write_text('{"mcpServers": {"b": ')
    broken = user.fails(2, "mcp", "import", "--from", "claude")
    assert error_line(broken) == (f"mcpkit: error: {mcp_json}: invalid JSON at line 1, "
                                  "column 22: Expecting value")
    assert "import another file alone" in hint(broken)
    assert not user.user_file.exists()  # nothing written
    mcp_json.write_text("[" * 100_000 + "]" * 100_000)
    deep = user.fails(2, "mcp", "import", "--from", "claude")
    assert error_line(deep) == f"mcpkit: error: {mcp_json}: nested too deeply to be a config file"
    mcp_json.write_text(json.dumps({"mcpServers": {"b": {"command": "b" * 200}}}))
    big = user.fails(2, "mcp", "import", "--from", "claude", "--max-file-bytes", "100")
    assert error_line(big) == (f"mcpkit: error: {mcp_json}: larger than 100 bytes; not read "
                               "(--max-file-bytes sets the limit)")
    mcp_json.write_bytes(b'{"mcpServers": {"\xff": {}}}')
    binary = user.fails(2, "mcp", "import", "--from", "claude")
    assert error_line(binary) == f"mcpkit: error: {mcp_json}: not UTF-8 text (byte 18, line 1)"


def test_no_variable_value_is_printed_on_failure(user: User) -> None:
    """Errors, `--json` and `-v` show `${SEC}`, not its value: in a command's arguments (and
    what the command says on stderr), a URL's query, a header."""
    secret = "value-of-sec-5ec2et"
    user.write(user.user_file, {
        "cmd": {"command": PY, "args": ["-c", "import sys; sys.exit(sys.argv[1])", "${SEC}"]},
        "web": {"url": f"http://127.0.0.1:{free_port()}/mcp?api_key=${{SEC}}",
                "headers": {"Authorization": "Bearer ${SEC}"}}})
    outputs = [user("mcp", "list", "-v", SEC=secret), user("mcp", "list", "--json", SEC=secret),
               user("mcp", "test", "--json", "-v", "cmd", SEC=secret),
               user("tools", "-v", "web", SEC=secret)]
    for result in outputs:
        assert result.code == 1, result
        assert secret not in result.out + result.err, result
    assert "${SEC}" in outputs[0].err  # the reference is shown where the value was
