"""Shared helpers for the interop tests: mcpkit servers as subprocesses on free ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
JS_NODE_MODULES = ROOT / "tests" / "js" / "node_modules"
STARTUP_TIMEOUT = 15.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Stop one server process by its PID: SIGTERM, then SIGKILL after a bounded wait."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


def wait_for_port(proc: subprocess.Popen[bytes], port: int, timeout: float) -> None:
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


@contextlib.contextmanager
def http_server(module: str) -> Iterator[str]:
    """Run `python -m <module> --port N` (Streamable HTTP); yield its /mcp URL."""
    port = free_port()
    args = [sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(port)]
    if module.endswith("echo_server"):
        args += ["--transport", "http"]
    proc = subprocess.Popen(args, cwd=ROOT, stdin=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port, STARTUP_TIMEOUT)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


@pytest.fixture(scope="module")
def conformance_http_url() -> Iterator[str]:
    with http_server("mcpkit.testing.conformance_server") as url:
        yield url
