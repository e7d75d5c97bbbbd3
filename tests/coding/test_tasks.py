"""Tasks cannot evict each other: a task with a command or background job running keeps its
scope (read records, jobs) however many other task ids come; at the limit, with every task
busy, a new task is refused with a clear error. Real processes: an in-process server running
real commands, and `mcpkit serve --max-tasks` over HTTP."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.coding.processes import alive, coding_client, kill_jobs
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit import Client, McpError
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.scope import MAX_TASKS, Scopes, current_task
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace

pytestmark = pytest.mark.anyio


@pytest.fixture
def env(tmp_path: Path) -> CodingEnv:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "notes.txt").write_text("v1\n")
    return CodingEnv(Workspace.at(tmp_path / "ws"), Scopes(tmp_path / "out"))


@pytest.fixture
async def client(env: CodingEnv) -> AsyncIterator[Client]:
    async with coding_client(env) as c:
        yield c


async def as_task(client: Client, task: str, tool: str, **arguments: Any) -> Any:
    token = current_task.set(task)
    try:
        with anyio.fail_after(30):
            return await client.call_tool(tool, arguments)
    finally:
        current_task.reset(token)


async def test_many_other_tasks_do_not_evict_a_busy_one(client: Client) -> None:
    await as_task(client, "victim", "view", file_path="notes.txt")
    job = (await as_task(client, "victim", "bash", command="exec sleep 100",
                         run_in_background=True)).structured_content
    for i in range(MAX_TASKS + 1):  # the 257 other tasks of the attack
        result = await as_task(client, f"other-{i}", "view", file_path="notes.txt")
        assert not result.is_error
    assert alive(job["pid"])
    state = await as_task(client, "victim", "bash_output", job_id=job["job_id"])
    assert not state.is_error and state.structured_content["running"] is True
    # its read record survived too: it may still edit without viewing again
    edited = await as_task(client, "victim", "edit", file_path="notes.txt",
                           old_string="v1", new_string="v2")
    assert not edited.is_error


async def test_full_of_busy_tasks_refuses_a_new_one(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    env = CodingEnv(Workspace.at(tmp_path / "ws"), Scopes(tmp_path / "out", max_tasks=2))
    async with Client(build_server(env)) as c:
        pids = [(await as_task(c, t, "bash", command="exec sleep 100", run_in_background=True)
                 ).structured_content["pid"] for t in ("a", "b")]
        with pytest.raises(McpError, match="too many tasks: all 2 task scopes"):
            await as_task(c, "c", "bash", command="echo hi")
        assert all(alive(pid) for pid in pids)
        await as_task(c, "a", "bash_kill", job_id=next(iter(env.scopes.get("a").jobs)))
        assert not (await as_task(c, "c", "bash", command="echo hi")).is_error
    kill_jobs(env)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`mcpkit serve --max-tasks 2` over HTTP: the URL to append a task id to."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(tmp_path), "--port",
         str(port), "--max-tasks", "2"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}/mcp?task_id="
    finally:
        stop_process(proc)


async def test_serve_max_tasks_over_http(served: str) -> None:
    with anyio.fail_after(30):
        for task in ("a", "b"):
            async with Client(served + task) as c:
                started = await c.call_tool("bash", {"command": "exec sleep 100",
                                                     "run_in_background": True})
                assert not started.is_error
        async with Client(served + "c") as c:
            with pytest.raises(McpError, match="too many tasks"):
                await c.call_tool("bash", {"command": "true"})
