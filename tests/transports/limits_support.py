"""Helpers of the limits tests: an `mcpkit` command as a real server process (optionally
with a lowered file descriptor limit), and raw HTTP/1.1 requests from a chosen loopback
source address (127.0.0.0/8 is all loopback: 127.0.0.2 is "another client")."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from tests.procs import free_port, stop_process, wait_for_port

LEGACY_VERSION = "2025-06-18"


def initialize(request_id: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {},
        "clientInfo": {"name": "limits-tests", "version": "0"}}}).encode()


def ping(request_id: int = 2) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "ping"}).encode()


@contextlib.contextmanager
def mcpkit_process(
    args: Sequence[str], *, fd_limit: int | None = None, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    """`python -m mcpkit ARGS --port P` (soft RLIMIT_NOFILE lowered to `fd_limit` first):
    the process and its port; stopped on exit."""
    port = free_port()
    code = "import resource, sys\n"
    if fd_limit is not None:
        code += ("_soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
                 f"resource.setrlimit(resource.RLIMIT_NOFILE, ({fd_limit}, hard))\n")
    code += "from mcpkit.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    with tempfile.TemporaryFile() as log:  # a pipe nobody reads could fill and block it
        proc = subprocess.Popen([sys.executable, "-c", code, *args, "--port", str(port)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        try:
            wait_for_port(proc, port, timeout=30)
            yield proc, port
        finally:
            stop_process(proc)


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def parse_reply(data: bytes) -> Reply:
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return Reply(int(lines[0].split(" ", 2)[1]), headers, body)


async def http(port: int, body: bytes | None = None, *, method: str = "POST",
               path: str = "/mcp", headers: dict[str, str] | None = None,
               source: str = "127.0.0.1", limit_s: float = 10.0) -> Reply:
    """One request on a fresh connection (`connection: close`) from `source`; the whole
    reply (a JSON answer: the body as sent), within `limit_s`."""
    sent = {"host": f"127.0.0.1:{port}", "content-type": "application/json",
            "accept": "application/json, text/event-stream", "connection": "close",
            **(headers or {})}
    if body is not None:
        sent["content-length"] = str(len(body))
    async with asyncio.timeout(limit_s):
        reader, writer = await asyncio.open_connection("127.0.0.1", port,
                                                       local_addr=(source, 0))
        try:
            head = f"{method} {path} HTTP/1.1\r\n" + "".join(
                f"{name}: {value}\r\n" for name, value in sent.items()) + "\r\n"
            writer.write(head.encode("latin-1") + (body or b""))
            return parse_reply(await reader.read())
        finally:
            writer.close()


async def open_stream(port: int, session_id: str, *, source: str = "127.0.0.1"
                      ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A legacy session's standalone GET stream, held open (its session is busy while it
    is); the caller closes the writer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write((f"GET /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: text/event-stream\r\n"
                  f"mcp-session-id: {session_id}\r\n\r\n").encode())
    async with asyncio.timeout(10):
        status_line = await reader.readline()
    assert b" 200 " in status_line, status_line
    return reader, writer
