"""`Client` against servers that attack it (issue 20, round two), each a real process: a
stdio script (support.RawServer) or an HTTP server (hostile_http_server.py) on 127.0.0.1.

- A flood of notifications and server→client requests, with handlers that take their time
  (a sampling handler waits on a person): the client's tasks and memory stay bounded
  (`InboundLimits`), excess requests are refused with a precise error, and the client's own
  requests are still answered.
- Endless or bloated pagination: `list_tools()` and friends stop with `ListTooLarge`.
- A Streamable HTTP server that ends every stream at once with `retry: 0`: the reconnects
  are paced (`min_retry_s`).
- Redirects to another origin are refused on every HTTP transport: the other origin never
  sees a request, let alone the user's headers.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.procs import free_port, stop_process

from mcpkit.client import (
    Client,
    ClientError,
    ConnectOptions,
    HttpStatusError,
    InboundLimits,
    Limits,
    ListLimits,
    ListTooLarge,
    Notifications,
    RedirectRefused,
    RequestTimeout,
    Responders,
    Timeouts,
)
from mcpkit.client.listing import ListBudget
from mcpkit.client.session import BUSY, MAX_NOTIFICATION_HANDLERS, MAX_SERVER_REQUESTS
from mcpkit.transports.client.base import MessageTooLarge

from .support import RawServer, eventually

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
HOSTILE_HTTP = Path(__file__).with_name("hostile_http_server.py")


def own_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


async def forever(*_: Any) -> Any:
    """A handler that never finishes on its own (a person who never answers)."""
    await anyio.sleep_forever()


# --- floods of notifications and server requests over stdio --------------------------------

FLOOD = """
N_NOTES, N_REQUESTS = {notes}, {requests}

def on_call(message):
    note = json.dumps({{"jsonrpc": "2.0", "method": "notifications/message",
                        "params": {{"level": "info", "data": "x" * 200}}}})
    raw((note + "\\n") * N_NOTES)
    for i in range(N_REQUESTS):
        send({{"jsonrpc": "2.0", "id": "s%d" % i, "method": "sampling/createMessage",
               "params": {{"messages": [{{"role": "user", "content": {{"type": "text",
                                                                      "text": "y" * 200}}}}],
                           "maxTokens": 5}}}})
    result(message, {{"content": [{{"type": "text", "text": "done"}}]}})
"""


async def test_a_flood_of_notifications_and_requests_costs_bounded_tasks_and_memory(
    tmp_path: Path,
) -> None:
    """40,000 log notifications and 4,000 sampling requests, none of whose handlers ever
    finish. Unbounded, that was a task each: 44,000 tasks and ~300 MiB (100,000 + 20,000:
    120,000 tasks, +775 MiB). Bounded: at most 64 + 1024 handler tasks, a few MiB."""
    server = RawServer(tmp_path, FLOOD.format(notes=40_000, requests=4_000))
    async with Client(
        server.command,
        notifications=Notifications(on_log=forever),
        responders=Responders(sampling=forever),
        timeouts=Timeouts(timeout=30),
    ) as client:
        session = client.session
        tasks_before, rss_before = len(asyncio.all_tasks()), own_rss()
        with anyio.fail_after(20):
            await client.call_tool("work", {})
        tasks_after = len(asyncio.all_tasks())
        grown = own_rss() - rss_before
        assert tasks_after - tasks_before <= MAX_SERVER_REQUESTS * 2 + MAX_NOTIFICATION_HANDLERS
        assert grown < 40 * MIB, f"the client grew by {grown / MIB:.0f} MiB"
        assert session.dropped_notifications >= 40_000 - MAX_NOTIFICATION_HANDLERS
        # the client's own requests still go through while every slot is taken
        with anyio.fail_after(5):
            await client.ping()
        # requests past the limit were refused, precisely (the server reads them once its
        # flood is written)
        refusals = await server.wait_for(
            lambda got: [m for m in got if m.get("error", {}).get("code") == BUSY], 10)
        assert "already answering 64 requests" in refusals[0]["error"]["message"]
        assert "sampling/createMessage refused" in refusals[0]["error"]["message"]


async def test_refusals_and_drops_follow_the_set_limits(tmp_path: Path) -> None:
    """With small limits the arithmetic is exact: 3 requests answered, the other 7 refused
    at once (the server reads everything); 5 notification handlers, 15 dropped."""
    server = RawServer(tmp_path, FLOOD.format(notes=20, requests=10))
    answered: list[Any] = []

    async def slow_sampling(params: Any) -> Any:
        answered.append(params)
        await anyio.sleep_forever()

    limits = InboundLimits(requests=3, notifications=5)
    async with Client(
        server.command,
        notifications=Notifications(on_log=forever),
        responders=Responders(sampling=slow_sampling),
        limits=Limits(inbound=limits),
    ) as client:
        await client.call_tool("work", {})
        refusals = await server.wait_for(
            lambda got: (r := [m for m in got if "error" in m]) and len(r) >= 7 and r)
        assert len(refusals) == 7
        assert {r["error"]["code"] for r in refusals} == {BUSY}
        await eventually(lambda: len(answered) == 3)
        assert client.session.dropped_notifications == 15
    with pytest.raises(ValueError, match="at least 1"):
        InboundLimits(requests=0)


# --- pagination -----------------------------------------------------------------------------

PAGES = """
COUNT = [0]

