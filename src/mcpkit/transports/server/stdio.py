"""The stdio transport, server side: JSON-RPC messages one per line on stdin/stdout.

Invariants:
- stdout carries protocol messages only. While serving, file descriptor 1 is re-pointed at
  stderr (and `sys.stdout` with it), so a stray `print()` in a handler — or a child process
  it starts — cannot corrupt the stream; protocol output goes to a private duplicate.
- Each request runs in its own task; notifications/cancelled cancels it and no response
  follows. Responses are written as they complete, in any order.
- On stdin EOF the server stops: requests in flight get `shutdown_grace_s` to finish,
  then they are cancelled. `run_stdio_server` stops the same way on SIGINT, SIGTERM and
  SIGHUP (Ctrl-C, `kill`, the terminal closing) and returns normally; a second one cancels
  what is still running at once.
- Backpressure: while the output holds more unwritten bytes than the pipe's high-water mark
  (asyncio pauses writing) or than `max_write_buffer_bytes`, no more of stdin is read and
  every writer awaits the drain. A client that stops reading therefore stops the server
  reading too, and what is buffered stays bounded: the output buffer, plus the replies of
  the requests read before the pause (one read chunk's worth).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
import sys
from collections.abc import Callable, Coroutine
from typing import Any, cast

from mcpkit.protocol import errors, jsonrpc
from mcpkit.protocol.framing import DEFAULT_MAX_LINE_BYTES, LineFramer
from mcpkit.server.connection import Connection
from mcpkit.server.engine import HasEngine
from mcpkit.transports.server.routing import error_reply, route

log = logging.getLogger(__name__)

DEFAULT_MAX_WRITE_BUFFER_BYTES = 1024 * 1024
"""Unwritten output bytes past which the server stops reading stdin (see the docstring)."""


class _Writer:
    """Writes lines to the protocol output; the `Channel` for every stdio message.

    `on_blocked` / `on_drained` are told when the output stops and starts taking data again
    (the connection pauses and resumes reading stdin)."""

    def __init__(
        self,
        transport: asyncio.WriteTransport | None,
        fd: int,
        max_buffer_bytes: int = DEFAULT_MAX_WRITE_BUFFER_BYTES,
    ) -> None:
        self._transport = transport
        self._fd = fd
        self._max_buffer_bytes = max_buffer_bytes
        self._drained = asyncio.Event()
        self._drained.set()
        self.on_blocked: Callable[[], None] | None = None
        self.on_drained: Callable[[], None] | None = None

    @property
    def blocked(self) -> bool:
        return not self._drained.is_set()

    async def drain(self) -> None:
        if self._transport is not None and not self._drained.is_set():
            await self._drained.wait()

    async def send(self, message: bytes) -> None:
        self.write(message)
        await self.drain()

    def write(self, message: bytes) -> None:
        data = message + b"\n"
        if self._transport is None:
            _write_all(self._fd, data)
            return
        if self._transport.is_closing():
            raise BrokenPipeError("stdout is closed")
        self._transport.write(data)
        if self._transport.get_write_buffer_size() > self._max_buffer_bytes:
            self.pause()

    def pause(self) -> None:
        if self._drained.is_set():
            self._drained.clear()
            if self.on_blocked is not None:
                self.on_blocked()

    def resume(self) -> None:
        if not self._drained.is_set():
            self._drained.set()
            if self.on_drained is not None:
                self.on_drained()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _OutProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.writer: _Writer | None = None

    def pause_writing(self) -> None:
        if self.writer:
            self.writer.pause()

    def resume_writing(self) -> None:
        if self.writer:
            self.writer.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        # The client closed our output: wake every writer (their writes are dropped from now
        # on) and reading, so stdin's EOF is still seen and the server stops.
        if self.writer:
            self.writer.resume()


class StdioServerConnection:
    """Reads messages from a byte stream and answers them through a server's engine."""

    def __init__(self, server: HasEngine, writer: _Writer, max_line_bytes: int) -> None:
        self.engine = server.engine
        self.writer = writer
        self.connection = Connection(writer)
        self.framer = LineFramer(max_line_bytes)
        self.tasks: set[asyncio.Task[None]] = set()
        self.eof = asyncio.Event()
        self.engine.open_session(self.connection)

    def feed(self, data: bytes) -> None:
        for line in self.framer.feed(data):
            if line is None:
                self._reply_error(None, errors.invalid_request("message exceeds the size limit"))
            else:
                self.on_line(line)

    def on_line(self, line: bytes) -> None:
        failure = route(self.engine, line, self.connection, self.writer, self._spawn, self._reply)
        if failure is not None and (reply := error_reply(failure)) is not None:
            self._write(reply)

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        task = asyncio.get_running_loop().create_task(fn(*args))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _reply(self, response: bytes) -> None:
        self._write(response)
        await self.writer.drain()  # the task (and what it holds) waits for a slow reader

    def _reply_error(self, request_id: jsonrpc.RequestId | None, error: errors.McpError) -> None:
        self._write(jsonrpc.encode_error(request_id, error))

    def _write(self, data: bytes) -> None:
        try:
            self.writer.write(data)
        except (BrokenPipeError, ConnectionResetError):
            log.debug("stdout closed; dropping a message")

    async def finish(self, grace_s: float) -> None:
        """After EOF: let requests in flight finish for `grace_s`, then cancel them
        (listen streams end at once: they never finish by themselves)."""
        self.engine.end_listens_on(self.writer)
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=grace_s)
        self.connection.close()
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.wait(set(self.tasks), timeout=1.0)
        self.engine.close_session(self.connection)


