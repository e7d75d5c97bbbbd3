"""`Client` against misbehaving servers in real child processes over stdio: crashes, hangs,
garbage on stdout, slow calls with progress, a handshake that never ends, and shutdown.

Each server is a small script (`support.RawServer`): a read loop with handlers the test
overrides; it logs every message it receives to a file the test reads."""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpkit.client import (
    Behaviour,
    Client,
    ConnectionClosed,
    ConnectOptions,
    RequestTimeout,
    Timeouts,
)
from mcpkit.protocol.versions import Era

from .support import RawServer, eventually, pid_gone

pytestmark = pytest.mark.anyio

ERAS = ["legacy", "modern"]


async def gather_errors(*calls: Any) -> list[BaseException | Any]:
    """Run the calls concurrently; each one's result or exception, in order."""
    outcomes: list[Any] = [None] * len(calls)

    async def run(i: int, call: Any) -> None:
        try:
            outcomes[i] = await call()
        except Exception as exc:
            outcomes[i] = exc

    async with anyio.create_task_group() as tg:
        for i, call in enumerate(calls):
            tg.start_soon(run, i, call)
    return outcomes


# --- a crash fails every pending request at once -------------------------------------------

CRASHING = """
calls = []

def on_call(message):
    calls.append(message)
    if len(calls) == 3:
        sys.stderr.write("boom: the server ran out of luck\\n")
        sys.stderr.flush()
        os._exit(7)
"""


@pytest.mark.parametrize("era", ERAS)
async def test_crash_fails_every_pending_request_at_once(tmp_path: Path, era: str) -> None:
    server = RawServer(tmp_path, CRASHING, era)
    async with Client(server.command, timeouts=Timeouts(timeout=30)) as client:
        assert client.era is Era(era)
        started = time.monotonic()
        with anyio.fail_after(5):
            outcomes = await gather_errors(
                *[lambda i=i: client.call_tool("work", {"n": i}) for i in range(3)])
        elapsed = time.monotonic() - started
        assert elapsed < 2.0  # at once, not at the 30 s timeout
        for outcome in outcomes:
            assert isinstance(outcome, ConnectionClosed), outcome
            assert outcome.returncode == 7
            assert "boom: the server ran out of luck" in outcome.stderr_tail
            assert "exit code 7" in str(outcome) and "boom" in str(outcome)
        # later requests fail at once too, with the same reason
        with pytest.raises(ConnectionClosed) as info:
            await client.ping()
        assert info.value.returncode == 7
    assert len(server.received_method("tools/call")) == 3


async def test_server_dying_at_startup_is_reported_with_its_stderr(tmp_path: Path) -> None:
    script = tmp_path / "dying.py"
    script.write_text("import sys\nsys.stderr.write('fatal: no config file\\n')\nsys.exit(3)\n")
    started = time.monotonic()
    with pytest.raises(ConnectionClosed) as info:
        async with Client(
            [sys.executable, "-I", str(script)],
            connect=ConnectOptions(probe_timeout=5, connect_timeout=10),
        ):
            pass
    assert time.monotonic() - started < 3.0
    # 3, or None when the child died before the first write (see the xfail below)
    assert info.value.returncode in (3, None)
    assert "fatal: no config file" in info.value.stderr_tail


QUITTING = """
def on_ping(message):  # dies on the first ping, slowly
    sys.stderr.write("shutting down: lost the database\\n")
    sys.stderr.flush()
    os.close(1)  # stdout ends: the client notices at once
    os.close(0)  # a write from the client now fails (EPIPE) while the process still runs
    log({"closed": True})
    time.sleep(0.5)
    os._exit(5)
"""


async def test_a_server_exiting_slowly_is_reported_with_its_exit_code(tmp_path: Path) -> None:
    server = RawServer(tmp_path, QUITTING)
    async with Client(server.command, era="legacy") as client:
        with pytest.raises(ConnectionClosed) as info:
            await client.ping()  # the reader waits for the exit code
    assert info.value.returncode == 5
    assert "lost the database" in info.value.stderr_tail


async def test_a_write_to_an_exiting_server_reports_its_exit_code(tmp_path: Path) -> None:
    server = RawServer(tmp_path, QUITTING)
    async with Client(server.command, era="legacy") as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(gather_errors, client.ping)  # makes the server quit
            # its stdin is closed; it has not exited yet
            await server.wait_for(lambda seen: any("closed" in m for m in seen))
            with pytest.raises(ConnectionClosed) as info:
                await client.ping()  # this write fails
    assert "lost the database" in info.value.stderr_tail
    assert info.value.returncode == 5


# --- a hang ends at the timeout, and the server is told ------------------------------------

HANGING = """
def on_call(message):
    pass  # never answers
"""


