"""Helpers for tests/interop/test_client_*.py, where mcpkit's `Client` drives other
implementations' servers: where the peers live, starting HTTP peers on free ports (stopped by
process group), and answering handlers that record what the server asked."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from mcpkit.client import Client, Notifications, Responders
from mcpkit.protocol import types

from .conftest import JS_NODE_MODULES, ROOT, free_port

HERE = Path(__file__).parent
SDK_PEER = HERE / "sdk_peer_server.py"
NODE = shutil.which("node")
EVERYTHING = JS_NODE_MODULES / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
FILESYSTEM = JS_NODE_MODULES / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
STARTUP_S = 20.0

LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"


def needs_node_package(entry: Path) -> pytest.MarkDecorator:
    """A skip marker for a test that runs `node <entry>` (CI installs both)."""
    if NODE is None:
        return pytest.mark.skipif(True, reason="node is not on PATH (CI installs Node.js)")
    return pytest.mark.skipif(
        not entry.exists(),
        reason=f"{entry.relative_to(ROOT)} is missing: run `bash scripts/install_js_peers.sh`",
    )


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop a peer started in its own session: SIGTERM to its process group, then SIGKILL."""
    if proc.poll() is not None:
        return
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


class HttpPeer:
    """One HTTP peer process (`{port}` in `args` and `env` values becomes its port)."""

    def __init__(self, args: Sequence[str], *, env: Mapping[str, str] | None = None,
                 path: str = "/mcp", port: int | None = None) -> None:
        self.port = port or free_port()
        self.args = [a.replace("{port}", str(self.port)) for a in args]
        self.env = {**os.environ,
                    **{k: v.replace("{port}", str(self.port)) for k, v in (env or {}).items()}}
        self.url = f"http://127.0.0.1:{self.port}{path}"
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    def start(self) -> str:
        """Start the process and wait (blocking, bounded) until it listens; its URL."""
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            self.args, cwd=ROOT, env=self.env, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True)
        try:
            _wait_listening(self.proc, self.port, self._log)
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self) -> None:
        if self.proc is not None:
            stop_group(self.proc)
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None


@contextlib.contextmanager
def http_peer(
    args: Sequence[str], *, env: Mapping[str, str] | None = None, path: str = "/mcp",
    port: int | None = None,
) -> Iterator[str]:
    """Run an HTTP peer until the block ends; yields `http://127.0.0.1:<port><path>`."""
    peer = HttpPeer(args, env=env, path=path, port=port)
    try:
        yield peer.start()
    finally:
        peer.stop()


def _wait_listening(proc: subprocess.Popen[bytes], port: int, log: Any) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}: {log.read()!r}")
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"{proc.args} did not listen on port {port} within {STARTUP_S} s")


def python_peer(*args: str) -> list[str]:
    return [sys.executable, str(SDK_PEER), *args]


def node_peer(entry: Path, *args: str) -> list[str]:
    assert NODE is not None
    return [NODE, str(entry), *args]


class Answers:
    """Handlers for what a server asks of the client, recording every question."""

    def __init__(self, *, model_text: str = "Paris",
                 form: Mapping[str, Any] | None = None) -> None:
        self.model_text = model_text
        self.form = dict(form or {"name": "Ada", "age": 36})
        self.sampled: list[types.CreateMessageRequestParams] = []
        self.elicited: list[types.ElicitRequestParams] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.changed: list[str] = []
        self.updated: list[str] = []

    async def sampling(self, params: types.CreateMessageRequestParams) -> dict[str, Any]:
        self.sampled.append(params)
        return {"role": "assistant", "model": "interop-model", "stopReason": "endTurn",
                "content": {"type": "text", "text": self.model_text}}

    async def elicitation(self, params: types.ElicitRequestParams) -> dict[str, Any]:
        self.elicited.append(params)
        if params.mode == "url":
            return {"action": "accept"}
        return {"action": "accept", "content": dict(self.form)}

    def handlers(self, **responders: Any) -> dict[str, Any]:
        """Keyword arguments for `Client(...)`: these answers and notification handlers
        (`responders`: more `Responders` fields, e.g. `roots=`)."""
        return {
            "responders": Responders(sampling=self.sampling, elicitation=self.elicitation,
                                     **responders),
            "notifications": Notifications(on_log=self.logs.append,
                                           on_list_changed=self.changed.append,
                                           on_resource_updated=self.updated.append),
        }


def text_of(result: types.CallToolResult | types.GetPromptResult) -> str:
    """The text blocks of a tool result (asserting it is not an error) or a prompt."""
    if isinstance(result, types.CallToolResult):
        assert result.is_error is not True, result
        blocks = list(result.content)
    else:
        blocks = [message.content for message in result.messages]
    return "".join(getattr(block, "text", "") for block in blocks)


async def until(predicate: Callable[[], bool], what: str, limit_s: float = 3.0) -> None:
    """Wait (bounded) for `predicate()`; notifications are dispatched asynchronously."""
    try:
        with anyio.fail_after(limit_s):
            while True:
                if predicate():
                    return
                await anyio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"still waiting for {what} after {limit_s} s") from None


class PageSpy:
    """Counts the pages a `Client` fetches for one list method (wraps `client.request`)."""

    def __init__(self, client: Client, method: str) -> None:
        self.pages: list[dict[str, Any]] = []
        inner = client.request

        async def request(m: str, params: Any = None, **kwargs: Any) -> Any:
            result = await inner(m, params, **kwargs)
            if m == method:
                self.pages.append(result)
            return result

        client.request = request  # type: ignore[method-assign]
