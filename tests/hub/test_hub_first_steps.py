"""A newcomer's first steps with the hub, typed as they would type them (subprocesses):

- `hub user add` / `hub token create` with `--data-dir X`, then `hub serve --data-dir X`: the
  token works (one shared set of storage options; every command that opens the database has
  it), and the start-up summary says where everything is;
- `hub upstream add|list|get|tools|refresh|remove` against that real `hub serve`, with a real
  upstream (`mcpkit example`): readable tables, `--json`, the API's errors as `field: message`,
  secrets never printed;
- `/docs` in headless Chromium with every non-loopback request refused: Swagger UI renders
  the API's operations from assets the hub serves itself;
- error messages that lead to the fix: a private upstream names `--allow-private-upstreams`
  and its variable, stdio names `--allow-stdio`, a missing extra says how to install it for an
  installed mcpkit and for a source checkout.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

import pytest
from tests.browser import CHROMIUM_ARGS, chromium_path
from tests.hub.hub_helpers import running_hub
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit.cli import build_parser

STORAGE_OPTIONS = {"--data-dir", "--database-url"}
HEADER_SECRET = "header-secret-4242"
BEARER_SECRET = "bearer-secret-" + "x" * 20


@dataclass
class ServedHub:
    url: str
    token: str
    data_dir: Path
    log: Path
    upstream_url: str
    env: dict[str, str]


def clean_env(home: Path) -> dict[str, str]:
    """The environment without any MCPKIT_HUB_* and with a HOME of its own, so only the
    options given can lead a command to its database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_HUB_")}
    env["HOME"] = str(home)
    return env


def mcpkit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpkit", *args], env=env,
                          capture_output=True, text=True, timeout=90, check=False)


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def refused(result: subprocess.CompletedProcess[str], status: int = 1) -> str:
    """The one error line of a failed command (exit `status`, nothing on stdout)."""
    assert result.returncode == status, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("mcpkit hub upstream: error: "), lines
    return lines[0]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedHub]:
    """`mcpkit example` as the upstream, and `mcpkit hub serve --data-dir X` after the user and
    token were made with `--data-dir X` (nothing in the environment says where X is)."""
    root = tmp_path_factory.mktemp("first-steps")
    data = root / "hub-data"
    env = clean_env(root / "home")
    ok(mcpkit(env, "hub", "user", "add", "alice", "--data-dir", str(data)))
    token = ok(mcpkit(env, "hub", "token", "create", "alice", "--data-dir", str(data))).strip()
    upstream_port, hub_port = free_port(), free_port()
    log = root / "serve.log"
    with open(os.devnull, "wb") as quiet, open(log, "wb") as log_file:
        example = subprocess.Popen(
            [sys.executable, "-m", "mcpkit", "example", "--port", str(upstream_port)],
            env=env, stdout=quiet, stderr=quiet)
        serve = subprocess.Popen(
            [sys.executable, "-m", "mcpkit", "hub", "serve", "--data-dir", str(data),
             "--port", str(hub_port), "--allow-private-upstreams"],
            env=env, stdout=log_file, stderr=log_file)
    try:
        wait_for_port(example, upstream_port, timeout=60)
        wait_for_port(serve, hub_port, timeout=60)
        yield ServedHub(f"http://127.0.0.1:{hub_port}", token, data, log,
                        f"http://127.0.0.1:{upstream_port}/mcp", env)
    finally:
        stop_process(serve)
        stop_process(example)
    assert not (root / "home" / ".local").exists()  # nothing went to the default data dir


def upstream(hub: ServedHub, *args: str, token: bool = True) -> subprocess.CompletedProcess[str]:
    """`mcpkit hub upstream ARGS` for alice, the hub's address and token from the environment
    (as a user exports them once)."""
    env = {**hub.env, "MCPKIT_HUB_URL": hub.url}
    if token:
        env["MCPKIT_HUB_TOKEN"] = hub.token
    return mcpkit(env, "hub", "upstream", *args)


def test_the_admin_commands_and_serve_share_the_data_dir(served: ServedHub) -> None:
    """The token made with `--data-dir X` works against `hub serve --data-dir X`, and the
    start-up summary names the URL, the database, the data dir, the counts and /docs."""
    assert ok(upstream(served, "list")) == ""
    log = served.log.read_text()
    assert f"mcpkit hub on {served.url} (MCP /mcp, API /api/v1, docs /docs" in log
    assert f"  database:  SQLite file {served.data_dir / 'hub.db'}" in log
    assert f"  data dir:  {served.data_dir} (secret key: secret.key there)" in log
    assert "  registry:  1 user, 0 upstreams" in log
    assert "  upstreams: private addresses allowed, stdio off (--allow-stdio)" in log
    assert f"  API docs:  {served.url}/docs (served offline)" in log
    assert f"  OAuth:     issuer {served.url} (users sign in with a password" in log
    assert served.token not in log