@pytest.mark.parametrize("era", ERAS)
async def test_hang_times_out_and_the_server_is_told(tmp_path: Path, era: str) -> None:
    server = RawServer(tmp_path, HANGING, era)
    async with Client(server.command, timeouts=Timeouts(timeout=0.5)) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as info:
            await client.call_tool("work")
        elapsed = time.monotonic() - started
        assert 0.5 <= elapsed < 1.5
        assert info.value.method == "tools/call"
        assert info.value.seconds == 0.5
        call = server.received_method("tools/call")[0]
        cancelled = await eventually(lambda: server.received_method("notifications/cancelled"))
        assert [c["params"]["requestId"] for c in cancelled] == [call["id"]]
        assert "timeout" in cancelled[0]["params"]["reason"]
        await client.ping()  # the connection is still usable


# --- garbage on stdout is skipped ----------------------------------------------------------

NOISY = r"""
def on_initialize(message):
    raw("Starting raw server v0 (this banner is not JSON)\n")
    result(message, {"protocolVersion": message["params"]["protocolVersion"],
                     "capabilities": {"tools": {}},
                     "serverInfo": {"name": "raw", "version": "0"}})


def on_discover(message):
    raw("debug: discover received\n")
    if ERA == "modern":
        result(message, {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                         "capabilities": {"tools": {}}})
    else:
        error(message, -32601, "Method not found")


def on_call(message):
    raw("not json at all\n")
    raw('{"jsonrpc": "2.0", "id": \n')
    raw("[1, 2\n")
    raw('{"some": "json", "but": "not JSON-RPC"}\n')
    raw("\x00\x01\x02 binary junk \xff\n")
    raw('{"jsonrpc": "2.0", "id": 987654, "result": {}}\n')  # nobody asked
    result(message, {"content": [{"type": "text", "text": "fine"}]})
"""


@pytest.mark.parametrize("era", ERAS)
async def test_garbage_lines_are_skipped_and_logged(tmp_path: Path, era: str,
                                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpkit.client.session")
    server = RawServer(tmp_path, NOISY, era)
    async with Client(server.command, timeouts=Timeouts(timeout=5)) as client:
        assert client.era is Era(era)
        result = await client.call_tool("work")
        assert result.content[0].text == "fine"  # type: ignore[union-attr]
        await client.ping()
    skipped = [r.getMessage() for r in caplog.records
               if r.name == "mcpkit.client.session" and r.levelno == logging.WARNING]
    assert any("not json at all" in m for m in skipped)
    assert any("[1, 2" in m for m in skipped)
    assert any("not JSON-RPC" in m for m in skipped)
    assert any("binary junk" in m for m in skipped)
    assert any("debug: discover received" in m for m in skipped)  # while probing
    if era == "legacy":
        assert any("banner is not JSON" in m for m in skipped)  # while initializing
    assert all("skipping a message" in m for m in skipped)
    assert len(skipped) >= 6
    assert any("unknown request id 987654" in r.getMessage() for r in caplog.records)


# --- progress restarts the timeout; the maximum still bounds the call ----------------------

PROGRESSING = """
def on_call(message):
    token = message["params"].get("_meta", {}).get("progressToken")
    steps = message["params"]["arguments"]["steps"]
    for step in range(steps):
        time.sleep(0.2)
        if token is not None:
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": step + 1, "total": steps}})
    result(message, {"content": [{"type": "text", "text": "slow but done"}]})
"""


async def test_progress_keeps_a_long_call_alive(tmp_path: Path) -> None:
    server = RawServer(tmp_path, PROGRESSING)
    seen: list[float] = []
    async with Client(server.command, timeouts=Timeouts(timeout=0.5, maximum=10)) as client:
        started = time.monotonic()
        result = await client.call_tool("work", {"steps": 6},
                                        on_progress=lambda p, t, m: seen.append(p))
        elapsed = time.monotonic() - started
    assert result.content[0].text == "slow but done"  # type: ignore[union-attr]
    assert elapsed > 1.0  # well past the 0.5 s timeout
    assert seen == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]


async def test_max_timeout_bounds_a_call_despite_progress(tmp_path: Path) -> None:
    server = RawServer(tmp_path, PROGRESSING)
    async with Client(server.command, timeouts=Timeouts(timeout=0.5, maximum=0.8)) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeout, match=r"maximum time of 0\.8 s") as info:
            await client.call_tool("work", {"steps": 8}, on_progress=lambda p, t, m: None)
        elapsed = time.monotonic() - started
        assert 0.8 <= elapsed < 1.2
        assert info.value.seconds == 0.8
        call = server.received_method("tools/call")[0]
    # the server (busy until its loop reads again) got the cancellation
    assert [c["params"]["requestId"] for c in server.received_method(
        "notifications/cancelled")] == [call["id"]]