class _InProtocol(asyncio.Protocol):
    """Feeds stdin to the connection; stops reading while the output is blocked."""

    def __init__(self, conn: StdioServerConnection) -> None:
        self.conn = conn
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's pipe transports do not subclass asyncio.ReadTransport, but have its methods
        self.transport = cast(asyncio.ReadTransport, transport)
        self.conn.writer.on_blocked = self._pause
        self.conn.writer.on_drained = self._resume
        if self.conn.writer.blocked:
            self._pause()

    def _pause(self) -> None:
        if self.transport is not None and self.transport.is_reading():
            self.transport.pause_reading()

    def _resume(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def data_received(self, data: bytes) -> None:
        self.conn.feed(data)

    def eof_received(self) -> bool:
        self.conn.eof.set()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.conn.eof.set()


async def serve_stdio(
    server: HasEngine,
    *,
    stdin_fd: int | None = None,
    stdout_fd: int | None = None,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    shutdown_grace_s: float = 5.0,
    max_write_buffer_bytes: int = DEFAULT_MAX_WRITE_BUFFER_BYTES,
    stop: asyncio.Event | None = None,
) -> None:
    """Serve `server` on the given file descriptors (default: this process's stdin/stdout)
    until stdin ends or `stop` is set; stdin is not read while more than
    `max_write_buffer_bytes` of output wait."""
    loop = asyncio.get_running_loop()
    in_fd = sys.stdin.fileno() if stdin_fd is None else stdin_fd
    out_fd = _private_stdout() if stdout_fd is None else stdout_fd
    out_file = os.fdopen(out_fd, "wb", buffering=0, closefd=stdout_fd is None)
    out_protocol = _OutProtocol()
    transport: asyncio.WriteTransport | None = None
    if _is_stream(out_fd):  # a regular file gets plain blocking writes
        transport, _ = await loop.connect_write_pipe(lambda: out_protocol, out_file)
    writer = _Writer(transport, out_file.fileno(), max_write_buffer_bytes)
    out_protocol.writer = writer
    conn = StdioServerConnection(server, writer, max_line_bytes)
    in_file = os.fdopen(in_fd, "rb", buffering=0, closefd=False)
    reader: asyncio.Task[None] | None = None
    if _is_stream(in_fd):
        await loop.connect_read_pipe(lambda: _InProtocol(conn), in_file)
    else:  # a regular file: read it in a thread
        reader = loop.create_task(_read_file(in_file, conn))
    await _first_of(conn.eof, stop)
    await conn.finish(shutdown_grace_s)
    if reader is not None:
        reader.cancel()
    if transport is not None:
        transport.close()


async def _first_of(*events: asyncio.Event | None) -> None:
    waiters = [asyncio.ensure_future(event.wait()) for event in events if event is not None]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


def _is_stream(fd: int) -> bool:
    """Pipes, sockets and terminals can use event-loop transports; regular files and other
    character devices such as /dev/null cannot (uvloop aborts the process on them instead of
    raising), so those are read and written with plain blocking calls."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


async def _read_file(in_file: Any, conn: StdioServerConnection) -> None:
    while chunk := await asyncio.to_thread(in_file.read, 65536):
        conn.feed(chunk)
        await conn.writer.drain()
    conn.eof.set()


def _private_stdout() -> int:
    """Duplicate fd 1 for protocol output and point fd 1 (and sys.stdout) at stderr."""
    sys.stdout.flush()
    private = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return private


STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                     if hasattr(signal, name))
"""Signals that stop a stdio server as stdin's end does (Ctrl-C, `kill`, a closed terminal)."""


def run_stdio_server(
    server: HasEngine, *, on_ready: Callable[[], None] | None = None,
    on_stop: Callable[[], None] | None = None, **options: Any
) -> None:
    """Run `serve_stdio` in a fresh event loop (uvloop when installed) until stdin closes or
    a stop signal (`STOP_SIGNALS`) comes, then return normally; background tasks (tasks
    extension) are cancelled as it ends. `on_ready()` is called once the stop signals are
    handled, as serving starts; `on_stop()` when the first stop signal comes, before requests
    in flight get their grace; a second signal cancels them at once."""

    async def serve_then_close() -> None:
        stop = asyncio.Event()
        main = asyncio.current_task()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set():
                if main is not None:
                    main.cancel()  # asked twice: stop waiting for what is in flight
                return
            stop.set()
            if on_stop is not None:
                on_stop()

        handled: list[signal.Signals] = []
        for sig in STOP_SIGNALS:  # only the main thread may handle signals
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                loop.add_signal_handler(sig, on_signal)
                handled.append(sig)
        try:
            if on_ready is not None:
                on_ready()
            await serve_stdio(server, stop=stop, **options)
        finally:
            for sig in handled:
                loop.remove_signal_handler(sig)
            await server.engine.aclose()

    # KeyboardInterrupt: a Ctrl-C before the handlers are in place
    with contextlib.suppress(KeyboardInterrupt, asyncio.CancelledError):
        _run(serve_then_close())


def _run(coro: Any) -> None:
    try:
        import uvloop
    except ImportError:
        asyncio.run(coro)
    else:
        uvloop.run(coro)
