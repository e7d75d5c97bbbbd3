"""Opening an SSE stream the moment a server process begins to stop, over real HTTP.

The race this makes deterministic: a stop signal ends the open streams, and a stream asked
for just then (a client reconnecting, or a request already on its way) used to miss that
step and be held open until the shutdown's grace ran out (30 s for the hub).

How: a request's head and all its body but the last byte are sent, so the server is serving
it (a request under way: the stop does not close its connection); the server process is
frozen (SIGSTOP), the last byte written (the kernel holds it), then SIGTERM and SIGCONT. On
waking, the process handles the stop signal before it reads that byte: the request is acted
on after shutdown began, every time.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import anyio

from mcpkit.protocol import versions
from mcpkit.protocol.sse import EventParser

MODERN = versions.LATEST_VERSION
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
}
ACCEPT = "application/json, text/event-stream"
WRITTEN_S = 0.3
"""Time for this process to write a request into its socket (the server is frozen: nothing
it does races with this)."""
ANSWERED_S = 8.0
"""Liveness bound for the stream opened while stopping to be answered or ended: far below
the hub's 30 s grace; the example server's 5 s grace ends a held stream without its
response, which the tests tell apart."""


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    messages: list[dict[str, Any]] = field(default_factory=list)


@contextlib.asynccontextmanager
async def one_connection(bearer: str | None = None) -> AsyncIterator[aiohttp.ClientSession]:
    """An HTTP client that keeps one connection alive and sends every request on it."""
    headers = {"authorization": f"Bearer {bearer}"} if bearer else {}
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector, headers=headers,
                                     timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


def modern_listen() -> tuple[dict[str, Any], dict[str, str]]:
    """A `subscriptions/listen` request (2026-07-28) and its headers."""
    body = {"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": True}, "_meta": META}}
    headers = {"content-type": "application/json", "accept": ACCEPT,
               "mcp-protocol-version": MODERN, "mcp-method": "subscriptions/listen"}
    return body, headers


async def modern_ping(http: aiohttp.ClientSession, url: str) -> None:
    """A modern request, answered: the connection is open and idle afterwards."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}}
    headers = {"content-type": "application/json", "accept": ACCEPT,
               "mcp-protocol-version": MODERN, "mcp-method": "tools/list"}
    async with http.post(url, json=body, headers=headers) as resp:
        assert resp.status == 200, await resp.text()
        await resp.read()


def assert_listen_ended(answer: Answer, request_id: int) -> None:
    """The listen stream was acknowledged, then ended with its result (not cut off)."""
    assert answer.status == 200, answer
    methods = [message.get("method") for message in answer.messages]
    assert methods[0] == "notifications/subscriptions/acknowledged", answer
    last = answer.messages[-1]
    assert last.get("id") == request_id and "result" in last, answer


async def read_answer(resp: aiohttp.ClientResponse) -> Answer:
    answer = Answer(resp.status, dict(resp.headers))
    if resp.content_type != "text/event-stream":
        raw = await resp.read()
        if resp.content_type == "application/json" and raw:
            answer.messages.append(json.loads(raw))
        return answer
    parser = EventParser()
    async for chunk in resp.content.iter_any():
        answer.messages += [json.loads(e.data) for e in parser.feed(chunk) if e.data]
    return answer


async def post_while_stopping(
    proc: subprocess.Popen[bytes], http: aiohttp.ClientSession, url: str,
    body: dict[str, Any], headers: dict[str, str],
) -> Answer:
    """POST `body`, of which `proc` (by pid) gets the last byte only after SIGTERM; the whole
    answer. Fails if the answer does not end within `ANSWERED_S`."""
    data = json.dumps(body).encode()
    last_byte = anyio.Event()
    answer: list[Answer] = []

    async def parts() -> AsyncIterator[bytes]:
        yield data[:-1]  # the request is under way: the stop does not close its connection
        await last_byte.wait()
        yield data[-1:]

    async def send() -> None:
        async with http.post(url, data=parts(), headers=headers) as resp:
            answer.append(await read_answer(resp))

    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        await anyio.sleep(WRITTEN_S)  # the server got the head and is reading the body
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            last_byte.set()
            await anyio.sleep(WRITTEN_S)  # in the server's socket, unread
            os.kill(proc.pid, signal.SIGTERM)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        with anyio.fail_after(ANSWERED_S):
            while not answer:  # noqa: ASYNC110 (the answer comes from another process)
                await anyio.sleep(0.02)
    return answer[0]


async def wait_exit(proc: subprocess.Popen[bytes], bound_s: float) -> int:
    """`proc`'s exit status; fails if it has not exited within `bound_s`."""
    with anyio.fail_after(bound_s):
        while proc.poll() is None:  # noqa: ASYNC110 (another process)
            await anyio.sleep(0.05)
    return proc.returncode
