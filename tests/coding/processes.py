"""Helpers for tests that check the coding tools leave no process behind."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

from mcpkit import Client
from mcpkit.coding.env import CodingEnv
from mcpkit.coding.server import build_server


def hanging_tool(tmp_path: Path, name: str, pid_name: str | None = None) -> Path:
    """An executable `name` that starts a child, records both pids (`child.pid` and
    `<pid_name or name>.pid` in `tmp_path`) and hangs."""
    script = tmp_path / name
    script.write_text(
        "#!/bin/sh\n"
        f"sleep 30 & echo $! > {tmp_path}/child.pid\n"
        f"echo $$ > {tmp_path}/{pid_name or name}.pid\n"
        "wait\n"
    )
    script.chmod(0o755)
    return script


def gone(pid_file: Path) -> bool:
    """Whether the process whose pid is in `pid_file` has exited (a zombie counts)."""
    pid = int(pid_file.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/stat")  # a zombie still answers signal 0
    return status.exists() and status.read_text().split(") ")[-1].startswith("Z")


def tree_env(**extra: str) -> dict[str, str]:
    """The environment for a `mcpkit serve` child that runs this checkout's code (a stdio
    child does not inherit PYTHONPATH from the test process)."""
    import mcpkit

    return {"PYTHONPATH": str(Path(mcpkit.__file__).resolve().parents[1]), **extra}


def alive(pid: int) -> bool:
    """Running (a zombie is not: the sandbox's PID 1 may never reap orphans)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:].split()[0] != b"Z"


def kill_jobs(env: CodingEnv) -> None:
    """Stop every background job a test's tasks left running."""
    for scope in env.scopes.all():
        for job in scope.jobs.values():
            job.kill_now()


@contextlib.asynccontextmanager
async def coding_client(env: CodingEnv) -> AsyncIterator[Client]:
    """An in-memory client of the coding server over `env`; its jobs are stopped after."""
    try:
        async with Client(build_server(env)) as client:
            yield client
    finally:
        kill_jobs(env)
