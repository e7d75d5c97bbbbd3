"""Issue 20 §2, round two: a legacy Streamable HTTP session's notification POSTs take a
request slot when handling them awaits, as messages do on every other transport.

`notifications/roots/list_changed` runs the server's roots callbacks, which may await (ask
the client `roots/list` again, say). Over stdio, WebSocket and HTTP+SSE such a notification
takes one of its connection's request slots (admission.py); over legacy Streamable HTTP it
did not: 800 POSTs on one session held 800 callbacks at once. Now past the session's slots
a POST gets 429 with Retry-After and -32000, and another session is served meanwhile;
notifications acted on at once (`cancelled`) are still accepted.
Over a real uvicorn process."""

from __future__ import annotations

import collections
import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import anyio
import pytest
from tests.memory_bounds import ROOT, LegacySession
from tests.procs import eventually, free_port, mcp_http_server

from mcpkit.server.admission import DEFAULT_MAX_REQUESTS_IN_FLIGHT

pytestmark = pytest.mark.anyio

SERVER = ROOT / "tests" / "transports" / "roots_callback_server.py"
POSTS = DEFAULT_MAX_REQUESTS_IN_FLIGHT + 100
NOTE = {"jsonrpc": "2.0", "method": "notifications/roots/list_changed"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@contextlib.contextmanager
def roots_callback_server() -> Iterator[str]:
    port = free_port()
    with mcp_http_server([sys.executable, str(SERVER), "--port", str(port)], port,
                         cwd=ROOT) as url:
        yield url


async def _post_note(client: aiohttp.ClientSession, session: LegacySession,
                     outcomes: list[tuple[int, Any, str | None]]) -> None:
    async with client.post(session.url, json=NOTE, headers=session.headers) as resp:
        body = await resp.json() if resp.status != 202 else None
        outcomes.append((resp.status, body, resp.headers.get("retry-after")))


async def test_awaiting_notifications_of_one_session_are_bounded_by_its_slots() -> None:
    with roots_callback_server() as url:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as client:
            flooder, other = LegacySession(client, url), LegacySession(client, url)
            await flooder.open()
            await other.open()
            outcomes: list[tuple[int, Any, str | None]] = []
            async with anyio.create_task_group() as tg:
                for _ in range(POSTS):
                    tg.start_soon(_post_note, client, flooder, outcomes)
                # the POSTs past the session's slots are refused at once
                await eventually(
                    lambda: len(outcomes) >= POSTS - DEFAULT_MAX_REQUESTS_IN_FLIGHT, 20)
                started = time.monotonic()
                _, answer = await other.call_tool("held")
                answered_in = time.monotonic() - started
                # a notification acted on at once needs no slot: still accepted
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 12345}}
                async with client.post(url, json=cancel, headers=flooder.headers) as resp:
                    cancelled_status = resp.status
                tg.cancel_scope.cancel()  # the held POSTs: their callbacks sleep on
        held = answer["result"]["structuredContent"]
        statuses = collections.Counter(status for status, _, _ in outcomes)
        print(f"\n{POSTS} roots/list_changed POSTs on one session: {dict(statuses)} answered "
              f"at once, callbacks held {held}; another session answered in {answered_in:.2f} s")
        assert held["peak"] <= DEFAULT_MAX_REQUESTS_IN_FLIGHT
        assert statuses == {429: POSTS - DEFAULT_MAX_REQUESTS_IN_FLIGHT}
        for _, body, retry_after in outcomes:
            assert body["error"]["code"] == -32000
            assert body["error"]["data"]["limit"] == DEFAULT_MAX_REQUESTS_IN_FLIGHT
            assert retry_after is not None and int(retry_after) > 0
        assert answered_in < 5.0
        assert cancelled_status == 202
