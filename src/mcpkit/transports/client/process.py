"""A stdio server as a child process (the client side of stdio): one message a line.

    async with StdioProcess(["python", "-m", "my_server"]) as proc:
        await proc.send(b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}')
        async for line in proc.receive():
            ...

The child runs in its own process group with stdin/stdout/stderr on pipes. The last
`STDERR_TAIL_BYTES` of its stderr are kept for error reports (`stderr_tail`).

Leaving the context performs the spec's shutdown: close the child's stdin → wait up to
`close_timeout` → SIGTERM to its process group → wait up to `term_timeout` → SIGKILL to the
group → wait up to `kill_timeout`. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from types import TracebackType

import anyio
from anyio.abc import Process, TaskGroup

from mcpkit.errors import InvalidArgument, InvalidState, TransportError
from mcpkit.protocol.framing import DEFAULT_MAX_LINE_BYTES, LineFramer

log = logging.getLogger(__name__)

STDERR_TAIL_BYTES = 64 * 1024
WRITE_HIGH_WATER = 256 * 1024
"""Bytes buffered for the child's stdin before a sender waits for the pipe to drain."""


class StdioProcessError(TransportError):
    """The child cannot take messages (it exited, or closed its stdin)."""

    def __init__(self, message: str, returncode: int | None, stderr_tail: str) -> None:
        detail = f"{message} (returncode {returncode})"
        if stderr_tail:
            detail += f"; stderr tail:\n{stderr_tail[-2000:]}"
        super().__init__(detail)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class StdioProcess:
    """A child process speaking MCP over stdio (async context manager)."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        close_timeout: float = 2.0,
        term_timeout: float = 2.0,
        kill_timeout: float = 5.0,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.command = list(command)
        self.env = dict(env) if env is not None else None
        self.cwd = cwd
        self.close_timeout = close_timeout
        self.term_timeout = term_timeout
        self.kill_timeout = kill_timeout
        self.max_line_bytes = max_line_bytes
        self._process: Process | None = None
        self._tg: TaskGroup | None = None
        self._stderr = bytearray()
        self._send_lock = anyio.Lock()
        self._stderr_done = anyio.Event()
        self.on_oversized: Callable[[bytes, bytes], None] | None = None
        """Called with the first and last bytes of each line dropped for its size (the
        client transport fails the request it answered)."""

    # --- lifecycle -------------------------------------------------------------------------

    async def __aenter__(self) -> StdioProcess:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self.start(self._tg)
        except BaseException:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        await self._tg.__aexit__(None, None, None)

    async def start(self, task_group: TaskGroup) -> None:
        """Start the child; its stderr is collected by a task in `task_group` (which must
        outlive the process: call `aclose()` before leaving it)."""
        self._process = await anyio.open_process(
            self.command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=self.cwd, env=self.env, start_new_session=True,
        )
        task_group.start_soon(self._collect_stderr)

    async def aclose(self) -> None:
        """Shut the child down (see the module docstring) and close its pipes. Bounded."""
        if self._process is None:
            return
        with anyio.CancelScope(shield=True):
            await self.shutdown()
            await self._drain_stderr()
        process = self._require()
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with contextlib.suppress(OSError, anyio.BrokenResourceError):
                    await stream.aclose()

    async def _drain_stderr(self, limit_s: float = 1.0) -> None:
        """Give the stderr reader up to `limit_s` to reach EOF (a grandchild may hold it)."""
        with anyio.move_on_after(limit_s):
            await self._stderr_done.wait()

    async def shutdown(self) -> None:
        """Close stdin, then escalate to SIGTERM and SIGKILL of the process group."""
        process = self._require()
        if process.stdin is not None:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError,
                                     OSError):
                await process.stdin.aclose()
        if await self._wait(self.close_timeout):
            return
        log.info("stdio server %d did not exit after stdin closed; SIGTERM", process.pid)
        self._signal_group(signal.SIGTERM)
        if await self._wait(self.term_timeout):
            return
        log.warning("stdio server %d ignored SIGTERM; SIGKILL", process.pid)
        self._signal_group(signal.SIGKILL)
        if not await self._wait(self.kill_timeout):
            log.error("stdio server %d survived SIGKILL for %g s", process.pid, self.kill_timeout)

    async def _wait(self, limit_s: float) -> bool:
        """Wait up to `limit_s` seconds for the child to exit; True if it did."""
        process = self._require()
        with anyio.move_on_after(limit_s):
            await process.wait()
        return process.returncode is not None

    def _signal_group(self, sig: signal.Signals) -> None:
        process = self._require()
        if process.returncode is not None:
            return
        try:
            os.killpg(process.pid, sig)  # its own group: start_new_session makes pgid == pid
        except ProcessLookupError:
            pass
        except PermissionError:
            process.send_signal(sig)

    # --- I/O -------------------------------------------------------------------------------

    async def send(self, message: bytes) -> None:
        """Write one message (a line; it must not contain a newline)."""
        if b"\n" in message:
            raise InvalidArgument("a stdio message must not contain a newline")
        process = self._require()
        if process.stdin is None:
            raise StdioProcessError("stdin is not a pipe", self.returncode, self.stderr_tail)
        writer = getattr(process.stdin, "_stream", None)
        try:
            if isinstance(writer, asyncio.StreamWriter):
                await self._write_direct(writer, message + b"\n")
            else:
                async with self._send_lock:
                    await process.stdin.send(message + b"\n")
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise StdioProcessError(
                f"cannot write to the server: {exc!r}", self.returncode, self.stderr_tail
            ) from exc

    async def _write_direct(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        """One `write` per message keeps messages whole without a lock, and waiting for
        the pipe only when its buffer is full saves a loop pass per message (the anyio
        stream always yields; this is the client's hot path)."""
        if writer.is_closing():
            raise BrokenPipeError("the server's stdin is closed")
        writer.write(data)
        if writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER:
            await writer.drain()

    async def receive(self) -> AsyncIterator[str]:
        """The child's stdout lines, decoded, until it closes stdout. An oversized line is
        dropped (logged)."""
        async for line in self.lines():
            yield line.decode("utf-8", "replace")

    async def lines(self) -> AsyncIterator[bytes]:
        """The child's stdout lines as bytes, until it closes stdout. An oversized line is
        dropped (logged)."""
        process = self._require()
        if process.stdout is None:
            return
        framer = LineFramer(self.max_line_bytes)
        while True:
            try:
                chunk = await process.stdout.receive()
            except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
                return
            dropped = 0
            for line in framer.feed(chunk):
                if line is None:
                    log.warning("dropping a line over %d bytes from the server",
                                self.max_line_bytes)
                    if self.on_oversized is not None:
                        self.on_oversized(*framer.dropped_ends[dropped])
                    dropped += 1
                else:
                    yield line

    async def _collect_stderr(self) -> None:
        process = self._require()
        if process.stderr is None:
            return
        try:
            while True:
                self._stderr += await process.stderr.receive()
                if len(self._stderr) > STDERR_TAIL_BYTES:
                    del self._stderr[: len(self._stderr) - STDERR_TAIL_BYTES]
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            self._stderr_done.set()

    # --- state -----------------------------------------------------------------------------

    @property
    def pid(self) -> int:
        return self._require().pid

    @property
    def returncode(self) -> int | None:
        return self._process.returncode if self._process is not None else None

    @property
    def stderr_tail(self) -> str:
        """The last 64 KiB of the child's stderr, decoded."""
        return self._stderr.decode("utf-8", "replace")

    async def wait(self) -> int:
        """Wait for the child to exit on its own (unbounded: wrap it in a timeout), then
        up to a second for the rest of its stderr."""
        returncode = await self._require().wait()
        await self._drain_stderr()
        return returncode

    def _require(self) -> Process:
        if self._process is None:
            raise InvalidState("StdioProcess is not started: use `async with`")
        return self._process