def on_list(message, key, cursor_size, per_page):
    COUNT[0] += 1
    items = [{{"name": "i%d_%d" % (COUNT[0], i), "uri": "file:///%d/%d" % (COUNT[0], i),
               "uriTemplate": "file:///%d/{{x}}" % i, "inputSchema": {{"type": "object"}},
               "description": "d" * 100}} for i in range(per_page)]
    result(message, {{key: items, "nextCursor": str(COUNT[0]) + "c" * cursor_size}})

def main():
    keys = {{"tools/list": "tools", "resources/list": "resources",
             "resources/templates/list": "resourceTemplates", "prompts/list": "prompts"}}
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        message = json.loads(line)
        method = message.get("method")
        if method in keys:
            on_list(message, keys[method], {cursor_size}, {per_page})
        elif method == "initialize":
            result(message, {{"protocolVersion": message["params"]["protocolVersion"],
                              "capabilities": {{"tools": {{}}, "resources": {{}},
                                                "prompts": {{}}}},
                              "serverInfo": {{"name": "pages", "version": "1"}}}})
        elif "id" in message and "method" in message:
            error(message, -32601, "Method not found")
"""

LISTS = ["list_tools", "list_resources", "list_resource_templates", "list_prompts"]


@pytest.mark.parametrize("lister", LISTS)
async def test_huge_cursors_stop_the_list_at_once(tmp_path: Path, lister: str) -> None:
    """Every page names a new 1 MiB cursor. Unbounded, 1000 pages held ~1 GiB of cursors;
    now the first one over 64 KiB stops the list."""
    server = RawServer(tmp_path, PAGES.format(cursor_size=MIB, per_page=0))
    async with Client(server.command, era="legacy") as client:
        with pytest.raises(ListTooLarge, match=r"cursor of 1048577 bytes, over 65536 "
                                               r"\(ListLimits.cursor_bytes\)"):
            await getattr(client, lister)()
        assert len([m for m in server.received() if "cursor" in m.get("params", {})]) == 0


async def test_pages_without_end_stop_at_the_item_and_byte_bounds(tmp_path: Path) -> None:
    """2,000 items a page, a new cursor each time: stopped at the item bound (and, set
    lower, at the byte bound), with the client's memory held near what the bound allows."""
    server = RawServer(tmp_path, PAGES.format(cursor_size=10, per_page=2000))
    rss_before = own_rss()
    async with Client(
        server.command,
        era="legacy",
        limits=Limits(lists=ListLimits(items=20_000)),
    ) as client:
        with pytest.raises(ListTooLarge, match=r"more than 20000 items \(ListLimits.items\)"):
            await client.list_tools()
        assert own_rss() - rss_before < 100 * MIB
    server = RawServer(tmp_path, PAGES.format(cursor_size=10, per_page=2000), name="bytes")
    async with Client(
        server.command,
        era="legacy",
        limits=Limits(lists=ListLimits(bytes=MIB)),
    ) as client:
        with pytest.raises(ListTooLarge, match=r"more than 1048576 bytes of items"):
            await client.list_prompts()
        assert len(server.received_method("prompts/list")) <= 5  # ~250 KB a page


@settings(max_examples=200, deadline=None)
@given(pages=st.lists(st.integers(0, 50), max_size=40),
       limit_items=st.integers(1, 500), limit_pages=st.integers(1, 30))
def test_the_budget_stops_exactly_when_a_bound_is_passed(
    pages: list[int], limit_items: int, limit_pages: int,
) -> None:
    """Whatever the page sizes: the budget raises once the items pass their bound or a
    cursor asks for a page past the page bound, and never before."""
    budget = ListBudget(ListLimits(items=limit_items, pages=limit_pages), "tools/list")
    total = 0
    for number, size in enumerate(pages, start=1):
        total += size
        if total > limit_items:
            with pytest.raises(ListTooLarge, match="items"):
                budget.page([{}] * size)
            return
        budget.page([{}] * size)
        if number >= limit_pages:
            with pytest.raises(ListTooLarge, match="pages"):
                budget.cursor(f"c{number}")
            return
        budget.cursor(f"c{number}")


# --- hostile HTTP servers -------------------------------------------------------------------


