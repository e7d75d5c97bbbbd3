"""Running the checkers' tools: finding an installed tool, and running it bounded.

Every tool runs with stdin from /dev/null, cwd inside the workspace, a scrubbed environment
and in a process group of its own; the group is SIGKILLed on timeout (`TOOL_TIMEOUT_S`) or
cancellation and whatever it left behind is killed when it ends. Output kept per stream is
bounded (`MAX_OUTPUT`); file arguments are split over several runs (`MAX_ARG_BYTES`).

The checkers call these through the module (`run.find_tool(...)`), so one replacement of a
name here (a test's fake tool, a shorter time limit) reaches every checker.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from mcpkit.coding.processes import open_in_group, signal_group
from mcpkit.coding.shell import scrubbed_env, strip_ansi
from mcpkit.coding.workspace import Workspace

TOOL_TIMEOUT_S = 60.0
"""Time limit of one external tool run (the whole process group is killed after it)."""
MAX_OUTPUT = 8 * 1024 * 1024
"""Bytes kept per output stream of one tool run (the rest is read and dropped)."""
MAX_ARG_BYTES = 96 * 1024
"""File arguments per tool run; more files mean more runs."""
NODE_TOOLS = frozenset({"tsc", "eslint"})
"""Tools looked for in the workspace's node_modules/.bin first."""


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_tool(name: str, workspace: Workspace) -> str | None:
    """The executable for `name`: the workspace's node_modules/.bin first (tsc, eslint),
    then PATH, then the directory of the Python running the server (where pip puts ruff)."""
    if name in NODE_TOOLS:
        local = workspace.root / "node_modules" / ".bin" / name
        if _executable(local) and workspace.contains(Path(os.path.realpath(local))):
            return str(local)
    found = shutil.which(name)
    if found:
        return found
    beside = Path(sys.executable).parent / name
    if _executable(beside):
        return str(beside)
    return None


def pyflakes_argv() -> list[str] | None:
    """How to run pyflakes: in the server's Python when importable, else from PATH."""
    if importlib.util.find_spec("pyflakes") is not None:
        return [sys.executable, "-m", "pyflakes"]
    found = shutil.which("pyflakes")
    return [found] if found else None


@dataclass(slots=True)
class ToolRun:
    code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    cut: bool = False


def tool_env() -> dict[str, str]:
    env = scrubbed_env()
    env.update(NO_COLOR="1", FORCE_COLOR="0", CARGO_TERM_COLOR="never", TERM="dumb",
               PYTHONDONTWRITEBYTECODE="1")
    return env


async def run_tool(argv: list[str], cwd: Path) -> ToolRun:
    """Run one tool in its own process group, bounded in time and kept output."""
    timeout = TOOL_TIMEOUT_S
    process = await open_in_group(argv, cwd=cwd, env=tool_env())
    buffers = (bytearray(), bytearray())
    cut = False

    async def drain(stream: Any, buffer: bytearray) -> None:
        nonlocal cut
        async for chunk in stream:
            room = MAX_OUTPUT - len(buffer)
            if room > 0:
                buffer += chunk[:room]
            if len(chunk) > room:
                cut = True

    try:
        with anyio.move_on_after(timeout) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, process.stdout, buffers[0])
                tg.start_soon(drain, process.stderr, buffers[1])
            await process.wait()
    finally:
        signal_group(process.pid)  # on timeout/cancel, and whatever the tool left behind
        with anyio.CancelScope(shield=True):
            await process.wait()
    out, err = (strip_ansi(bytes(b)).decode("utf-8", "replace") for b in buffers)
    return ToolRun(None if scope.cancelled_caught else process.returncode, out, err,
                   scope.cancelled_caught, cut)


def batches(paths: list[str]) -> list[list[str]]:
    """File arguments split so that no command line gets near the kernel's limit."""
    out: list[list[str]] = [[]]
    size = 0
    for path in paths:
        if out[-1] and size + len(path) + 1 > MAX_ARG_BYTES:
            out.append([])
            size = 0
        out[-1].append(path)
        size += len(path) + 1
    return out


async def run_batched(prefix: list[str], paths: list[str], cwd: Path) -> list[ToolRun]:
    """`prefix + paths` in as many runs as the command line needs (stopping after a timeout)."""
    runs: list[ToolRun] = []
    for batch in batches(paths):
        run = await run_tool([*prefix, *batch], cwd)
        runs.append(run)
        if run.timed_out:
            break
    return runs