def test_every_command_that_opens_the_database_takes_the_same_storage_options() -> None:
    """Walk the real parser: `hub serve` and every `hub user|token` action have the options
    of `add_settings_arguments`, so none can be pointed at a database the others miss."""
    hub = _subparsers(build_parser())["hub"]
    commands = _subparsers(hub)
    checked = ["serve"]
    assert STORAGE_OPTIONS <= _options(commands["serve"])
    for group in ("user", "token"):
        for name, action in _subparsers(commands[group]).items():
            assert STORAGE_OPTIONS <= _options(action), (group, name)
            checked.append(f"{group} {name}")
    # serve, user add|list|disable|set-password|link-oidc, token create|list|revoke
    assert len(checked) == 9


def test_register_an_upstream_and_read_it_back_from_the_cli(served: ServedHub) -> None:
    added = upstream(served, "add", "example", served.upstream_url,
                     "-H", f"X-Key: {HEADER_SECRET}", "--bearer", BEARER_SECRET)
    assert ok(added).startswith("upstream example added (id ")
    assert f"http {served.upstream_url}): healthy, 2 tools" in added.stdout

    listing = ok(upstream(served, "list")).splitlines()
    assert listing[0].split() == ["NAME", "TRANSPORT", "ENDPOINT", "ENABLED", "HEALTH", "TOOLS",
                                  "ID"]
    assert listing[1].split()[:6] == ["example", "http", served.upstream_url, "yes", "healthy",
                                      "2"]

    tools = ok(upstream(served, "tools", "example")).splitlines()
    assert tools[0].split() == ["NAME", "ALLOWED", "DESCRIPTION"]
    assert sorted(line.split()[0] for line in tools[1:]) == ["add", "greet"]
    as_json = json.loads(ok(upstream(served, "tools", "example", "--refresh", "--json")))
    assert sorted(tool["name"] for tool in as_json) == ["add", "greet"]

    shown = ok(upstream(served, "get", "example"))
    assert "health:       healthy" in shown and "X-Key: …4242" in shown
    record = json.loads(ok(upstream(served, "get", "example", "--json")))
    assert record["name"] == "example" and record["has_bearer"] is True
    by_id = ok(upstream(served, "refresh", record["id"]))
    assert by_id == "upstream example: healthy, 2 tools\n"

    taken = refused(upstream(served, "add", "example", served.upstream_url))
    assert taken.endswith("name: an upstream named 'example' exists")
    assert ok(upstream(served, "remove", "example")) == "upstream example removed\n"
    gone = refused(upstream(served, "get", "example"))
    assert "you have no upstream named 'example'" in gone
    assert upstream(served, "list").stderr.startswith("no upstreams yet")
    everything = added.stdout + shown + json.dumps(record) + served.log.read_text()
    for secret in (HEADER_SECRET, BEARER_SECRET, served.token):
        assert secret not in everything


def test_upstream_cli_mistakes_name_the_fix(served: ServedHub) -> None:
    no_token = refused(upstream(served, "list", token=False), status=2)
    assert "pass --token or set $MCPKIT_HUB_TOKEN" in no_token
    wrong = refused(upstream(served, "list", "--token", "mcphub_wrong"))
    assert "the API token is not valid" in wrong and "--token or $MCPKIT_HUB_TOKEN" in wrong
    assert "mcphub_wrong" not in wrong
    header = refused(upstream(served, "add", "x", served.upstream_url, "-H", "oops-secret"), 2)
    assert header.endswith("--header: expected 'Name: value'") and "oops-secret" not in header
    nowhere = refused(upstream(served, "list", "--hub", f"http://127.0.0.1:{free_port()}"))
    assert "cannot reach the hub" in nowhere and "mcpkit hub serve" in nowhere
    bad_url = refused(upstream(served, "add", "bad name", served.upstream_url))
    assert bad_url.endswith("error: name: String should match pattern '^[a-z0-9][a-z0-9_-]{0,62}$'")


def test_refusals_of_the_hub_name_the_operator_switch(tmp_path: Path) -> None:
    """A hub with the default policy (no private upstreams, no stdio): the CLI user sees which
    option and variable the operator would change."""
    env = clean_env(tmp_path)
    with running_hub(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}") as hub:
        env.update(MCPKIT_HUB_URL=hub.url, MCPKIT_HUB_TOKEN=hub.admin_token)
        private = refused(mcpkit(env, "hub", "upstream", "add", "local",
                                 "http://127.0.0.1:9/mcp"))
        assert "url: 127.0.0.1 is a loopback address" in private
        assert "--allow-private-upstreams" in private
        assert "MCPKIT_HUB_ALLOW_PRIVATE_UPSTREAMS=1" in private
        stdio = refused(mcpkit(env, "hub", "upstream", "add", "cmd", "--", sys.executable,
                               "-V"))
        assert "transport: stdio upstreams are disabled" in stdio
        assert "--allow-stdio" in stdio and "MCPKIT_HUB_ALLOW_STDIO=1" in stdio


