"""The commands that run a server - `mcpkit serve`, `mcpkit example`, `mcpkit hub serve` -
as a person types them: `--version`; the start-up line printed only once the port accepts
connections; Ctrl-C and SIGTERM stopping cleanly (exit 0, no traceback); a port in use or a
host that is not this machine's as one line and exit status 2; and their help (what the
command does, examples, every option's default)."""

from __future__ import annotations

import argparse
import json
import os
import re
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import mcpkit
from mcpkit.cli import build_parser

READY_S = 60.0
"""Generous bound for a server to start on a loaded machine (the hub imports a lot)."""
STOP_S = 20.0
"""Generous bound for a stop: the in-flight grace (5 s for serve/example) and then some."""
URL = re.compile(r"http://127\.0\.0\.1:(\d+)")


def mcpkit_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "mcpkit", *args]


def clean_env(tmp_path: Path) -> dict[str, str]:
    """The environment without the hub's and serve's settings, so the options decide."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MCPKIT_HUB_", "MCPKIT_SERVE_"))}
    env["MCPKIT_HUB_DATA"] = str(tmp_path / "hub")
    return env


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(mcpkit_command(*args), env=clean_env(tmp_path), capture_output=True,
                          text=True, timeout=READY_S, check=False, stdin=subprocess.DEVNULL)


def read_until_ready(proc: subprocess.Popen[bytes]) -> str:
    """stderr up to and including the start-up line (it says how to stop: "Ctrl-C");
    fails if the process exits or `READY_S` pass first."""
    assert proc.stderr is not None
    seen = b""
    deadline = time.monotonic() + READY_S
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stderr, selectors.EVENT_READ)
        while b"Ctrl-C" not in seen.rpartition(b"\n")[0]:
            left = deadline - time.monotonic()
            assert left > 0, f"no start-up line within {READY_S} s: {seen!r}"
            if selector.select(left):
                chunk = os.read(proc.stderr.fileno(), 65536)
                assert chunk, f"exited ({proc.wait()}) before its start-up line: {seen!r}"
                seen += chunk
    return seen.decode()


SERVERS = {
    "serve http": ("serve", "--port", "0"),
    "serve stdio": ("serve", "--transport", "stdio"),
    "example http": ("example", "--port", "0"),
    "example stdio": ("example", "--transport", "stdio"),
    "hub serve": ("hub", "serve", "--port", "0"),
}


def server_args(name: str, tmp_path: Path) -> list[str]:
    args = list(SERVERS[name])
    if args[0] == "serve":
        args += ["--workspace", str(tmp_path)]
    if args[0] == "hub":
        args += ["--data-dir", str(tmp_path / "hub"), "--log-level", "warning"]
    return args


@pytest.fixture
def started(request: pytest.FixtureRequest, tmp_path: Path
            ) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The server `request.param` names, started and past its start-up line; stopped (by
    its pid) if the test did not stop it."""
    proc = subprocess.Popen(mcpkit_command(*server_args(request.param, tmp_path)),
                            env=clean_env(tmp_path), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc, read_until_ready(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=STOP_S)


def stop(proc: subprocess.Popen[bytes], how: signal.Signals) -> str:
    """Send `how` to the server's pid; its whole stderr from then on."""
    proc.send_signal(how)
    _out, err = proc.communicate(timeout=STOP_S)
    return err.decode()


# --- --version ------------------------------------------------------------------------------


def test_version_as_an_option_and_as_a_command(tmp_path: Path) -> None:
    option = run(tmp_path, "--version")
    command = run(tmp_path, "version")
    assert option.returncode == command.returncode == 0, option.stderr + command.stderr
    assert option.stdout == command.stdout == f"{mcpkit.__version__}\n"


# --- the start-up line and stopping ---------------------------------------------------------


STARTUP_LINES = {
    "serve http": "mcpkit serve: coding tools for {tmp_path} at http://127.0.0.1:{port}/mcp "
                  "(no token required); Ctrl-C to stop",
    "example http": "mcpkit example: the README's example server at "
                    "http://127.0.0.1:{port}/mcp; Ctrl-C to stop",
    "hub serve": "mcpkit hub on http://127.0.0.1:{port} (MCP /mcp,",
}


@pytest.mark.parametrize(("started", "how"), [
    ("serve http", signal.SIGINT), ("serve http", signal.SIGTERM),
    ("example http", signal.SIGINT), ("example http", signal.SIGTERM),
    ("hub serve", signal.SIGINT),  # SIGTERM: tests/hub/test_hub_serve.py
], indirect=["started"])
def test_the_url_comes_once_listening_and_a_signal_stops_cleanly(
    started: tuple[subprocess.Popen[bytes], str], how: signal.Signals,
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Connect the moment the URL is printed (with `--port 0`, it names the port the server
    really got): it must be accepted. Then Ctrl-C (SIGINT) or SIGTERM: exit 0, no traceback."""
    proc, startup = started
    found = URL.search(startup)
    assert found is not None, startup
    port = int(found.group(1))
    assert port != 0
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    name = request.node.callspec.params["started"]
    assert STARTUP_LINES[name].format(tmp_path=tmp_path, port=port) in startup, startup
    rest = stop(proc, how)
    assert proc.returncode == 0, startup + rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest


@pytest.mark.parametrize(("started", "how"), [
    ("serve stdio", signal.SIGINT), ("serve stdio", signal.SIGTERM),
    ("example stdio", signal.SIGINT),
], indirect=["started"])
def test_a_signal_stops_a_stdio_server_cleanly(
    started: tuple[subprocess.Popen[bytes], str], how: signal.Signals
) -> None:
    """stdin stays open: the signal alone stops it, exit 0, no traceback."""
    proc, startup = started
    assert "on stdio; end stdin or press Ctrl-C to stop" in startup, startup
    rest = stop(proc, how)
    assert proc.returncode == 0, startup + rest
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest


def test_a_required_token_is_announced_but_never_printed(tmp_path: Path) -> None:
    token = "s3cret-token-value-1234"
    env = {**clean_env(tmp_path), "MCPKIT_SERVE_TOKEN": token}
    proc = subprocess.Popen(mcpkit_command("serve", "--port", "0", "--workspace", str(tmp_path)),
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        startup = read_until_ready(proc)
    finally:
        rest = stop(proc, signal.SIGINT)
    assert f"coding tools for {tmp_path} at http://127.0.0.1:" in startup, startup
    assert "/mcp (bearer token required); Ctrl-C to stop" in startup, startup
    assert token not in startup + rest
    assert proc.returncode == 0, rest


# --- where it cannot listen -----------------------------------------------------------------


@pytest.mark.parametrize("command", [("serve",), ("example",), ("hub", "serve")])
def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path, command: tuple[str, ...]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        args = [*command, "--port", str(port)]
        if command == ("serve",):
            args += ["--workspace", str(tmp_path)]
        if command[0] == "hub":
            args += ["--data-dir", str(tmp_path / "hub")]
        result = run(tmp_path, *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1, result.stderr  # no success line before it, no traceback after
    assert f"port {port} on 127.0.0.1 is in use" in lines[0] and "--port" in lines[0], lines
    assert "Errno" not in lines[0]
    assert result.stdout == ""


@pytest.mark.parametrize("host", ["192.0.2.1", "no-such-host.invalid"])
def test_a_host_that_is_not_this_machines_is_one_line_and_exit_2(
    tmp_path: Path, host: str
) -> None:
    """192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this machine; `.invalid`
    never resolves (RFC 2606)."""
    result = run(tmp_path, "example", "--host", host, "--port", "0")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and host in lines[0] and "--host" in lines[0], result.stderr


# --- help -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "says"), [
    ((), ["Model Context Protocol toolkit", "serve", "example", "hub", "--version"]),
    (("serve",), ["coding tools server", "examples:", "(default 65510)", "(default http)",
                  "(default 127.0.0.1)"]),
    (("example",), ["example server", "examples:", "(default 8000)", "(default http)",
                    "(default 127.0.0.1)"]),
    (("hub", "serve"), ["Run the hub", "examples:", "else 8765)", "else 127.0.0.1)",
                        "(default info)"]),
])
def test_help_describes_the_command_and_its_defaults(
    tmp_path: Path, command: tuple[str, ...], says: list[str]
) -> None:
    result = run(tmp_path, *command, "--help")
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())  # argparse wraps to the terminal's width
    for phrase in says:
        assert phrase in text, (phrase, result.stdout)


def subcommand(parser: argparse.ArgumentParser, *names: str) -> argparse.ArgumentParser:
    for name in names:
        subparsers = next(a for a in parser._actions
                          if isinstance(a, argparse._SubParsersAction))
        parser = subparsers.choices[name]
    return parser


@pytest.mark.parametrize("command", [("serve",), ("example",), ("hub", "serve")])
def test_every_option_has_help_that_gives_its_default(command: tuple[str, ...]) -> None:
    """In the parser itself: an option with a value by default says which in its help
    (or names the variable it comes from); flags say what they do."""
    parser = subcommand(build_parser(), *command)
    assert parser.description and parser.epilog
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{action.option_strings} has no help"
        if action.nargs != 0:
            assert "default" in action.help, f"{action.option_strings}: {action.help}"
        if action.default not in (None, False, [], argparse.SUPPRESS) and \
                not isinstance(action.default, bool):
            shown = f"{action.default:g}" if isinstance(action.default, float) else \
                str(action.default)
            assert shown in action.help or "current directory" in action.help, \
                f"{action.option_strings}: {action.help!r} does not show {shown}"


def test_serves_help_states_the_coding_servers_real_defaults() -> None:
    """--max-jobs and --max-output-bytes default to None (the server's own limits) and say
    those limits in words: they must be the server's."""
    from mcpkit.coding.env import MAX_JOB_OUTPUT_BYTES, MAX_JOBS_PER_TASK

    options = {a.dest: a.help or "" for a in subcommand(build_parser(), "serve")._actions}
    assert f"(default {MAX_JOBS_PER_TASK})" in options["max_jobs"]
    assert f"(default {MAX_JOB_OUTPUT_BYTES >> 30} GiB)" in options["max_output_bytes"]


# --- a request in flight when the signal comes (stdio) --------------------------------------

SLOW_SERVER = Path(__file__).parent / "transports" / "slow_server.py"


def test_ctrl_c_lets_a_stdio_request_in_flight_finish() -> None:
    """`run_stdio` on SIGINT stops reading but answers what it is doing (within the grace),
    then exits 0: a 1 s tool call in flight still gets its "done"."""
    proc = subprocess.Popen([sys.executable, str(SLOW_SERVER), "--transport", "stdio"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        def send(message: dict[str, object]) -> None:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
            proc.stdin.flush()

        def reply(request_id: int) -> dict[str, object]:
            assert proc.stdout is not None
            for _ in range(20):  # bounded: a few notifications at most come before it
                line = proc.stdout.readline()
                assert line, "stdout closed"
                message: dict[str, object] = json.loads(line)
                if message.get("id") == request_id:
                    return message
            raise AssertionError(f"no reply to {request_id}")

        send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "lifecycle-test", "version": "1"}}})
        assert "result" in reply(1)
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "tools/call",
              "params": {"name": "slow", "arguments": {"seconds": 1}}})
        send({"id": 3, "method": "ping"})
        assert "result" in reply(3)  # lines are read in order: the call is in flight now
        proc.send_signal(signal.SIGINT)
        answer = reply(2)
        _out, err = proc.communicate(timeout=STOP_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=STOP_S)
    assert answer["result"]["content"][0]["text"] == "done", answer  # type: ignore[index]
    assert proc.returncode == 0, err.decode()
    assert b"Traceback" not in err, err.decode()


@pytest.mark.anyio
@pytest.mark.parametrize("started", ["example http"], indirect=True)
async def test_a_listen_stream_asked_for_once_stopping_is_ended_at_once(
    started: tuple[subprocess.Popen[bytes], str]
) -> None:
    """`Server.run_http` (`mcpkit example`, `mcpkit serve`) shares the hub's transport and
    its race: a listen request that reaches it just after SIGTERM is ended at once with its
    result, not held until the 5 s grace cancels it (tests/stream_after_stop.py)."""
    from tests import stream_after_stop as stop_race

    proc, startup = started
    found = URL.search(startup)
    assert found is not None, startup
    url = f"http://127.0.0.1:{found.group(1)}/mcp"
    async with stop_race.one_connection() as http:
        await stop_race.modern_ping(http, url)
        body, headers = stop_race.modern_listen()
        answer = await stop_race.post_while_stopping(proc, http, url, body, headers)
    stop_race.assert_listen_ended(answer, body["id"])
    assert await stop_race.wait_exit(proc, STOP_S) == 0
    _out, err = proc.communicate(timeout=STOP_S)
    assert b"graceful shutdown exceeded" not in err, err.decode()
