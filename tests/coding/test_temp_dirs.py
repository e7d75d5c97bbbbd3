"""The coding server removes its own `mcpkit-serve-*` temp directory, however it ends.

Each test points TMPDIR at a fresh directory of its own, so the count of `mcpkit-serve-*`
folders before and after is exact even while other tests run beside it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit import Client
from mcpkit.client import ConnectOptions


def litter(tmp: Path) -> list[str]:
    return sorted(p.name for p in tmp.glob("mcpkit-serve-*"))


def env_with_tmpdir(tmp: Path) -> dict[str, str]:
    return {**os.environ, "TMPDIR": str(tmp)}


@pytest.mark.anyio
async def test_stdio_server_removes_its_temp_dir_at_end_of_input(tmp_path: Path) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    command = [sys.executable, "-m", "mcpkit", "serve", "--transport", "stdio",
               "--workspace", str(work)]
    assert litter(temp) == []
    with anyio.fail_after(30):
        async with Client(command, connect=ConnectOptions(env=env_with_tmpdir(temp))) as client:
            # a background job's output lives in the task's output directory
            result = await client.call_tool(
                "bash", {"command": "echo hi", "run_in_background": True})
            assert not result.is_error, result
            assert len(litter(temp)) == 1  # the server made its directory while it ran
    assert litter(temp) == []


def test_http_server_removes_its_temp_dir_on_sigint_and_sigterm(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    for sig in (signal.SIGINT, signal.SIGTERM):
        temp = tmp_path / f"tmp-{sig.name}"
        temp.mkdir()
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(work),
             "--port", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env=env_with_tmpdir(temp))
        try:
            wait_for_port(proc, port)

            async def use_a_task(port: int = port) -> None:
                url = f"http://127.0.0.1:{port}/mcp?task_id=t1"
                async with Client(url) as client:
                    result = await client.call_tool(
                        "bash", {"command": "echo hi", "run_in_background": True})
                    assert not result.is_error, result

            anyio.run(use_a_task)
            assert len(litter(temp)) == 1
            proc.send_signal(sig)
            proc.wait(timeout=15)
        finally:
            stop_process(proc)
        assert litter(temp) == [], f"left behind after {sig.name}"


def test_in_process_scopes_clean_up_without_close(tmp_path: Path) -> None:
    """Code that builds the coding server in-process and never closes it (as many tests
    do) leaves nothing either: the directory goes with the scopes, or at interpreter exit."""
    script = textwrap.dedent("""
        import gc, os, sys
        from mcpkit.coding.scope import Scopes
        dropped = Scopes()
        dropped.get("t1")
        del dropped
        gc.collect()
        kept = Scopes()
        kept.get("t2")
        print(len([n for n in os.listdir(sys.argv[1]) if n.startswith("mcpkit-serve-")]))
    """)
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)],
                          env=env_with_tmpdir(tmp_path), capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "1"  # only the live one, while the interpreter ran
    assert litter(tmp_path) == []      # and not that one after it exited