@pytest.mark.parametrize(("blocked", "command"), [
    ("sqlalchemy", ["hub", "user", "list"]),
    ("fastapi", ["hub", "serve"]),
])
def test_a_missing_extra_says_how_to_install_it_either_way(
    tmp_path: Path, blocked: str, command: list[str]
) -> None:
    """With a hub dependency not importable, the message gives both install commands."""
    script = (f"import sys; sys.modules[{blocked!r}] = None\n"
              "from mcpkit.cli import main\n"
              f"raise SystemExit(main({[*command, '--data-dir', str(tmp_path)]!r}))")
    result = subprocess.run([sys.executable, "-c", script], env=clean_env(tmp_path),
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    line = result.stderr.strip()
    assert line.startswith("mcpkit hub: error: the hub needs its extra: ")
    assert "pip install 'mcpkit[hub]'" in line
    assert "(in a source checkout: pip install -e '.[hub]')" in line


# --- /docs in a browser, offline -------------------------------------------------------------


LOOPBACK = {"127.0.0.1", "localhost", "[::1]", "::1"}


def test_docs_render_with_no_network(served: ServedHub) -> None:
    """Headless Chromium loads /docs with every request off loopback refused: Swagger UI
    renders the hub's operations, and nothing outside was even asked for."""
    from playwright.sync_api import Route, sync_playwright

    executable = chromium_path()
    outside: list[str] = []

    def only_loopback(route: Route) -> None:
        if urlsplit(route.request.url).hostname in LOOPBACK:
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort("internetdisconnected")

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.route("**/*", only_loopback)
            page.goto(served.url + "/docs", timeout=30_000)
            page.wait_for_selector(".opblock-summary", timeout=30_000)
            summaries = page.locator(".opblock-summary-description").all_inner_texts()
            title = page.locator(".info .title").inner_text()
        finally:
            browser.close()
    assert "Register an upstream" in summaries and "List your upstreams" in summaries
    assert len(summaries) >= 10
    assert title.startswith("mcpkit hub")
    assert outside == []


# --- helpers ---------------------------------------------------------------------------------


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError(f"{parser.prog} has no subcommands")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    return {option for action in parser._actions for option in action.option_strings}


# --- a hostile or wrong "hub" ----------------------------------------------------------------


class FakeHub(http.server.BaseHTTPRequestHandler):
    """Answers as a broken or hostile server might; the case is the first path segment (the
    test's `--hub http://127.0.0.1:PORT/CASE`). Records what reaches the redirect's target."""

    redirected_with: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        case = urlsplit(self.path).path.split("/")[1]
        if case == "elsewhere":
            FakeHub.redirected_with.append(self.headers.get("Authorization", ""))
            self._send(200, b'{"items": [], "next_cursor": null}')
        elif case == "redirect":
            self.send_response(307)
            self.send_header("Location", "/elsewhere/")
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._send(200, CASES[case])

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


EVIL_NAME = "\x1b]0;owned\x07\x1b[2Jevil"
CASES = {
    "html": b"<html>not the API</html>",
    "huge": b'{"items": [' + b" " * (17 * 1024 * 1024) + b"]}",
    "loop": b'{"items": [], "next_cursor": "again"}',
    "evil": json.dumps({"items": [{
        "id": "0", "name": EVIL_NAME, "transport": "http", "url": "http://x/\x1b[31m",
        "command": None, "enabled": True, "health_status": "healthy", "tool_count": 1,
    }], "next_cursor": None}).encode(),
}


def test_a_hostile_hub_cannot_flood_redirect_or_drive_the_terminal(tmp_path: Path) -> None:
    """Answers that are not the API's, too big, endlessly paged, or full of escape sequences
    give one precise line (exit 1) or cleaned output; a redirect is not followed with the
    token."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeHub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        env = {**clean_env(tmp_path), "MCPKIT_HUB_URL": base, "MCPKIT_HUB_TOKEN": "mcphub_t"}

        def listing(case: str) -> subprocess.CompletedProcess[str]:
            return mcpkit(env, "hub", "upstream", "list", "--hub", f"{base}/{case}")

        assert "is not JSON: is --hub the hub's address?" in refused(listing("html"))
        assert "answer is over 16777216 bytes" in refused(listing("huge"))
        assert "repeats a cursor" in refused(listing("loop"))
        redirect = refused(listing("redirect"))
        assert "HTTP 307" in redirect and FakeHub.redirected_with == []
        shown = ok(listing("evil"))
        assert "\x1b" not in shown and "\x07" not in shown and "?]0;owned??[2Jevil" in shown
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
