"""Child processes of the coding tools: each in its own process group, so that stopping
one stops everything it started."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process

from mcpkit.coding import tracking


async def open_in_group(
    argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str] | None = None,
    stderr: int = subprocess.PIPE,
) -> Process:
    """Start `argv` as the leader of a new process group, stdin from /dev/null.

    Shielded from cancellation: a cancel landing while the child starts would leak it (the
    caller can only kill the group once it holds the process).
    """
    options: dict[str, Any] = {"env": dict(env)} if env is not None else {}
    with anyio.CancelScope(shield=True), tracking.spawning() as register:
        process = await anyio.open_process(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=stderr,
            cwd=str(cwd), start_new_session=True, **options,
        )
        register(process.pid)  # a child of ours, not an orphan adopted from a command
    return process


def signal_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    """Signal a whole process group; a group that is gone (or not ours) is ignored."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)
