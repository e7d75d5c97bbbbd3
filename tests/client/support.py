"""Shared pieces of the client tests: a scripted fake transport, a recording in-memory
transport, raw stdio fault servers written as small Python scripts, and an ASGI app served
by uvicorn in a thread on a free 127.0.0.1 port."""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup
from tests.procs import eventually, free_port, pid_gone, serve_in_thread  # noqa: F401 (re-exported)

from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.transports.client.base import ConnectionClosed, Inbound, Outgoing
from mcpkit.transports.client.memory import MemoryTransport

MODERN = "2026-07-28"
LEGACY = "2025-11-25"

Reply = dict[str, Any] | list[dict[str, Any]] | None
Script = Callable[[dict[str, Any]], Reply]


def result(message: dict[str, Any], value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": message["id"], "result": value}


def error(message: dict[str, Any], code: int, text: str = "error", data: Any = None
          ) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": text}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": message.get("id"), "error": body}


def discover_result(versions: list[str] | None = None, **capabilities: Any) -> dict[str, Any]:
    return {
        "resultType": "complete",
        "supportedVersions": versions or [MODERN],
        "capabilities": capabilities,
        "serverInfo": {"name": "scripted", "version": "9"},
        "cacheScope": "public",
        "ttlMs": 0,
    }


def initialize_result(version: str = LEGACY, **capabilities: Any) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": {"name": "scripted-legacy", "version": "1"},
    }


def legacy_server(message: dict[str, Any]) -> Reply:
    """Answers like a plain legacy server: `initialize`, `ping`, an empty tool list; other
    requests are -32601."""
    method = message.get("method")
    if "id" not in message:
        return None
    if method == "initialize":
        return result(message, initialize_result(
            message["params"]["protocolVersion"], tools={}))
    if method == "ping":
        return result(message, {})
    if method == "tools/list":
        return result(message, {"tools": []})
    return error(message, -32601, f"Method not found: {method}")


class ScriptedTransport:
    """A `ClientTransport` whose server is a function: each message the client sends is
    decoded, kept in `sent`, and passed to `script`, whose replies (a message, a list of
    them, or None for silence) are delivered to the client at once.

    Reusable: each `open` starts a new "connection" (`opens` counts them), so the same
    object can stand for one server across several `Client`s (the era cache key)."""

    kind = "stdio"
    per_request_streams = False

    def __init__(self, script: Script) -> None:
        self.script = script
        self.protocol_version: str | None = None
        self.sent: list[dict[str, Any]] = []
        self.abandoned: list[RequestId] = []
        self.opens = 0
        self.closes = 0
        self._inbound: Inbound | None = None

    def describe(self) -> str:
        return "scripted server"

    async def open(self, inbound: Inbound, task_group: TaskGroup) -> None:
        self.opens += 1
        self._inbound = inbound

    async def send(self, message: Outgoing) -> None:
        if self._inbound is None:
            raise ConnectionClosed("scripted transport is closed")
        decoded = json.loads(message.data)
        self.sent.append(decoded)
        replies = self.script(decoded)
        if replies is None:
            return
        for reply in replies if isinstance(replies, list) else [replies]:
            self.deliver(reply)

    def deliver(self, message: dict[str, Any] | bytes) -> None:
        assert self._inbound is not None
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self._inbound.receive(data)

    async def abandon(self, request_id: RequestId) -> None:
        self.abandoned.append(request_id)

    async def close(self) -> None:
        self.closes += 1
        self._inbound = None

    def methods(self) -> list[str]:
        return [m["method"] for m in self.sent if "method" in m]

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m.get("method") == method and "id" in m]


class _RecordingInbound:
    def __init__(self, inbound: Inbound, received: list[dict[str, Any]]) -> None:
        self._inbound = inbound
        self._received = received

    def receive(self, data: bytes, related: Any = None) -> None:
        self._received.append(json.loads(data))
        self._inbound.receive(data)

    def request_failed(self, request_id: RequestId, error: Exception) -> None:
        self._inbound.request_failed(request_id, error)

    def closed(self, error: Exception | None) -> None:
        self._inbound.closed(error)


