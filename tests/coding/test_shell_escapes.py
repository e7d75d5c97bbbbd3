"""Processes that leave their command's process group are stopped too: `setsid` children,
double forks, `nohup`, children that ignore SIGTERM and children that clear their
environment. Real processes, checked by PID in /proc, after a timeout, a normal exit,
`bash_kill`, a cancelled request, and SIGTERM/exit of a real `mcpkit serve` process; with
cgroup tracking (where this machine can make a cgroup) and with the process table alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.coding.processes import coding_client, tree_env
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit import Client
from mcpkit.client import ConnectOptions
from mcpkit.coding import tracking
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.scope import Scopes
from mcpkit.coding.tracking import Tracking
from mcpkit.coding.workspace import Workspace

pytestmark = pytest.mark.anyio

CGROUPS = tracking.Cgroups.make()
if CGROUPS is not None:
    CGROUPS.close()
MODES = [pytest.param(Tracking.PROCESS_TABLE, id="process-table"),
         pytest.param(Tracking.CGROUP, id="cgroup", marks=pytest.mark.skipif(
             CGROUPS is None, reason="no writable cgroup v2 hierarchy here"))]

ESCAPES = (
    "setsid sleep 1000 >/dev/null 2>&1 & echo $! >> pids; "  # a new session
    "nohup sleep 1000 >/dev/null 2>&1 & echo $! >> pids; "  # same group, ignores SIGHUP
    "(setsid sh -c 'sleep 1000 & echo $! >> pids' &); "  # double fork: orphan in a new session
)
ESCAPED = 3
STUBBORN = (
    "setsid sh -c 'trap \"\" TERM; echo $$ >> pids; sleep 1000 & echo $! >> pids; wait' "
    ">/dev/null 2>&1 & "  # a new session that ignores SIGTERM (needs the SIGKILL)
)
CLEARED = "(env -i setsid sleep 1000 >/dev/null 2>&1 & echo $! >> pids); "
"""A double-forked orphan in a new session with an empty environment: only a cgroup
attributes it to its command; without one it is stopped when the server exits."""


def state(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid), or None when the pid is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2:].split()
    return fields[0].decode(), int(fields[1])


def survivors(pids: list[int]) -> list[int]:
    """Pids still running, or left as unreaped zombies of this process."""
    left = []
    for pid in pids:
        found = state(pid)
        if found is not None and (found[0] != "Z" or found[1] == os.getpid()):
            left.append(pid)
    return left


async def wait_survivors(pids: list[int], limit_s: float = 5.0) -> list[int]:
    deadline = time.monotonic() + limit_s
    left = survivors(pids)
    while left and time.monotonic() < deadline:
        await anyio.sleep(0.05)
        left = survivors(pids)
    return left


async def escaped_pids(root: Path, count: int, limit_s: float = 10.0) -> list[int]:
    pidfile = root / "pids"
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if pidfile.exists():
            pids = [int(x) for x in pidfile.read_text().split()]
            if len(pids) >= count:
                return pids
        await anyio.sleep(0.05)
    raise AssertionError(f"the command wrote {pidfile.read_text() if pidfile.exists() else ''}")


def kill_all(pids: list[int]) -> None:
    """Test hygiene only: whatever survived a failing assertion."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture(params=MODES)
def env(request: pytest.FixtureRequest, tmp_path: Path) -> CodingEnv:
    root = tmp_path / "ws"
    root.mkdir()
    return CodingEnv(Workspace.at(root), Scopes(tmp_path / "out"),
                     process_tracking=request.param)


@pytest.fixture
async def client(env: CodingEnv) -> AsyncIterator[Client]:
    async with coding_client(env) as c:
        yield c
    env.processes.close()


def escapes(env: CodingEnv) -> tuple[str, int]:
    if env.process_tracking is Tracking.CGROUP:
        return ESCAPES + CLEARED, ESCAPED + 1
    return ESCAPES, ESCAPED


async def call(client: Client, name: str, **arguments: Any) -> Any:
    with anyio.fail_after(30):
        return await client.call_tool(name, arguments)


async def test_timeout_stops_every_escaped_process(client: Client, env: CodingEnv) -> None:
    command, count = escapes(env)
    result = await call(client, "bash", command=command + STUBBORN + "sleep 100", timeout=800)
    assert result.structured_content["timed_out"] is True
    pids = await escaped_pids(env.workspace.root, count + 2)
    try:
        assert survivors(pids) == []  # gone (and reaped) by the time the result is back
    finally:
        kill_all(pids)


async def test_finished_command_leaves_nothing(client: Client, env: CodingEnv) -> None:
    command, count = escapes(env)
    result = await call(client, "bash", command=command + "sleep 0.2; echo done")
    assert result.structured_content["exit_code"] == 0
    assert "done" in result.structured_content["output"]
    pids = await escaped_pids(env.workspace.root, count)
    try:
        assert survivors(pids) == []
    finally:
        kill_all(pids)


async def test_bash_kill_stops_every_escaped_process(client: Client, env: CodingEnv) -> None:
    command, count = escapes(env)
    started = await call(client, "bash", command=command + "sleep 100",
                         run_in_background=True)
    pids = await escaped_pids(env.workspace.root, count)
    try:
        assert survivors(pids) == pids  # really running until the kill
        killed = await call(client, "bash_kill", job_id=started.structured_content["job_id"])
        assert killed.structured_content["running"] is False
        assert survivors(pids) == []
    finally:
        kill_all(pids)


