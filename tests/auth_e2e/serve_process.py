"""`mcpkit serve` (the coding tools server) as a real process on 127.0.0.1, protected by the
stack's authorization server or not:

    with running_serve(directory, stack) as served:      # --auth-issuer / --auth-audience
        served.url        http://127.0.0.1:PORT/mcp (also the resource its tokens must name)
    with running_serve(directory, None) as served:       # no authorization at all

The provider is told about the new resource first (`Stack.add_resource`), so it issues tokens
for it; the process leads its own process group and is stopped by it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.auth_e2e.stack import ROOT, STARTUP_S, Stack
from tests.procs import free_port, stop_process, wait_for_port

WORKSPACE_FILE = "hello.txt"
WORKSPACE_TEXT = "hello from the protected workspace\n"


@dataclass(frozen=True)
class Served:
    url: str
    workspace: Path
    log: Path


def serve_argv(workspace: Path, port: int, stack: Stack | None, *options: str) -> list[str]:
    argv = [sys.executable, "-m", "mcpkit", "serve", "--workspace", str(workspace),
            "--port", str(port)]
    if stack is not None:
        argv += ["--auth-issuer", stack.issuer,
                 "--auth-audience", f"http://127.0.0.1:{port}/mcp"]
    return argv + list(options)


@contextlib.contextmanager
def running_serve(directory: Path, stack: Stack | None, *options: str, opaque: bool = False,
                  env: dict[str, str] | None = None) -> Iterator[Served]:
    """`mcpkit serve` on a free port over a fresh workspace (one file in it), trusting
    `stack`'s provider (when given; `opaque`: its tokens for this server are opaque) with
    `options` added and `env` in its environment; stopped after the block."""
    directory.mkdir(parents=True, exist_ok=True)
    workspace = directory / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / WORKSPACE_FILE).write_text(WORKSPACE_TEXT, "utf-8")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    if stack is not None:
        stack.add_resource(url, opaque=opaque)
    log_path = directory / f"serve-{port}.log"
    with open(log_path, "w+b") as log:
        proc = subprocess.Popen(serve_argv(workspace, port, stack, *options), cwd=ROOT,
                                env={**os.environ, **(env or {})},
                                stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_for_port(proc, port, timeout=STARTUP_S)
        except BaseException:
            stop_process(proc, group=True)
            log.seek(0)
            raise RuntimeError(f"mcpkit serve did not start: {log.read()[-2000:]!r}") from None
        try:
            yield Served(url, workspace, log_path)
        finally:
            stop_process(proc, group=True)
