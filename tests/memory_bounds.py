"""Helpers of the memory-bound tests (issue 20 §3): a server process's resident memory, the
flood test server as a process, and a lean client of legacy Streamable HTTP sessions that
reads every event of a flood without keeping it."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from tests.procs import free_port, stop_process, wait_for_port

ROOT = Path(__file__).resolve().parents[1]
FLOOD_SERVER = ROOT / "tests" / "transports" / "flood_server.py"
LEGACY_VERSION = "2025-11-25"
MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """VmRSS of process `pid`, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def settled_rss(pid: int, limit_s: float = 20.0) -> int:
    """The RSS of process `pid` once it stops changing for a second (say, the server stopped
    reading, or it read everything); polls for at most `limit_s`."""
    deadline = time.monotonic() + limit_s
    last, steady = rss_bytes(pid), 0
    while time.monotonic() < deadline and steady < 5:
        time.sleep(0.2)
        now = rss_bytes(pid)
        steady = steady + 1 if abs(now - last) < 256 * 1024 else 0
        last = now
    return last


@dataclass
class ServerProcess:
    url: str
    proc: subprocess.Popen[bytes]


@contextlib.contextmanager
def flood_server_http(*options: str) -> Iterator[ServerProcess]:
    """tests/transports/flood_server.py serving Streamable HTTP on a free 127.0.0.1 port."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(FLOOD_SERVER), "--transport", "http", "--port", str(port),
         *options],
        env={**os.environ}, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(proc, port)
        yield ServerProcess(f"http://127.0.0.1:{port}/mcp", proc)
    finally:
        stop_process(proc)


class LegacySession:
    """One legacy Streamable HTTP session, driven with plain aiohttp."""

    def __init__(self, client: aiohttp.ClientSession, url: str,
                 headers: dict[str, str] | None = None) -> None:
        self.client = client
        self.url = url
        self.base = {"accept": "application/json, text/event-stream",
                     "content-type": "application/json", **(headers or {})}
        self.session_id = ""
        self.next_id = 1

    @property
    def headers(self) -> dict[str, str]:
        return {**self.base, "mcp-session-id": self.session_id,
                "mcp-protocol-version": LEGACY_VERSION}

    async def open(self) -> None:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY_VERSION, "capabilities": {},
            "clientInfo": {"name": "memory-test", "version": "1"}}}
        async with self.client.post(self.url, json=init, headers=self.base) as resp:
            assert resp.status == 200, await resp.text()
            self.session_id = resp.headers["mcp-session-id"]
            await resp.read()
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with self.client.post(self.url, json=note, headers=self.headers) as resp:
            assert resp.status == 202
        await self.request("logging/setLevel", {"level": "info"})

    async def request(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Send a request and read its whole answer: (log messages seen, the response)."""
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        async with self.client.post(self.url, json=body, headers=self.headers) as resp:
            assert resp.status == 200, await resp.text()
            if resp.content_type == "application/json":
                return 0, dict(await resp.json())
            return await read_events(resp.content, self.next_id)

    async def call_tool(self, name: str, **arguments: Any) -> tuple[int, dict[str, Any]]:
        return await self.request("tools/call", {"name": name, "arguments": arguments})

    async def close(self) -> None:
        async with self.client.delete(self.url, headers=self.headers) as resp:
            await resp.read()


async def read_events(content: aiohttp.StreamReader, request_id: int,
                      warnings: list[bytes] | None = None) -> tuple[int, dict[str, Any]]:
    """Read an SSE response to its end: how many log messages it carried and the response
    to `request_id` (log messages at level warning go to `warnings` too). Events are split
    on blank lines and forgotten at once (a flood is tens of megabytes; the test client must
    stay lean and quick)."""
    import json

    pending = b""
    logs = 0
    response: dict[str, Any] = {}
    async for chunk in content.iter_any():
        pending += chunk
        *events, pending = pending.split(b"\n\n")
        for event in events:
            if b'"notifications/message"' in event:
                logs += 1
                if warnings is not None and b'"level":"warning"' in event:
                    warnings.append(event)
            elif b'"result"' in event or b'"error"' in event:
                data = b"".join(line[5:].strip() for line in event.split(b"\n")
                                if line.startswith(b"data:"))
                message = json.loads(data)
                if message.get("id") == request_id:
                    response = message
    return logs, response
