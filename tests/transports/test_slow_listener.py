"""Issue 20 §2, round two: one peer that stops reading does not hold up everyone else's
notifications, nor the code that notifies.

The notifier used to await each peer in turn. A `subscriptions/listen` stream whose client
stopped reading filled its socket, and from then on every other listener (and legacy
session) got nothing more and the tool that notified never returned: with a stuck listener,
`bump(20000)` was not answered within 20 s and a reading listener saw 1,833 of 20,000
updates. Now each peer has a sender of its own, with a coalescing outbox capped in bytes.
Over a real uvicorn process (stuck client: a raw socket that never reads), plus the outbox
rules with in-memory channels."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import anyio
import pytest
from tests.memory_bounds import ROOT
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit.server.connection import Connection, LegacySession
from mcpkit.server.notifier import Listener, Notifier

pytestmark = pytest.mark.anyio

SERVER = ROOT / "tests" / "transports" / "notify_server.py"
LONG_URI = "mem://" + "u" * 2000
BUMPS = 6000  # ~13 MB of updates: far more than a stuck socket's buffers take
VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "slow-listener-test", "version": "0"},
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _body(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method,
            "params": {**params, "_meta": META}}


def _headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {"content-type": "application/json", "mcp-method": method,
               "accept": "application/json, text/event-stream", "mcp-protocol-version": VERSION}
    if name is not None:
        headers["mcp-name"] = name
    return headers


LISTEN = {"notifications": {"resourceSubscriptions": [LONG_URI]}}


@contextlib.contextmanager
def notify_server() -> Iterator[int]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
        yield port
    finally:
        stop_process(proc)


@contextlib.contextmanager
def stuck_listener(port: int) -> Iterator[socket.socket]:
    """A `subscriptions/listen` whose client never reads a byte of the answer."""
    raw = json.dumps(_body(1, "subscriptions/listen", LISTEN)).encode()
    head = "".join(f"{k}: {v}\r\n" for k, v in _headers("subscriptions/listen").items())
    request = (f"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n"
               f"content-length: {len(raw)}\r\n{head}\r\n").encode() + raw
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    try:
        sock.sendall(request)
        yield sock
    finally:
        sock.close()


async def test_a_stuck_listener_holds_up_neither_others_nor_the_notifier() -> None:
    with notify_server() as port, stuck_listener(port):
        url = f"http://127.0.0.1:{port}/mcp"
        seen = 0
        async with aiohttp.ClientSession() as client:

            async def reading_listener(*, task_status: Any) -> None:
                nonlocal seen
                async with client.post(url, json=_body(2, "subscriptions/listen", LISTEN),
                                       headers=_headers("subscriptions/listen")) as resp:
                    task_status.started()
                    async for line in resp.content:
                        seen += b"resources/updated" in line

            async with anyio.create_task_group() as tg:
                await tg.start(reading_listener)
                await anyio.sleep(0.5)  # both listeners registered
                started = time.monotonic()
                with anyio.fail_after(30):
                    async with client.post(
                        url, json=_body(3, "tools/call", {"name": "bump",
                                                           "arguments": {"count": BUMPS}}),
                        headers=_headers("tools/call", "bump")) as resp:
                        answer = await resp.json()
                answered_in = time.monotonic() - started
                with anyio.move_on_after(10):
                    while seen < BUMPS:  # noqa: ASYNC110 (the reader task counts)
                        await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
        print(f"\n{BUMPS} updates with a stuck listener: bump answered in {answered_in:.2f} s, "
              f"the reading listener saw {seen}")
        assert "result" in answer, answer
        assert answered_in < 15.0
        assert seen == BUMPS


# --- the outbox rules, with in-memory channels --------------------------------------------------


class BlockedChannel:
    """A peer that does not read until `opened` is set."""

    def __init__(self) -> None:
        self.opened = anyio.Event()
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: bytes) -> None:
        await self.opened.wait()
        self.messages.append(json.loads(message))


class OpenChannel:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: bytes) -> None:
        self.messages.append(json.loads(message))


def _session(channel: Any, uris: list[str]) -> Connection:
    connection = Connection(channel)
    connection.legacy = LegacySession("2025-11-25", {}, {}, initialized=True,
                                      subscriptions=set(uris))
    return connection


@pytest.mark.parametrize("cap", [4096, 1024 * 1024])
async def test_a_blocked_peer_gets_each_distinct_update_once_in_order_within_its_cap(
    cap: int,
) -> None:
    uris = [f"mem://r/{i}" for i in range(200)]
    notifier = Notifier(max_pending_bytes=cap, delivery_wait_s=0.05)
    blocked, fast = BlockedChannel(), OpenChannel()
    notifier.connections |= {_session(blocked, uris), _session(fast, uris)}
    listener = Listener("sub-1", {"toolsListChanged": True}, OpenChannel())
    notifier.listeners.add(listener)
    sent = []
    for round_ in range(3):
        for uri in uris[:20] if round_ else uris:
            await notifier.resource_updated(uri)
            sent.append(uri)
        await notifier.list_changed("tools")
        sent.append("tools")
    # the peer that reads got everything, in order, before each call returned
    got = [m.get("params", {}).get("uri", "tools") for m in fast.messages]
    assert got == sent
    assert len(listener.channel.messages) == 3  # type: ignore[attr-defined]
    # the blocked one: its outbox coalesced and stayed within the cap
    assert notifier.pending_bytes() <= cap
    blocked.opened.set()
    with anyio.fail_after(5):
        while notifier.pending_bytes():  # noqa: ASYNC110 (its sender drains in the background)
            await anyio.sleep(0.01)
        await anyio.sleep(0.05)
    delivered = [m.get("params", {}).get("uri", "tools") for m in blocked.messages]
    waiting = delivered[1:]  # the first was under way when the peer stopped reading
    assert len(waiting) == len(set(waiting))  # coalesced: no message twice while waiting
    in_order = list(dict.fromkeys(sent[1:]))  # what was queued behind it, coalesced
    positions = [in_order.index(item) for item in waiting]
    assert positions == sorted(positions)  # delivered in the order queued
    assert delivered[0] == uris[0]  # the one under way when the peer stopped reading
    waited = sum(len(json.dumps(m, separators=(",", ":"))) for m in blocked.messages[1:])
    assert waited <= cap
    if cap > 100 * 1024:  # room for every distinct message: nothing lost, each once
        assert waiting == in_order
