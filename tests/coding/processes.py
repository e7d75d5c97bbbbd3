"""Helpers for tests that check the coding tools leave no process behind."""

from __future__ import annotations

import os
from pathlib import Path


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
