"""Run a search child process (ripgrep, or the Python search worker) under a hard time limit,
reading its stdout as lines without ever holding an unbounded one.

The child leads its own process group; on the time limit, on cancellation and on any error
the whole group is killed with SIGKILL and reaped, so a runaway regex costs at most the time
limit and never the server's event loop (the loop only reads pipes and handles lines).

Lines are split in linear time (each byte is looked at once). A line longer than
`max_line_bytes` is not buffered whole: its first `OVERSIZED_PREFIX` bytes go to
`on_oversized` and the rest is skipped up to the next newline.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from mcpkit.coding.processes import open_in_group, signal_group

MAX_LINE_BYTES = 1 << 20
"""Longest stdout line kept whole (a JSON event: ripgrep's carries the whole matched line)."""
OVERSIZED_PREFIX = 4096
"""What `on_oversized` sees of a longer line."""
STDERR_BYTES = 65536
"""Stderr kept for the error message; the rest is drained and dropped."""


@dataclass(slots=True)
class ChildOutcome:
    returncode: int | None
    stderr: str
    timed_out: bool


class LineSplitter:
    """Feeds complete lines to `on_line`, oversized ones (their prefix) to `on_oversized`."""

    def __init__(self, on_line: Callable[[bytes], None], on_oversized: Callable[[bytes], None],
                 max_line_bytes: int = MAX_LINE_BYTES) -> None:
        self.on_line = on_line
        self.on_oversized = on_oversized
        self.max_line_bytes = max_line_bytes
        self.pending = bytearray()
        self.skipping = False  # inside an oversized line already reported

    def feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end == -1 else chunk[start:end]
            if not self.skipping:
                self.pending += piece
                if len(self.pending) > self.max_line_bytes:
                    self.on_oversized(bytes(self.pending[:OVERSIZED_PREFIX]))
                    self.pending.clear()
                    self.skipping = True
            if end == -1:
                return
            if self.skipping:
                self.skipping = False
            elif self.pending:
                self.on_line(bytes(self.pending))
            self.pending.clear()
            start = end + 1

    def close(self) -> None:
        if self.pending and not self.skipping:
            self.on_line(bytes(self.pending))
        self.pending.clear()


async def run_child_lines(
    argv: Sequence[str], *, cwd: str | Path, limit_s: float, splitter: LineSplitter,
) -> ChildOutcome:
    """Run `argv`, feed its stdout to `splitter`; kill its group after `limit_s` seconds."""
    process = await open_in_group(argv, cwd=cwd)
    stderr_parts: list[bytes] = []
    timed_out = False
    try:
        stdout, stderr = process.stdout, process.stderr
        assert stdout is not None and stderr is not None

        async def drain_stderr() -> None:
            size = 0
            async for chunk in stderr:
                if size < STDERR_BYTES:
                    stderr_parts.append(chunk)
                    size += len(chunk)

        with anyio.move_on_after(limit_s) as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain_stderr)
                async for chunk in stdout:
                    splitter.feed(chunk)
                splitter.close()
            await process.wait()
        timed_out = scope.cancelled_caught
    finally:
        if process.returncode is None:
            signal_group(process.pid)
            with anyio.CancelScope(shield=True):
                await process.wait()
    return ChildOutcome(process.returncode, b"".join(stderr_parts).decode("utf-8", "replace"),
                        timed_out)
