"""The shell tools (`bash`, `bash_output`, `bash_kill`) with real processes, in memory and over
real stdio (`mcpkit serve`)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from tests.coding.processes import alive, coding_client, tree_env

from mcpkit import Client
from mcpkit.client import ConnectOptions
from mcpkit.coding import shell
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.scope import Scopes, current_task
from mcpkit.coding.server import build_server
from mcpkit.coding.workspace import Workspace

pytestmark = pytest.mark.anyio


async def wait_gone(pids: list[int], limit_s: float = 5.0) -> list[int]:
    """The pids still alive after up to `limit_s` s."""
    deadline = time.monotonic() + limit_s
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        await anyio.sleep(0.05)


def read(path: str) -> str:
    return Path(path).read_text()


def size(path: str) -> int:
    return os.path.getsize(path)


def text_of(result: Any) -> str:
    return "".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture
def env(tmp_path: Path) -> CodingEnv:
    root = tmp_path / "ws"
    (root / "sub").mkdir(parents=True)
    return CodingEnv(Workspace.at(root), Scopes(tmp_path / "out"))


@pytest.fixture
async def client(env: CodingEnv) -> AsyncIterator[Client]:
    async with coding_client(env) as c:
        yield c


async def bash(client: Client, command: str, **args: Any) -> Any:
    with anyio.fail_after(30):
        return await client.call_tool("bash", {"command": command, **args})


# --- foreground ---------------------------------------------------------------------------------


async def test_success_and_exit_codes(client: Client, env: CodingEnv) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert {"bash", "bash_output", "bash_kill"} <= set(tools)
    assert tools["bash"].output_schema is not None

    result = await bash(client, "echo hello; echo oops >&2; pwd")
    assert not result.is_error
    out = text_of(result)
    assert "hello" in out and "oops" in out and str(env.workspace.root) in out
    sc = result.structured_content
    assert sc["exit_code"] == 0 and sc["timed_out"] is False and sc["truncated"] is False
    assert "hello" in read(sc["output_path"])

    failed = await bash(client, "echo before; exit 3")
    assert not failed.is_error  # a non-zero exit is a normal result
    assert failed.structured_content["exit_code"] == 3
    assert "[exit code 3]" in text_of(failed)

    sub = await bash(client, "pwd; cat < /dev/stdin | wc -c", workdir="sub")
    assert text_of(sub).startswith(str(env.workspace.root / "sub"))
    assert "0" in text_of(sub)  # stdin is /dev/null


async def test_argument_errors(client: Client, tmp_path: Path) -> None:
    too_long = await bash(client, "true", timeout=600_001)
    assert too_long.is_error and "maximum" in text_of(too_long)
    outside = await bash(client, "true", workdir=str(tmp_path))
    assert outside.is_error and "outside the workspace" in text_of(outside)
    dotdot = await bash(client, "true", workdir="../")
    assert dotdot.is_error
    missing = await bash(client, "true", workdir="nope")
    assert missing.is_error


async def test_ansi_stripped(client: Client) -> None:
    result = await bash(client, r"printf '\033[31mred\033[0m \033]0;title\007plain\033[2K\n'")
    out = text_of(result)
    assert "\x1b" not in out and "red plain" in out
    assert read(result.structured_content["output_path"]) == "red plain\n"


async def test_environment_is_deny_by_default(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCPKIT_TEST_API_TOKEN", "hunter2")
    monkeypatch.setenv("DATABASE_URL", "postgres://u:hunter3@db/x")
    monkeypatch.setenv("MCPKIT_TEST_PLAIN", "hunter4")  # not secret-looking: still not passed
    monkeypatch.setenv("LC_PAPER", "C")
    out = text_of(await bash(client, "env"))
    assert "hunter" not in out and "LC_PAPER=C" in out
    assert shell.is_safe_name("PATH") and shell.is_safe_name("LC_ALL")
    assert not shell.is_safe_name("MCPKIT_SERVE_TOKEN") and not shell.is_safe_name("GH_PAT")


async def test_timeout_kills_the_whole_group(client: Client) -> None:
    # children that ignore SIGTERM: SIGKILL ~2 s later
    command = 'trap "" TERM; sleep 100 & echo $!; sleep 100 & echo $!; echo $$; wait'
    started = time.monotonic()
    result = await bash(client, command, timeout=500)
    assert time.monotonic() - started < 6
    sc = result.structured_content
    assert sc["exit_code"] == 124 and sc["timed_out"] is True
    assert "timed out" in text_of(result)
    pids = [int(line) for line in text_of(result).splitlines() if line.strip().isdigit()]
    assert len(pids) == 3
    assert await wait_gone(pids, 2.0) == []


async def test_cancelling_the_request_kills_the_group(client: Client, env: CodingEnv) -> None:
    pidfile = env.workspace.root / "pids"
    command = "sleep 100 & echo $! > pids; sleep 100 & echo $! >> pids; echo $$ >> pids; wait"
    with anyio.fail_after(20), pytest.raises(TimeoutError):
        await client.call_tool("bash", {"command": command}, timeout=1.0)
    pids = [int(x) for x in pidfile.read_text().split()]
    assert len(pids) == 3
    assert await wait_gone(pids, 5.0) == []


async def test_leftovers_of_a_finished_command_are_stopped(client: Client) -> None:
    result = await bash(client, "sleep 100 >/dev/null 2>&1 & echo $!")
    assert result.structured_content["exit_code"] == 0
    assert await wait_gone([int(text_of(result).split()[0])], 5.0) == []


async def test_huge_output_is_bounded(client: Client) -> None:
    command = r"head -c 100000000 /dev/zero | tr '\0' 'a' | fold -w 100; echo; echo END"
    started = time.monotonic()
    result = await bash(client, command)
    assert time.monotonic() - started < 20
    out = text_of(result)
    sc = result.structured_content
    assert sc["exit_code"] == 0 and sc["truncated"] is True
    assert len(out) < 100_000
    assert "lines cut" in out and sc["output_path"] in out
    assert out.rstrip().splitlines()[-2] == "END"
    assert out.splitlines()[0] == "a" * 100
    assert size(sc["output_path"]) == 100_000_000 + 1_000_000 + 4


async def test_many_short_lines_keep_head_and_tail(client: Client) -> None:
    result = await bash(client, "seq 1 1000")
    out = text_of(result).splitlines()
    assert out[0] == "1" and out[199] == "200"
    assert out[200].startswith("… 600 lines cut")
    assert out[201] == "801" and out[-2] == "1000"
    small = await bash(client, "seq 1 400")
    assert small.structured_content["truncated"] is False
    assert text_of(small).splitlines()[:400] == [str(i) for i in range(1, 401)]


async def test_progress_notifications(client: Client) -> None:
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    with anyio.fail_after(20):
        result = await client.call_tool(
            "bash", {"command": "echo a; sleep 2.5; echo b"}, on_progress=on_progress)
    assert result.structured_content["exit_code"] == 0
    assert len(seen) >= 2
    assert all(m is not None and m.startswith("running ") and "lines" in m for _, m in seen)
    assert [p for p, _ in seen] == sorted(p for p, _ in seen)


def test_output_sink_splits_escapes_across_reads() -> None:
    sink = shell.OutputSink()
    for chunk in (b"ab\x1b[3", b"1mcd\x1b", b"[0m\n"):
        sink.feed(chunk)
    sink.close()
    assert sink.render(None) == ("abcd\n", False)


def test_output_sink_one_huge_line() -> None:
    sink = shell.OutputSink()
    for _ in range(100):
        sink.feed(b"x" * 10_000)
    sink.close()
    text, truncated = sink.render("/tmp/out.log")
    assert truncated and len(text) < 40_000
    assert "cut (" in text and "/tmp/out.log" in text


# --- background jobs ----------------------------------------------------------------------------


async def test_background_job_output_and_kill(client: Client) -> None:
    started = await bash(client, "for i in 1 2 3; do echo line$i; done; exec sleep 100",
                         run_in_background=True)
    assert not started.is_error
    sc = started.structured_content
    job_id, pid = sc["job_id"], sc["pid"]
    assert sc["exit_code"] is None and job_id in text_of(started)

    with anyio.fail_after(5):
        while True:
            out = await client.call_tool("bash_output", {"job_id": job_id})
            if "line3" in text_of(out):
                break
            await anyio.sleep(0.05)
    assert out.structured_content["running"] is True
    again = await client.call_tool("bash_output", {"job_id": job_id})
    assert "line1" not in text_of(again)  # only what is new
    assert again.structured_content["new_bytes"] == 0

    killed = await client.call_tool("bash_kill", {"job_id": job_id})
    assert killed.structured_content["running"] is False
    assert killed.structured_content["killed"] is True
    assert killed.structured_content["exit_code"] == 128 + 15
    assert await wait_gone([pid], 2.0) == []

    unknown = await client.call_tool("bash_output", {"job_id": "job-nope"})
    assert unknown.is_error and "unknown job_id" in text_of(unknown)
    assert (await client.call_tool("bash_kill", {"job_id": "job-nope"})).is_error


async def test_background_job_exit_code(client: Client) -> None:
    job_id = (await bash(client, "echo done; exit 7", run_in_background=True)
              ).structured_content["job_id"]
    with anyio.fail_after(5):
        while True:
            out = await client.call_tool("bash_output", {"job_id": job_id})
            if not out.structured_content["running"]:
                break
            await anyio.sleep(0.05)
    assert out.structured_content["exit_code"] == 7
    assert "exit code 7" in text_of(await client.call_tool("bash_output", {"job_id": job_id}))


async def test_background_output_is_bounded(client: Client) -> None:
    job_id = (await bash(client, "seq 1 100000", run_in_background=True)
              ).structured_content["job_id"]
    seen = ""
    with anyio.fail_after(5):
        while True:
            out = await client.call_tool("bash_output", {"job_id": job_id})
            seen += text_of(out)
            if not out.structured_content["running"]:
                break
            await anyio.sleep(0.05)
    assert "100000" in seen and "lines cut" in seen
    assert len(seen) < 200_000


async def test_jobs_are_per_task(env: CodingEnv) -> None:
    server = build_server(env)
    token = current_task.set("task-a")
    try:
        async with Client(server) as a:
            job_id = (await bash(a, "exec sleep 100", run_in_background=True)
                      ).structured_content["job_id"]
            assert not (await a.call_tool("bash_output", {"job_id": job_id})).is_error
    finally:
        current_task.reset(token)
    token = current_task.set("task-b")
    try:
        async with Client(server) as b:
            other = await b.call_tool("bash_kill", {"job_id": job_id})
            assert other.is_error and "unknown job_id" in text_of(other)
    finally:
        current_task.reset(token)
    assert job_id in env.scopes.get("task-a").jobs
    for job in env.scopes.get("task-a").jobs.values():
        job.kill_now()


# --- over stdio -------------------------------------------------------------------------------


async def test_structured_content_alone_carries_the_output(client: Client) -> None:
    """A client that shows only `structuredContent` still sees what the command printed."""
    tools = {t.name: t for t in await client.list_tools()}
    for name in ("bash", "bash_output", "bash_kill"):
        assert "output" in tools[name].output_schema["required"]
    result = await bash(client, "printf 'first\\n'; echo second >&2; exit 4")
    sc = result.structured_content
    assert sc["output"] == "first\nsecond\n" and sc["exit_code"] == 4
    long = (await bash(client, "seq 1 1000")).structured_content
    assert long["truncated"] is True and long["output"].startswith("1\n2\n")
    assert "lines cut" in long["output"] and long["output"].endswith("1000\n")
    assert len(long["output"]) < 100_000
    job = (await bash(client, "echo from-job; exec sleep 100", run_in_background=True)
           ).structured_content
    with anyio.fail_after(5):
        seen = ""
        while "from-job" not in seen:
            seen += (await client.call_tool("bash_output", {"job_id": job["job_id"]})
                     ).structured_content["output"]
            await anyio.sleep(0.05)
    killed = await client.call_tool("bash_kill", {"job_id": job["job_id"]})
    assert killed.structured_content["output"] == ""  # nothing new since the last read


async def test_caller_values_are_bounded(client: Client, env: CodingEnv) -> None:
    long = await bash(client, "true #" + "x" * shell.MAX_COMMAND_BYTES)
    assert long.is_error and "over the maximum" in text_of(long)
    env.max_jobs_per_task = 2
    jobs = [(await bash(client, "exec sleep 100", run_in_background=True)) for _ in range(2)]
    assert not any(j.is_error for j in jobs)
    third = await bash(client, "exec sleep 100", run_in_background=True)
    assert third.is_error and "already has 2 background jobs running" in text_of(third)
    await client.call_tool("bash_kill", {"job_id": jobs[0].structured_content["job_id"]})
    assert not (await bash(client, "true", run_in_background=True)).is_error


async def test_output_cap_stops_the_command(client: Client, env: CodingEnv) -> None:
    env.max_output_bytes = 200_000
    result = await bash(client, "yes 0123456789")
    sc = result.structured_content
    assert sc["timed_out"] is False and sc["exit_code"] != 0
    assert "output passed" in text_of(result)
    assert size(sc["output_path"]) == 200_000
    # a background job's file is measured every OUTPUT_CHECK_S: a modest writer
    job = (await bash(client, "while :; do echo 0123456789; done", run_in_background=True)
           ).structured_content
    with anyio.fail_after(10):
        while True:
            state = (await client.call_tool("bash_output", {"job_id": job["job_id"]})
                     ).structured_content
            if not state["running"]:
                break
            await anyio.sleep(0.1)
    assert state["over_limit"] is True and state["killed"] is True


def serve_command(root: Path) -> list[str]:
    return [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
            "--workspace", str(root)]


async def test_stdio_bash_and_exit_kills_background_jobs(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with Client(
            serve_command(tmp_path),
            connect=ConnectOptions(env=tree_env(MCPKIT_TEST_API_TOKEN="x1")),
        ) as c:
            result = await c.call_tool("bash", {"command": "echo hi; env"})
            assert result.structured_content["exit_code"] == 0
            assert "hi" in text_of(result) and "MCPKIT_TEST_API_TOKEN" not in text_of(result)
            started = await c.call_tool(
                "bash", {"command": "sleep 100", "run_in_background": True})
            pid = started.structured_content["pid"]
            assert alive(pid)
        assert await wait_gone([pid], 5.0) == []


async def test_stdio_timeout(tmp_path: Path) -> None:
    with anyio.fail_after(20):
        async with Client(serve_command(tmp_path), connect=ConnectOptions(env=tree_env())) as c:
            result = await c.call_tool("bash", {"command": "sleep 100 & wait", "timeout": 300})
            assert result.structured_content == {
                "output": "", "exit_code": 124, "timed_out": True, "truncated": False,
                "output_path": result.structured_content["output_path"]}