@dataclass
class HostileHttp:
    url: str
    port: int
    other_port: int
    log: Path

    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def requests(self, where: str) -> list[dict[str, Any]]:
        return [e for e in self.entries() if e.get("where") == where]


@pytest.fixture
def hostile_http(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HostileHttp]:
    mode = request.param
    port, other_port = free_port(), free_port()
    log = tmp_path / "hostile.log"
    log.write_text("")
    proc = subprocess.Popen(
        [sys.executable, str(HOSTILE_HTTP), mode, str(port), str(other_port), str(log)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        server = HostileHttp(f"http://127.0.0.1:{port}/mcp", port, other_port, log)
        for _ in range(300):
            if any(e.get("ready") for e in server.entries()) or proc.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"], check=False)
        assert proc.poll() is None, "the hostile server did not start"
        yield server
    finally:
        stop_process(proc)


@pytest.mark.parametrize("hostile_http", ["storm"], indirect=True)
async def test_retry_zero_cannot_make_the_client_reconnect_in_a_loop(
    hostile_http: HostileHttp,
) -> None:
    """Each resumption brings a new event id and `retry: 0`. Obeyed, that was ~26,000 GETs
    in 5 s for one request; paced at 0.25 s, at most ~4 a second."""
    async with Client(
        hostile_http.url,
        era="legacy",
        timeouts=Timeouts(timeout=2, maximum=2),
    ) as client:
        with pytest.raises(RequestTimeout):
            await client.call_tool("work", {})
    resumes = [e for e in hostile_http.requests("main")
               if e["method"] == "GET" and "Last-Event-ID" in e["headers"]]
    assert 1 <= len(resumes) <= 12


@pytest.mark.parametrize("hostile_http", ["flood"], indirect=True)
async def test_a_flood_on_a_response_stream_is_bounded_too(hostile_http: HostileHttp) -> None:
    """The same flood on a Streamable HTTP response stream: the bounds are the session's,
    so they hold on every transport; the call still gets its result."""
    async with Client(
        hostile_http.url,
        era="legacy",
        notifications=Notifications(on_log=forever),
        responders=Responders(sampling=forever),
        timeouts=Timeouts(timeout=30),
    ) as client:
        tasks_before, rss_before = len(asyncio.all_tasks()), own_rss()
        with anyio.fail_after(20):
            outcome = await client.call_tool("work", {})
        assert outcome.content[0].text == "done"  # type: ignore[union-attr]
        assert (len(asyncio.all_tasks()) - tasks_before
                <= MAX_SERVER_REQUESTS * 2 + MAX_NOTIFICATION_HANDLERS + 8)
        assert own_rss() - rss_before < 60 * MIB
        with anyio.fail_after(5):
            await client.ping()
        refused = await eventually(lambda: [
            e for e in hostile_http.requests("main")
            if isinstance(e.get("body"), dict) and e["body"]["error"]["code"] == BUSY], 10)
        assert "refused" in refused[0]["body"]["error"]["message"]


@pytest.mark.parametrize("hostile_http", ["redirect"], indirect=True)
@pytest.mark.parametrize("kind", ["http", "sse", "websocket"])
async def test_a_redirect_to_another_origin_is_not_followed(
    hostile_http: HostileHttp, kind: str,
) -> None:
    """Every request is redirected to another origin. aiohttp's WebSocket handshake used
    to follow it, taking the user's `X-Api-Key` along; now no transport follows it."""
    url = {"http": hostile_http.url, "sse": hostile_http.url,
           "websocket": hostile_http.url.replace("http://", "ws://")}[kind]
    client = Client(
        url,
        era="legacy",
        bearer_token="token",
        connect=ConnectOptions(kind=kind, headers={"X-Api-Key": "sekrit"}, connect_timeout=5),
    )
    with pytest.raises((HttpStatusError, ClientError)) as info:
        await client.connect()
    await client.close()
    assert hostile_http.requests("main"), "the client never reached the server"
    assert hostile_http.requests("other") == []
    if kind == "websocket":
        assert isinstance(info.value, RedirectRefused)
        assert f"a redirect to http://localhost:{hostile_http.other_port}/mcp" in str(info.value)


# --- an answer over the stdio line limit ------------------------------------------------------

OVERSIZED = """
def on_call(message):
    size = message["params"]["arguments"].get("size", 0)
    if not size:
        return result(message, {"content": [{"type": "text", "text": "small"}]})
    text = "x" * size
    if message["params"]["arguments"].get("id_last"):
        raw('{"result": {"content": [{"type": "text", "text": "%s", "id": 1}]}, '
            '"jsonrpc": "2.0", "id": %s}\\n' % (text, json.dumps(message["id"])))
    else:
        raw('{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"type": "text", '
            '"text": "%s"}]}}\\n' % (json.dumps(message["id"]), text))
"""


@pytest.mark.parametrize("id_last", [False, True])
async def test_an_answer_over_the_line_limit_fails_its_request_at_once(
    tmp_path: Path, id_last: bool,
) -> None:
    """A 17 MiB answer on stdio (limit 16 MiB), its id first or last. It was dropped and its
    request waited out its whole timeout; now that request fails at once with
    `MessageTooLarge`, and the next request on the same pipe is answered."""
    server = RawServer(tmp_path, OVERSIZED)
    async with Client(server.command, era="legacy", timeouts=Timeouts(timeout=60)) as client:
        with anyio.fail_after(10), pytest.raises(MessageTooLarge,
                                                 match="exceeds the 16777216-byte line limit"):
            await client.call_tool("work", {"size": 17 * MIB, "id_last": id_last})
        with anyio.fail_after(5):
            small = await client.call_tool("work", {})
        assert small.content[0].text == "small"  # type: ignore[union-attr]


# --- large SSE events -------------------------------------------------------------------------


@pytest.mark.parametrize("hostile_http", ["big"], indirect=True)
async def test_a_large_sse_event_does_not_stall_the_client(hostile_http: HostileHttp) -> None:
    """A 12 MiB result in one SSE event. The SSE parser rescanned its whole buffer, byte by
    byte in Python, at every chunk: 8 MiB took 21 s of CPU with the event loop blocked
    (pings waited 8 s). Now it is linear: the client answers pings meanwhile, and a line
    that never ends fails its request at the 16 MiB limit."""
    async with Client(hostile_http.url, era="legacy", timeouts=Timeouts(timeout=60)) as client:
        worst = 0.0

        async def ping_meanwhile(done: anyio.Event) -> None:
            nonlocal worst
            while not done.is_set():
                started = anyio.current_time()
                await client.ping()
                worst = max(worst, anyio.current_time() - started)
                await anyio.sleep(0.05)

        done = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(ping_meanwhile, done)
            with anyio.fail_after(15):
                outcome = await client.call_tool("big", {"size": 12 * MIB})
            done.set()
        assert len(outcome.content[0].text) == 12 * MIB  # type: ignore[union-attr]
        assert worst < 2.0, f"a ping waited {worst:.1f} s"
        with anyio.fail_after(15), pytest.raises(MessageTooLarge, match="16777216-byte limit"):
            await client.call_tool("big", {"size": 17 * MIB, "end": False})
        with anyio.fail_after(5):
            await client.ping()


# --- the manager against a storm of list changes ----------------------------------------------

LIST_CHANGES = """
LISTS = [0]

def main():
    while True:
        line = sys.stdin.readline()
        if not line:
            return
        message = json.loads(line)
        method = message.get("method")
        if method == "initialize":
            result(message, {"protocolVersion": message["params"]["protocolVersion"],
                             "capabilities": {"tools": {"listChanged": True}},
                             "serverInfo": {"name": "storm", "version": "1"}})
        elif method == "tools/list":
            LISTS[0] += 1
            log({"lists": LISTS[0]})
            result(message, {"tools": [{"name": "t%d" % i, "inputSchema": {"type": "object"}}
                                       for i in range(200)]})
            if LISTS[0] == 1:
                change = json.dumps({"jsonrpc": "2.0",
                                     "method": "notifications/tools/list_changed"})
                raw((change + "\\n") * 5000)
                log({"storm": "sent"})
        elif "id" in message and method:
            error(message, -32601, "Method not found")
"""


async def test_a_storm_of_list_changes_costs_the_manager_a_few_refreshes(
    tmp_path: Path,
) -> None:
    """5,000 `tools/list_changed` at once. Each started a refresh of its own: 5,000 catalog
    fetches at once (5,007 tasks). Coalesced, one runs at a time, one per interval."""
    from mcpkit.manager.config import from_entry
    from mcpkit.manager.manager import ServerManager

    server = RawServer(tmp_path, LIST_CHANGES)
    config = from_entry("storm", {"command": server.command[0], "args": server.command[1:]})
    async with ServerManager([config], refresh_interval_s=0.2) as manager:
        await server.wait_for(lambda got: any(m.get("storm") for m in got), 10)
        peak_tasks = 0
        for _ in range(15):  # 1.5 s: the storm is read and refreshed by then
            peak_tasks = max(peak_tasks, len(asyncio.all_tasks()))
            await anyio.sleep(0.1)
        lists = max(m["lists"] for m in server.received() if "lists" in m)
        assert 2 <= lists <= 12, lists  # the start, then ~1 per 0.2 s at most
        assert peak_tasks < MAX_NOTIFICATION_HANDLERS + 100
        assert len(manager.servers["storm"].tools) == 200
