"""The conformance fixture server as a subprocess on a free 127.0.0.1 port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


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
