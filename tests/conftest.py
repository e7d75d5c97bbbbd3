"""Shared fixtures: the anyio backend and an in-memory rig that drives `server.engine`."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anyio
import pytest
from tests import timeout_dump
from tests.skip_summary import pytest_terminal_summary  # a hook: pytest finds it by its name

from mcpkit.protocol import jsonrpc
from mcpkit.server.connection import Connection

timeout_dump.install()

MODERN_VERSION = "2026-07-28"
LEGACY_VERSION = "2025-11-25"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class MemoryChannel:
    """A `Channel` that keeps every message sent on it, decoded."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: bytes) -> None:
        self.messages.append(json.loads(message))

    def notifications(self, method: str | None = None) -> list[dict[str, Any]]:
        return [
            m
            for m in self.messages
            if "id" not in m and "method" in m and (method is None or m["method"] == method)
        ]

    async def wait_for(self, predicate: Any, limit_s: float = 5.0) -> dict[str, Any]:
        with anyio.fail_after(limit_s):
            while True:
                for message in self.messages:
                    if predicate(message):
                        return message
                await anyio.sleep(0.005)


def modern_meta(
    version: str = MODERN_VERSION, capabilities: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    meta = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": capabilities or {},
        "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
    }
    meta.update(extra)
    return meta


class Rig:
    """One client connection to a server, driven straight through its engine."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.engine = server.engine
        self.channel = MemoryChannel()
        self.connection = Connection(self.channel)
        self._ids = itertools.count(1)

    async def call(
        self, method: str, params: dict[str, Any] | None = None, *, id: Any = None
    ) -> dict[str, Any] | None:
        request_id = next(self._ids) if id is None else id
        raw = (
            jsonrpc.encode_request(request_id, method, params)
            if params is not None
            else jsonrpc.encode_request(request_id, method)
        )
        request = jsonrpc.decode_message(raw)
        assert isinstance(request, jsonrpc.Request)
        body = await self.engine.handle_request(request, self.connection, self.channel)
        return None if body is None else json.loads(body)

    async def modern(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        capabilities: dict[str, Any] | None = None,
        id: Any = None,
        **meta_extra: Any,
    ) -> dict[str, Any] | None:
        params = dict(params or {})
        params["_meta"] = {
            **modern_meta(capabilities=capabilities),
            **meta_extra,
            **params.get("_meta", {}),
        }
        return await self.call(method, params, id=id)

    async def initialize(
        self, version: str = LEGACY_VERSION, capabilities: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        response = await self.call(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "tests", "version": "0"},
            },
        )
        assert response is not None and "result" in response, response
        await self.notify("notifications/initialized")
        return response["result"]

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        raw = (
            jsonrpc.encode_notification(method, params)
            if params is not None
            else jsonrpc.encode_notification(method)
        )
        note = jsonrpc.decode_message(raw)
        assert isinstance(note, jsonrpc.Notification)
        await self.engine.handle_notification(note, self.connection)


@pytest.fixture
def make_rig() -> Any:
    """`make_rig(server)` → a `Rig` (a fresh connection with an in-memory channel)."""
    return Rig


@pytest.fixture
def meta_for() -> Any:
    """`meta_for(version=..., capabilities=..., **extra)` → a modern request `_meta`."""
    return modern_meta


# --- real processes ------------------------------------------------------------------------

import os  # noqa: E402
import selectors  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

from tests.procs import free_port  # noqa: E402

CONFORMANCE_STDIO = [sys.executable, "-m", "mcpkit.testing.conformance_server",
                     "--transport", "stdio"]


class StdioPeer:
    """A server subprocess on pipes; every wait is bounded."""

    def __init__(self, args: list[str], **popen: Any) -> None:
        self.proc = subprocess.Popen(
            args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen
        )
        self._buffer = b""
        self.raw_lines: list[bytes] = []
        self.seen: list[dict[str, Any]] = []  # messages read while waiting for another
        self._stderr: list[bytes] = []
        self._ids = itertools.count(1)
        self._drain = threading.Thread(target=self._read_stderr, daemon=True)
        self._drain.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for chunk in iter(lambda: self.proc.stderr.read1(65536), b""):  # type: ignore[union-attr]
            self._stderr.append(chunk)

    @property
    def stderr(self) -> bytes:
        return b"".join(self._stderr)

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: Any) -> None:
        self.write((message if isinstance(message, bytes) else json.dumps(message).encode())
                   + b"\n")

    def read_line(self, limit_s: float = 10.0) -> bytes | None:
        """The next stdout line, or None on EOF; fails the test after `limit_s`."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + limit_s
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buffer:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no line from the server within {limit_s} s")
                if not sel.select(left):
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    return None
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.raw_lines.append(line)
        return line

    def read(self, limit_s: float = 10.0) -> dict[str, Any]:
        line = self.read_line(limit_s)
        assert line is not None, "server closed stdout"
        return json.loads(line)

    def response(self, request_id: Any, limit_s: float = 10.0) -> dict[str, Any]:
        """Read until the response to `request_id`; other messages go to `seen`."""
        for i, message in enumerate(self.seen):
            if "method" not in message and message.get("id") == request_id:
                return self.seen.pop(i)
        deadline = time.monotonic() + limit_s
        while True:
            message = self.read(max(0.01, deadline - time.monotonic()))
            if "method" not in message and message.get("id") == request_id:
                return message
            self.seen.append(message)

    def request(self, method: str, params: dict[str, Any] | None = None, *, id: Any = None,
                limit_s: float = 10.0) -> dict[str, Any]:
        request_id = next(self._ids) if id is None else id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.response(request_id, limit_s)

    def close(self, limit_s: float = 5.0) -> int:
        """Close stdin and wait for the process to exit (killing it if it does not)."""
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        try:
            return self.proc.wait(limit_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise
        finally:
            if self.proc.stdout:
                self.proc.stdout.close()
            self._drain.join(5)
            if self.proc.stderr:
                self.proc.stderr.close()


@pytest.fixture
def stdio_peer() -> Any:
    """`stdio_peer(args=CONFORMANCE_STDIO)` → a started `StdioPeer`; all are closed at the end."""
    peers: list[StdioPeer] = []

    def start(args: list[str] | None = None, **popen: Any) -> StdioPeer:
        peer = StdioPeer(args or CONFORMANCE_STDIO, **popen)
        peers.append(peer)
        return peer

    yield start
    for peer in peers:
        if peer.proc.poll() is None:
            try:
                peer.close()
            except subprocess.TimeoutExpired:
                pass


class HttpServerProcess:
    def __init__(self, port: int) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mcpkit.testing.conformance_server", "--port", str(port)],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def wait_ready(self, limit_s: float = 15.0) -> None:
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                raise RuntimeError(f"server exited: {self.log.read()!r}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                    sock.sendall(
                        b"GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                    )
                    if sock.recv(12).startswith(b"HTTP/1.1"):
                        return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError("HTTP server did not start")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, 15)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, 9)
                self.proc.wait(5)
        self.log.close()


@pytest.fixture(scope="module")
def http_server() -> Any:
    """The conformance server on Streamable HTTP, one process per test module."""
    server = HttpServerProcess(free_port())
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


__all__ = ["pytest_terminal_summary"]
