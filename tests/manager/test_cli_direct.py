"""`mcpkit tools|call|resources|prompts|inspect` on a server given directly (a URL, or its
command after `--`) as well as by a configured name, typed as a person would: a subprocess
per command, HOME and XDG dirs in tmp, real servers (`mcpkit example` over HTTP and stdio,
`mcpkit serve --token`, `catalog_server.py`, a hostile `endless_server.py`, and the official
Python SDK's server when it is installed)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.manager.test_cli import Result
from tests.procs import free_port, mcp_http_server, serve_in_thread

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
PY = sys.executable
EXAMPLE_STDIO = [PY, "-m", "mcpkit", "example", "--transport", "stdio"]
CATALOG = [PY, str(HERE / "catalog_server.py")]
FIXTURE = [PY, str(HERE / "fixture_server.py")]
ENDLESS = [PY, str(HERE / "endless_server.py")]
SDK_PEER = [PY, str(ROOT / "tests" / "interop" / "sdk_peer_server.py"), "--transport", "stdio"]
TOKEN = "tok-7c1e55d0-secret"
RUN_TIMEOUT_S = 60
"""A generous liveness bound per command (the endless list must stop by itself)."""


class Shell:
    """`mcpkit …` as typed at a shell, with a HOME and config dirs of its own."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"),
                    "PATH": os.environ["PATH"],
                    "PYTHONPATH": os.environ.get("PYTHONPATH", "")}

    def __call__(self, *argv: str, code: int = 0, **env: str) -> Result:
        proc = subprocess.run([PY, "-m", "mcpkit", *argv], cwd=self.home,
                              env={**self.env, **env}, capture_output=True, encoding="utf-8",
                              timeout=RUN_TIMEOUT_S, check=False)
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr, result
        assert proc.returncode == code, result
        return result


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    return Shell(tmp_path)


def _http_server(argv: list[str], port: int, cwd: Path) -> Iterator[str]:
    with mcp_http_server(argv, port, cwd=cwd, stdin=subprocess.DEVNULL) as url:
        yield url


