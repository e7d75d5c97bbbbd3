"""The conformance fixture server as a subprocess on a free 127.0.0.1 port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from tests.procs import free_port

from mcpkit.testing.conformance_server import build_server


def _wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"fixture server exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"fixture server did not listen on {port} within {timeout} s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=8)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@pytest.fixture
def fixture_server() -> Iterator[str]:
    """Base URL (http://127.0.0.1:PORT) of a running conformance fixture server."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcpkit.testing.conformance_server", "--port", str(port)],
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_listening(proc, port)
        yield f"http://127.0.0.1:{port}"
    finally:
        _stop(proc)


@asynccontextmanager
async def serving(app: Any, **options: Any) -> AsyncIterator[tuple[Any, int]]:
    """`app` under uvicorn with mcpkit's settings (`uvicorn_config`; `options` are its) in
    this process on a free 127.0.0.1 port: the `uvicorn.Server` and the port."""
    import uvicorn

    from mcpkit.transports.server.http.serve import uvicorn_config

    port = free_port()
    server = uvicorn.Server(uvicorn_config(app, host="127.0.0.1", port=port, lifespan="off",
                                           log_level="warning", **options))
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve)
        with anyio.fail_after(10):
            while not server.started:  # noqa: ASYNC110 (uvicorn exposes a flag only)
                await anyio.sleep(0.02)
        try:
            yield server, port
        finally:
            server.should_exit = True


@asynccontextmanager
async def inprocess_uvicorn(**app_options: Any) -> AsyncIterator[str]:
    """The fixture server's app under uvicorn in this process, mounted at /prefix."""
    app = build_server().asgi_app(**app_options)

    async def mounted(scope: Any, receive: Any, send: Any) -> None:
        """Mounts `app` at /prefix the way Starlette's Mount does (root_path, full path)."""
        if scope["type"] in ("http", "websocket") and scope["path"].startswith("/prefix/"):
            await app({**scope, "root_path": scope.get("root_path", "") + "/prefix"},
                      receive, send)
        else:
            await receive()
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b""})

    async with serving(mounted) as (_, port):
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            app.shutdown()
