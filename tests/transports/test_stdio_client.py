"""StdioProcess: real child processes, the spec's shutdown escalation, error reports."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpkit.transports.client.process import StdioProcess, StdioProcessError

pytestmark = pytest.mark.anyio

INIT_PARAMS = {
    "protocolVersion": "2025-11-25",
    "capabilities": {},
    "clientInfo": {"name": "tests", "version": "0"},
}

STUBBORN = """
import signal, subprocess, sys, time
def on_term(signum, frame):
    sys.stderr.write("got SIGTERM, ignoring it\\n")
    sys.stderr.flush()
signal.signal(signal.SIGTERM, on_term)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
print(child.pid, flush=True)  # also: the SIGTERM handler is installed
while True:  # never reads stdin, so its closing goes unnoticed
    time.sleep(0.05)
"""

DYING = """
import sys
sys.stderr.write("x" * 70000 + "\\nfatal: the server could not start\\n")
sys.stderr.flush()
sys.exit(3)
"""

ENV_AND_CWD = """
import json, os, sys
print(json.dumps({"cwd": os.getcwd(), "var": os.environ.get("MCPKIT_TEST_VAR")}), flush=True)
sys.stdin.read()
"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _next(lines: Any) -> dict[str, Any]:
    with anyio.fail_after(15):
        line = await lines.__anext__()
    message: dict[str, Any] = json.loads(line)
    return message


async def test_round_trip_with_fixture_server() -> None:
    command = [sys.executable, "-m", "mcpkit.testing.conformance_server", "--transport", "stdio"]
    started = time.monotonic()
    async with StdioProcess(command) as proc:
        lines = proc.receive()
        await proc.send(json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT_PARAMS}).encode())
        init = await _next(lines)
        assert init["id"] == 1
        assert init["result"]["serverInfo"]["name"] == "mcpkit-conformance-server"
        await proc.send(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
        await proc.send(b'{"jsonrpc": "2.0", "id": 2, "method": "tools/list"}')
        tools = await _next(lines)
        assert "test_simple_text" in {t["name"] for t in tools["result"]["tools"]}
        await proc.send(json.dumps({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "test_simple_text", "arguments": {}}}).encode())
        call = await _next(lines)
        assert call["result"]["content"][0]["text"].startswith("This is a simple text")
        pid = proc.pid
    # closing stdin was enough: a clean exit, no signals
    assert proc.returncode == 0
    assert time.monotonic() - started < 20
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def _gone_or_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


async def test_stubborn_child_is_killed_within_bounds(tmp_path: Path) -> None:
    script = tmp_path / "stubborn.py"
    script.write_text(STUBBORN)
    proc = StdioProcess([sys.executable, str(script)], close_timeout=0.5, term_timeout=0.5)
    async with proc:
        lines = proc.receive()
        with anyio.fail_after(15):
            grandchild = int(await lines.__anext__())  # the SIGTERM handler is installed
        started = time.monotonic()
    elapsed = time.monotonic() - started
    assert proc.returncode == -signal.SIGKILL
    assert "got SIGTERM" in proc.stderr_tail  # SIGTERM came first, then SIGKILL
    assert 0.9 <= elapsed < 0.5 + 0.5 + 5 + 1 + 2  # close + term + (kill, stderr) + slack
    # the whole process group went: the grandchild too
    with anyio.fail_after(5):
        while not _gone_or_zombie(grandchild):  # noqa: ASYNC110 (polling another process)
            await anyio.sleep(0.05)


async def test_dead_child_reports_returncode_and_stderr_tail(tmp_path: Path) -> None:
    script = tmp_path / "dying.py"
    script.write_text(DYING)
    async with StdioProcess([sys.executable, str(script)]) as proc:
        with anyio.fail_after(15):
            assert await proc.wait() == 3
        assert proc.returncode == 3
        tail = proc.stderr_tail
        assert tail.endswith("fatal: the server could not start\n")
        assert len(tail.encode()) <= 64 * 1024
        with pytest.raises(StdioProcessError) as info:
            await proc.send(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
        assert info.value.returncode == 3
        assert "could not start" in str(info.value)
        lines = [line async for line in proc.receive()]
        assert lines == []
    assert proc.returncode == 3


async def test_env_and_cwd(tmp_path: Path) -> None:
    script = tmp_path / "env.py"
    script.write_text(ENV_AND_CWD)
    env = {**os.environ, "MCPKIT_TEST_VAR": "hello"}
    async with StdioProcess([sys.executable, str(script)], env=env, cwd=tmp_path) as proc:
        seen = await _next(proc.receive())
    assert seen == {"cwd": str(tmp_path), "var": "hello"}
    assert proc.returncode == 0