@pytest.fixture(scope="module")
def example_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcpkit example` over Streamable HTTP."""
    port = free_port()
    yield from _http_server([PY, "-m", "mcpkit", "example", "--port", str(port)], port,
                            tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="module")
def token_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`mcpkit serve --token TOKEN`: every request needs `Authorization: Bearer TOKEN`."""
    port = free_port()
    workspace = tmp_path_factory.mktemp("workspace")
    yield from _http_server([PY, "-m", "mcpkit", "serve", "--port", str(port), "--token", TOKEN,
                             "--workspace", str(workspace)], port, workspace)


# --- a URL ------------------------------------------------------------------------------------


def test_a_url_lists_calls_reads_and_inspects(sh: Shell, example_url: str,
                                              tmp_path: Path) -> None:
    tools = sh("tools", example_url).out
    assert tools.splitlines()[0] == f"{example_url} (2 tools)"
    assert "  add\n" in tools and "  greet  [read-only]" in tools
    assert "→" not in tools  # no exposed mcp__ names for a server given directly
    listed = sh("tools", example_url, "--json").json()
    assert sorted(t["name"] for t in listed) == ["add", "greet"]
    ws_url = example_url.replace("http://", "ws://")
    assert sh("tools", ws_url).out.splitlines()[0] == f"{ws_url} (2 tools)"  # WebSocket

    assert json.loads(sh("call", example_url, "add", "a=2", "b=3").out) == {"result": 5}
    assert sh("call", example_url, "greet", "name=Ada", "--answer", "style=formal").out \
        .strip() == "Hello, Ada (formal)"

    templates = sh("resources", "templates", example_url).out.splitlines()
    assert templates[0].split() == ["URI", "TEMPLATE", "NAME", "MIME", "TYPE", "DESCRIPTION"]
    assert templates[1].split()[:2] == ["docs://{topic}", "docs"]
    assert sh("resources", "list", example_url).out.splitlines()[1].split() == \
        ["docs://index", "index"]
    assert sh("resources", "read", example_url, "docs://install").out == \
        "Documentation about install\n"

    prompts = sh("prompts", "list", example_url).out
    assert prompts.startswith("review")
    assert "    code (required)" in prompts
    got = sh("prompts", "get", example_url, "review", "code=x = 1").out
    assert "[user]\nPlease review:\nx = 1" in got

    report_file = tmp_path / "report.json"
    written = sh("inspect", example_url, "-o", str(report_file))
    assert written.out == ""
    assert "wrote" in written.err and "2 tools, 1 resources, 1 templates, 1 prompts" in written.err
    report = json.loads(report_file.read_text())
    assert report["server"]["name"] == "demo"
    assert report["server"]["instructions"] == "Adds numbers and greets people."
    assert "tools" in report["server"]["capabilities"]
    assert report["connection"]["era"] == "modern"
    assert report["connection"]["protocolVersion"] == report["connection"]["supportedVersions"][0]
    assert {t["name"]: t["inputSchema"]["required"] for t in report["tools"]}["add"] == \
        ["a", "b"]
    assert [t["uriTemplate"] for t in report["templates"]] == ["docs://{topic}"]
    assert [r["uri"] for r in report["resources"]] == ["docs://index"]
    assert [p["name"] for p in report["prompts"]] == ["review"]
    assert report == sh("inspect", example_url).json() | {"connection": report["connection"]}


# --- a command after -- ---------------------------------------------------------------------


def test_a_command_after_dashes_is_a_stdio_server(sh: Shell) -> None:
    tools = sh("tools", "--", *EXAMPLE_STDIO).out
    assert tools.splitlines()[0].endswith("example --transport stdio (2 tools)")
    # TOOL and its key=value pairs come first, the server's own command (options and all)
    # after --; fastmcp's --command 'CMD ARGS' means the same.
    added = sh("call", "add", "a=2", "b=-3", "--json", "--", *EXAMPLE_STDIO).json()
    assert added["structuredContent"] == {"result": -1}
    assert json.loads(sh("call", "--command", " ".join(EXAMPLE_STDIO), "add", "a=1",
                         "b=1").out) == {"result": 2}
    report = sh("inspect", "--", *EXAMPLE_STDIO).json()
    assert report["connection"]["transport"] == "stdio"
    assert len(report["tools"]) == 2


def test_env_goes_to_a_command_and_is_never_printed(sh: Shell) -> None:
    # The server gets -e variables on top of a minimal environment, not the caller's.
    given = sh("call", "env", "variable=API_KEY", "-e", "API_KEY=key-51b0c2", "--", *FIXTURE,
               SOME_SECRET="mine")
    assert given.out.strip() == "key-51b0c2"  # the server's answer, shown as it is
    assert sh("call", "env", "variable=SOME_SECRET", "--", *FIXTURE,
              SOME_SECRET="mine").out.strip() == "<unset>"
    # A server that dies quoting its environment: the value is blanked out of the error.
    leaky = [PY, "-c", "import os, sys; sys.stdin.readline(); sys.exit(os.environ['API_KEY'])"]
    failed = sh("tools", "-e", "API_KEY=key-51b0c2", "-v", "--", *leaky, code=1)
    assert "key-51b0c2" not in failed.err and "****" in failed.err
    bad = sh("tools", "-e", "1X=key-51b0c2", "--", *FIXTURE, code=2)
    assert "--env number 1 is not KEY=VALUE" in bad.err and "key-51b0c2" not in bad.err


def test_resources_and_prompts_of_a_stdio_server(sh: Shell, tmp_path: Path) -> None:
    listed = sh("resources", "list", "--", *CATALOG).out.splitlines()
    assert [row.split()[0] for row in listed] == ["URI", "text://hello", "bin://logo.png",
                                                  "bin://pair"]
    assert sh("resources", "read", "text://hello", "--", *CATALOG).out == \
        "hello from a resource\n"
    # Binary contents: size and type on the terminal, the bytes only into a file.
    png = (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    shown = sh("resources", "read", "bin://logo.png", "--", *CATALOG).out
    assert shown == f"[binary: bin://logo.png, image/png, {len(png)} bytes; save it with -o " \
                    "FILE]\n"
    target = tmp_path / "logo.png"
    saved = sh("resources", "read", "bin://logo.png", "-o", str(target), "--", *CATALOG)
    assert target.read_bytes() == png
    assert f"wrote {len(png)} bytes (image/png)" in saved.err
    too_big = tmp_path / "small.png"
    refused = sh("resources", "read", "bin://logo.png", "-o", str(too_big), "--max-bytes", "100",
                 "--", *CATALOG, code=1)
    assert f"is {len(png)} bytes, over --max-bytes 100" in refused.err
    assert not too_big.exists()
    parts = sh("resources", "read", "bin://pair", "-o", str(tmp_path / "p"), "--", *CATALOG,
               code=2)
    assert "has 2 parts" in parts.err and "--json" in parts.err

    prompts = sh("prompts", "list", "--", *CATALOG).out
    assert "greet — Greet someone." in prompts and "    name (required) — who to greet" in prompts
    assert sh("prompts", "get", "greet", "name=Ann", "times=2", "--", *CATALOG).out.endswith(
        "[user]\nhello Ann hello Ann\n")
    # --args JSON like `call`; a number is sent as its text (prompt arguments are strings).
    got = sh("prompts", "get", "greet", "--args", '{"name": "Bo", "times": 3}', "--json", "--",
             *CATALOG).json()
    assert got["messages"][0]["content"]["text"] == "hello Bo hello Bo hello Bo"
    missing = sh("prompts", "get", "greet", "--", *CATALOG, code=2)
    assert "prompt greet needs name" in missing.err and "name=VALUE" in missing.err
    unknown = sh("prompts", "get", "nope", "--", *CATALOG, code=2)
    assert "no prompt named 'nope'" in unknown.err and "its prompts: greet" in unknown.err


def test_an_endless_list_stops_at_the_clients_bound(sh: Shell) -> None:
    for command in (["tools"], ["inspect"]):
        failed = sh(*command, "--", *ENDLESS, code=1)
        assert "tools/list: the server's list has more than 1000 pages (ListLimits.pages)" \
            in failed.err
        assert "the server is broken" in failed.err


# --- credentials ----------------------------------------------------------------------------


def test_bearer_and_headers_reach_the_server_and_are_never_printed(sh: Shell, token_url: str
                                                                   ) -> None:
    refused = sh("tools", token_url, code=1)
    assert "HTTP 401" in refused.err and "--bearer TOKEN" in refused.err

    wrong = "wrong-4f1b9a-token"
    for given in (["--bearer", wrong, "-v", "--json"], ["-H", f"Authorization: Bearer {wrong}"]):
        failed = sh("tools", token_url, *given, code=1)
        assert wrong not in failed.out + failed.err, failed
        assert "refused the credentials" in failed.err
    assert wrong not in sh("call", token_url, "view", "path=.", "--bearer", wrong, "-v",
                           code=1).err

    for given, env in ((["--bearer", TOKEN], {}), ([], {"MCPKIT_BEARER": TOKEN}),
                       (["-H", f"Authorization: Bearer {TOKEN}"], {})):
        ok = sh("tools", token_url, *given, "-v", **env)
        assert "  view  [read-only]" in ok.out
        assert TOKEN not in ok.out + ok.err
    report = sh("inspect", token_url, "--bearer", TOKEN)
    assert TOKEN not in report.out + report.err
    assert report.json()["server"]["name"]

    malformed = sh("tools", token_url, "-H", f"Bearer {TOKEN}", code=2)
    assert "--header number 1 is not 'Name: value'" in malformed.err
    assert TOKEN not in malformed.err


async def _echo_credentials(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app that refuses every request, quoting the credentials it was sent."""
    if scope["type"] != "http":
        return
    headers = dict(scope["headers"])
    quoted = b" and ".join(headers.get(name, b"-") for name in (b"authorization", b"x-api-key"))
    await send({"type": "http.response.start", "status": 401,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"refused: " + quoted})


def test_secrets_a_server_echoes_back_are_blanked_out(sh: Shell) -> None:
    with serve_in_thread(_echo_credentials) as base:
        failed = sh("tools", f"{base}/mcp", "--bearer", TOKEN, "-H", "X-Api-Key: key-9d2a61",
                    "-v", code=1)
    assert "refused: Bearer **** and ****" in failed.err  # what the server said, redacted
    assert TOKEN not in failed.err and "key-9d2a61" not in failed.err


# --- the official Python SDK's server --------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("mcp") is None,
                    reason="the official MCP Python SDK is not installed")
def test_the_python_sdks_server_over_stdio_and_sse(sh: Shell) -> None:
    # Its resources/list comes in pages of two: all of them arrive.
    uris = [row.split()[0] for row in sh("resources", "list", "--", *SDK_PEER).out.splitlines()]
    assert uris[0] == "URI" and {f"sdk://page-item/{n}" for n in range(1, 5)} <= set(uris)
    report = sh("inspect", "--", *SDK_PEER, "--legacy-only").json()
    assert report["server"]["name"] == "sdk-peer" and report["connection"]["era"] == "legacy"
    port = free_port()
    sse = [*SDK_PEER[:2], "--transport", "sse", "--port", str(port)]
    for url in _http_server(sse, port, ROOT):
        sse_url = url.replace("/mcp", "/sse")
        assert "  add" in sh("tools", "-t", "sse", sse_url).out.splitlines()
        assert sh("call", "-t", "sse", sse_url, "add", "a=2", "b=3").out.strip() == "5"
        report = sh("inspect", "--transport", "sse", sse_url).json()
        assert report["connection"]["transport"] == "sse"


# --- configured names, and mistakes -------------------------------------------------------


def test_a_configured_name_works_with_every_command(sh: Shell) -> None:
    sh("mcp", "add", "notes", "--", *EXAMPLE_STDIO)
    assert "notes (2 tools)" in sh("tools", "notes").out
    assert "mcp__notes__add" in sh("tools", "notes").out  # the names an agent sees
    assert "docs://{topic}" in sh("resources", "templates", "notes").out
    assert "review" in sh("prompts", "list", "notes").out
    assert sh("inspect", "notes").json()["connection"]["target"] == "notes"
    wrong = sh("tools", "notes", "--bearer", "x", code=2)
    assert "--bearer only apply to a URL or a command" in wrong.err
    assert "mcpkit mcp get notes" in wrong.err


@pytest.mark.parametrize(("argv", "says"), [
    (["tools", "--transport", "ws", "http://127.0.0.1:9/mcp"], "a ws URL starts with ws://"),
    (["tools", "-t", "sse", "--"], "nothing after --"),
    (["tools", "--header", "X: 1", "--", "cmd"], "only apply to a URL, not to a command"),
    (["tools", "unknown-server"], "no MCP server named 'unknown-server'"),
    (["tools", "-e", "A=1", "http://127.0.0.1:9/mcp"], "--env only applies to a command"),
    (["call", "http://127.0.0.1:9/mcp"], "which tool?"),
    (["resources", "read", "http://127.0.0.1:9/mcp"], "give one resource URI"),
    (["inspect"], "no server given"),
    (["inspect", "--nope", "http://127.0.0.1:9/mcp"], "unrecognized arguments: --nope"),
    (["tools", "x", "--", "cmd"], "unexpected 'x' with the server's command"),
])
def test_mistakes_are_one_line_and_exit_2(sh: Shell, argv: list[str], says: str) -> None:
    assert says in sh(*argv, code=2).err


@pytest.mark.parametrize("columns", [40, 60])
def test_narrow_terminals_keep_task_urls_apart(sh: Shell, example_url: str,
                                               columns: int) -> None:
    # Two tasks' URLs share everything but their end: narrowed, they must still differ.
    headers = []
    for task in ("task-for-a-long-running-job-abc", "task-for-a-long-running-job-abd"):
        out = sh("tools", f"{example_url}?task_id={task}", COLUMNS=str(columns)).out
        assert all(len(line) <= columns for line in out.splitlines()), out
        headers.append(out.splitlines()[0])
    assert headers[0] != headers[1], headers
    assert headers[0].endswith("abc (2 tools)") and headers[1].endswith("abd (2 tools)")


def test_a_slow_command_is_told_the_option_not_an_entry(sh: Shell) -> None:
    from tests.manager.test_cli import FIXTURE

    slow = sh("tools", "--timeout", "0.5", "--", PY, FIXTURE, "--name", "slow", "--delay", "5",
              code=1)
    assert "did not start within 0.5 s" in slow.err
    hint = next(line for line in slow.err.splitlines() if line.startswith("hint: "))
    # no config entry exists for a command given on the command line
    assert hint == "hint: if it is just slow, give it longer: --timeout SECONDS"