class RecordingMemoryTransport(MemoryTransport):
    """The in-memory transport, keeping every message the client sent and received
    (decoded)."""

    def __init__(self, server: Any) -> None:
        super().__init__(server)
        self.sent: list[dict[str, Any]] = []
        self.received: list[dict[str, Any]] = []

    async def open(self, inbound: Inbound, task_group: TaskGroup) -> None:
        await super().open(_RecordingInbound(inbound, self.received), task_group)

    def answer_to(self, request: dict[str, Any]) -> dict[str, Any]:
        for message in self.received:
            if "method" not in message and message.get("id") == request["id"]:
                return message
        raise AssertionError(f"no answer to {request}")

    async def send(self, message: Outgoing) -> None:
        self.sent.append(json.loads(message.data))
        await super().send(message)

    def requests(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.sent if m.get("method") == method and "id" in m]


# --- raw stdio servers ---------------------------------------------------------------------

STDIO_PRELUDE = r'''
import json, os, sys, time

LOG = sys.argv[1]
ERA = sys.argv[2]  # "modern" or "legacy"
TOOLS = [{"name": "work", "inputSchema": {"type": "object"}}]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def raw(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def log(message):
    with open(LOG, "a") as f:
        f.write(json.dumps(message) + "\n")


def result(message, value):
    send({"jsonrpc": "2.0", "id": message["id"], "result": value})


def error(message, code, text):
    send({"jsonrpc": "2.0", "id": message.get("id"), "error": {"code": code, "message": text}})


def on_discover(message):
    if ERA == "modern":
        result(message, {"resultType": "complete", "supportedVersions": ["2026-07-28"],
                         "capabilities": {"tools": {}},
                         "serverInfo": {"name": "raw", "version": "0", "pid": os.getpid()}})
    else:
        error(message, -32601, "Method not found")


def on_initialize(message):
    result(message, {"protocolVersion": message["params"]["protocolVersion"],
                     "capabilities": {"tools": {}},
                     "serverInfo": {"name": "raw", "version": str(os.getpid())}})


def on_call(message):
    result(message, {"content": [{"type": "text", "text": "done"}]})


def on_ping(message):
    result(message, {})


def on_other(message):
    if "id" in message and "method" in message:
        error(message, -32601, "Method not found")
'''

STDIO_LOOP = r'''
def serve():
    log({"pid": os.getpid()})
    handlers = {"server/discover": on_discover, "initialize": on_initialize,
                "tools/call": on_call,
                "tools/list": lambda m: result(m, {"tools": TOOLS}),
                "ping": on_ping}
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        if not line.strip():
            continue
        message = json.loads(line)
        log(message)
        handlers.get(message.get("method"), on_other)(message)


globals().get("main", serve)()  # a test may replace the whole loop with its own main()
'''


class RawServer:
    """A tiny stdio server script (the prelude, the test's overrides, the loop) and the log
    of every message it received."""

    def __init__(self, tmp_path: Path, body: str, era: str = "legacy", name: str = "raw"
                 ) -> None:
        self.script = tmp_path / f"{name}.py"
        self.log_path = tmp_path / f"{name}.log"
        self.log_path.write_text("")
        self.script.write_text(STDIO_PRELUDE + textwrap.dedent(body) + STDIO_LOOP)
        self.command = [sys.executable, "-I", str(self.script), str(self.log_path), era]

    def received(self) -> list[dict[str, Any]]:
        """Every message logged so far: whole lines only (the server may be writing the last
        one while it is read)."""
        text = self.log_path.read_text()
        whole = text[:text.rfind("\n") + 1]
        return [json.loads(line) for line in whole.splitlines() if line]

    def pid(self) -> int:
        pids = [m["pid"] for m in self.received() if "pid" in m]
        assert pids, "the server has not started"
        return int(pids[0])

    def received_method(self, method: str) -> list[dict[str, Any]]:
        return [m for m in self.received() if m.get("method") == method]

    async def wait_for(self, check: Callable[[list[dict[str, Any]]], Any],
                       limit_s: float = 3.0) -> Any:
        with anyio.fail_after(limit_s):
            while not (found := check(self.received())):  # noqa: ASYNC110 (a file)
                await anyio.sleep(0.02)
            return found