async def test_progress_without_a_callback_does_not_reset_the_timeout(tmp_path: Path) -> None:
    """No `on_progress`, no progress token: the server sends none, the timeout holds."""
    server = RawServer(tmp_path, PROGRESSING)
    async with Client(server.command, timeouts=Timeouts(timeout=0.5)) as client:
        with pytest.raises(RequestTimeout, match=r"timeout of 0\.5 s"):
            await client.call_tool("work", {"steps": 6})


async def test_progress_does_not_reset_when_told_not_to(tmp_path: Path) -> None:
    server = RawServer(tmp_path, PROGRESSING)
    seen: list[float] = []
    async with Client(
        server.command,
        timeouts=Timeouts(timeout=0.5, reset_on_progress=False),
    ) as client:
        started = time.monotonic()
        with pytest.raises(RequestTimeout, match=r"timeout of 0\.5 s"):
            await client.call_tool("work", {"steps": 6},
                                   on_progress=lambda p, t, m: seen.append(p))
        assert time.monotonic() - started < 0.9
    assert seen[:2] == [1.0, 2.0]  # progress was still reported


# --- a handshake that never ends -----------------------------------------------------------

MUTE = """
def on_discover(message):
    pass

def on_initialize(message):
    pass
"""


@pytest.mark.parametrize("pinned", ["auto", "legacy"])
async def test_connect_fails_within_connect_timeout(tmp_path: Path, pinned: str) -> None:
    server = RawServer(tmp_path, MUTE)
    started = time.monotonic()
    with pytest.raises(TimeoutError, match=r"longer than 1 s"):
        async with Client(
            server.command,
            era=pinned,
            connect=ConnectOptions(connect_timeout=1.0, probe_timeout=0.3),
            timeouts=Timeouts(timeout=30),
        ):
            pass
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 2.0
    methods = [m.get("method") for m in server.received() if "method" in m]
    assert "initialize" in methods
    if pinned == "auto":
        assert methods[0] == "server/discover"
    assert pid_gone(server.pid())  # the child was stopped


# --- closing stops the child ---------------------------------------------------------------


async def test_closing_the_client_stops_the_child(tmp_path: Path) -> None:
    server = RawServer(tmp_path, "")
    async with Client(server.command) as client:
        await client.ping()
        pid = server.pid()
        assert not pid_gone(pid)
    assert pid_gone(pid)
    assert client.session.closed_reason is not None


DEAF = """
def main():
    log({"pid": os.getpid()})
    while True:
        line = sys.stdin.readline()
        if not line:
            while True:  # ignores the end of its input
                time.sleep(0.05)
        message = json.loads(line)
        log(message)
        {"server/discover": on_discover, "initialize": on_initialize}.get(
            message.get("method"), on_other)(message)
"""


async def test_closing_stops_a_child_that_ignores_end_of_input(tmp_path: Path) -> None:
    server = RawServer(tmp_path, DEAF)
    started = time.monotonic()
    async with Client(server.command, era="legacy") as client:
        pid = server.pid()
        assert client.era is Era.LEGACY
    assert pid_gone(pid)  # SIGTERM after the close timeout
    assert time.monotonic() - started < 4.0


# --- many requests at once, big and odd messages -------------------------------------------

ECHOING = r"""
def on_call(message):
    size = message["params"]["arguments"].get("size", 0)
    text = "\u2028é\u00a0" + "x" * size + str(message["params"]["arguments"].get("n"))
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": {
        "content": [{"type": "text", "text": text}]}}, ensure_ascii=False) + "\n")
    sys.stdout.flush()
"""


async def test_many_concurrent_requests_over_one_pipe(tmp_path: Path) -> None:
    server = RawServer(tmp_path, ECHOING)
    async with Client(
        server.command,
        era="legacy",
        behaviour=Behaviour(validate_output=False),
    ) as client:
        with anyio.fail_after(5):
            outcomes = await gather_errors(
                *[lambda i=i: client.call_tool("work", {"n": i}) for i in range(200)])
    texts = [o.content[0].text for o in outcomes]
    assert texts == [f"\u2028é\u00a0{i}" for i in range(200)]  # each got its own answer
    assert len(server.received_method("tools/call")) == 200  # every line parsed


async def test_a_large_message(tmp_path: Path) -> None:
    server = RawServer(tmp_path, ECHOING)
    async with Client(
        server.command,
        era="legacy",
        behaviour=Behaviour(validate_output=False),
    ) as client:
        big = "y" * (4 * 1024 * 1024)
        with anyio.fail_after(5):
            result = await client.call_tool("work", {"n": 1, "size": 3 * 1024 * 1024,
                                                     "blob": big})
    assert len(result.content[0].text) == 3 * 1024 * 1024 + 4  # type: ignore[union-attr]
