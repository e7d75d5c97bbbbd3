"""Shared helpers for tests that start real server processes on 127.0.0.1."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
from aiohttp import web


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def serving(app: web.Application, port: int, host: str = "127.0.0.1"
                  ) -> AsyncIterator[None]:
    """`app` answers on `host`:`port` for the block, in the test's own event loop (a fake
    authorization server, identity provider or redirect listener)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, host, port).start()
        yield
    finally:
        await runner.cleanup()


def wait_for_port(proc: subprocess.Popen[bytes], port: int, timeout: float = 15.0) -> None:
    """Until `proc` listens on `port`; raises if it exits first or `timeout` s pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited early with code {proc.returncode}")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"server did not listen on port {port} within {timeout} s")


def stop_process(proc: subprocess.Popen[bytes], *, group: bool = False) -> None:
    """Stop one server process by its PID (`group`: its whole process group, when it leads
    its own session): SIGTERM, then SIGKILL after a bounded wait."""
    def signal_it(sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(proc.pid, sig)
            else:
                os.kill(proc.pid, sig)

    if proc.poll() is None:
        signal_it(signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            signal_it(signal.SIGKILL)
            proc.wait(timeout=5)


async def eventually(check: Callable[[], Any], limit_s: float = 3.0) -> Any:
    """Wait until `check()` is truthy (state other tasks or processes change); its value."""
    with anyio.fail_after(limit_s):
        while not (found := check()):  # noqa: ASYNC110 (polling state set elsewhere)
            await anyio.sleep(0.01)
        return found


@contextlib.contextmanager
def mcp_http_server(argv: list[str], port: int, **popen: Any) -> Iterator[str]:
    """Start `argv` (an MCP server serving HTTP on `port`, output discarded), wait until it
    listens, yield its `/mcp` URL; stop it after."""
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            **popen)
    try:
        wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


def pid_gone(pid: int) -> bool:
    """Whether `pid` no longer runs (exited and reaped, or a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


@contextlib.contextmanager
def serve_in_thread(app: Any, *, lifespan: str = "off", name: str = "uvicorn",
                    ws: str = "none", port: int | None = None) -> Iterator[str]:
    """Serve the ASGI `app` with uvicorn on a free 127.0.0.1 port (or `port`, for an app
    that must know its URL in advance) in a daemon thread; yields the base URL
    ("http://127.0.0.1:PORT"); stops the server on exit."""
    import uvicorn

    from mcpkit.transports.server.http.serve import uvicorn_config

    port = port or free_port()
    config = uvicorn_config(  # what mcpkit serves with, on h11 here (httptools elsewhere)
        app, host="127.0.0.1", port=port, log_level="warning", lifespan=lifespan,
        timeout_graceful_shutdown=2, loop="asyncio", http="h11", ws=ws,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True, name=f"{name}-{port}")
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError(f"{name} did not start (see the log above)")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)
        if thread.is_alive():
            server.force_exit = True
            thread.join(5)


async def released_together(command: list[str], count: int,
                            timeout_s: float) -> list[dict[str, Any]]:
    """Start `count` copies of `command` (a worker that prints "ready", waits for a line on
    stdin, then prints one JSON line last), release them all at once when every one is
    ready, and return their JSON reports; every one must exit 0. Bounded by `timeout_s`;
    any still running at the end is killed."""
    import msgspec

    reports: list[dict[str, Any]] = []
    with anyio.fail_after(timeout_s):
        processes = [await anyio.open_process(command) for _ in range(count)]
        try:
            for process in processes:  # all imported and waiting
                assert process.stdout is not None
                assert (await process.stdout.receive()).startswith(b"ready")
            for process in processes:
                assert process.stdin is not None
                await process.stdin.send(b"go\n")

            async def collect(process: anyio.abc.Process) -> None:
                assert process.stdout is not None and process.stderr is not None
                out = b"".join([chunk async for chunk in process.stdout])
                err = b"".join([chunk async for chunk in process.stderr])
                assert await process.wait() == 0, err.decode()[-2000:]
                reports.append(msgspec.json.decode(out.splitlines()[-1]))

            async with anyio.create_task_group() as group:
                for process in processes:
                    group.start_soon(collect, process)
        finally:
            for process in processes:
                if process.returncode is None:
                    process.kill()
                await process.aclose()
    return reports