async def test_cancellation_stops_every_escaped_process(client: Client, env: CodingEnv
                                                        ) -> None:
    command, count = escapes(env)
    with anyio.fail_after(20), pytest.raises(TimeoutError):
        await client.call_tool("bash", {"command": command + "sleep 100"}, timeout=1.0)
    pids = await escaped_pids(env.workspace.root, count)
    try:
        assert await wait_survivors(pids) == []
    finally:
        kill_all(pids)


async def test_a_command_does_not_stop_another_commands_processes(
    client: Client, env: CodingEnv
) -> None:
    """Stopping one command leaves a concurrent command's escaped processes alone."""
    root = env.workspace.root
    job = await call(client, "bash", command="setsid sleep 1000 & echo $! > other; wait",
                     run_in_background=True)
    deadline = time.monotonic() + 10
    while not (root / "other").exists() or not (root / "other").read_text().strip():
        assert time.monotonic() < deadline
        await anyio.sleep(0.05)
    other = int((root / "other").read_text())
    try:
        await call(client, "bash", command=ESCAPES + "sleep 100", timeout=500)
        assert survivors([other]) == [other]
        await call(client, "bash_kill", job_id=job.structured_content["job_id"])
        assert survivors([other]) == []
    finally:
        kill_all([other])


# --- a real server process ------------------------------------------------------------------


def serve(root: Path, mode: Tracking) -> list[str]:
    return [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio", "--workspace",
            str(root), "--process-tracking", mode.value]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "stdin closed"])
async def test_server_exit_stops_everything(tmp_path: Path, mode: Tracking, how: str) -> None:
    """Whatever the command did (env cleared included), nothing runs once the server is gone:
    the background job and all it started."""
    command = ESCAPES + CLEARED
    pids: list[int] = []
    try:
        with anyio.fail_after(30):
            async with Client(serve(tmp_path, mode), connect=ConnectOptions(env=tree_env())) as c:
                server_pid = int((await c.call_tool("bash", {"command": "echo $PPID"})
                                  ).structured_content["output"])
                job = await c.call_tool("bash", {"command": command + "exec sleep 100",
                                                 "run_in_background": True})
                pids = await escaped_pids(tmp_path, ESCAPED + 1)
                pids.append(job.structured_content["pid"])
                assert survivors(pids) == pids
                if how != "stdin closed":
                    os.kill(server_pid, getattr(signal, how))
                    deadline = time.monotonic() + 10
                    while (found := state(server_pid)) is not None and found[0] != "Z":
                        assert time.monotonic() < deadline, "the server did not exit"
                        await anyio.sleep(0.05)
        assert await wait_survivors(pids) == []
    finally:
        kill_all(pids)


@pytest.fixture(params=MODES)
def http_server(request: pytest.FixtureRequest, tmp_path: Path
                ) -> Iterator[tuple[int, subprocess.Popen[bytes]]]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(tmp_path), "--port",
         str(port), "--process-tracking", request.param.value],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
        yield port, proc
    finally:
        stop_process(proc)


async def test_http_server_sigterm_stops_everything(
    tmp_path: Path, http_server: tuple[int, subprocess.Popen[bytes]]
) -> None:
    port, proc = http_server
    pids: list[int] = []
    try:
        with anyio.fail_after(30):
            async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                job = await c.call_tool("bash", {"command": ESCAPES + CLEARED + "exec sleep 100",
                                                 "run_in_background": True})
                pids = await escaped_pids(tmp_path, ESCAPED + 1)
                pids.append(job.structured_content["pid"])
                assert survivors(pids) == pids
        proc.send_signal(signal.SIGTERM)
        await anyio.to_thread.run_sync(proc.wait, 15)
        assert await wait_survivors(pids) == []
    finally:
        kill_all(pids)


async def test_server_attributes_adopted_orphans_without_a_cgroup(tmp_path: Path) -> None:
    """`mcpkit serve` is wholly the server: without a cgroup, an orphan that cleared its
    environment and left the session is still stopped with its command (the one command
    running when it started), while a job spawned meanwhile by the server itself survives."""
    command = ESCAPES + CLEARED + "sleep 100"
    pids: list[int] = []
    try:
        with anyio.fail_after(30):
            async with Client(
                serve(tmp_path, Tracking.PROCESS_TABLE),
                connect=ConnectOptions(env=tree_env()),
            ) as c:
                async with anyio.create_task_group() as tg:
                    async def timing_out() -> None:
                        result = await c.call_tool("bash", {"command": command,
                                                            "timeout": 1500})
                        assert result.structured_content["timed_out"] is True

                    tg.start_soon(timing_out)
                    pids = await escaped_pids(tmp_path, ESCAPED + 1)
                    job = await c.call_tool("bash", {"command": "exec sleep 100",
                                                     "run_in_background": True})
                job_pid = job.structured_content["pid"]
                assert survivors(pids) == []  # every escaped process, the cleared one too
                assert survivors([job_pid]) == [job_pid]  # spawned after it, but not by it
                await c.call_tool("bash_kill", {"job_id": job.structured_content["job_id"]})
    finally:
        kill_all(pids)
