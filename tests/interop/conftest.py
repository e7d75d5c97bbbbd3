"""Shared helpers for the interop tests: mcpkit servers as subprocesses on free ports."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.procs import free_port, stop_process, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
JS_NODE_MODULES = ROOT / "tests" / "js" / "node_modules"
STARTUP_TIMEOUT = 15.0


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
