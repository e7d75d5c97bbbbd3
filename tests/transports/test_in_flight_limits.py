"""Issue 20 §2/§3, round two: one connection cannot start unboundedly many requests.

20,000 slow `tools/call` written at once used to become 20,000 tasks (+136 MiB on stdio,
every other request of the process waiting behind them). Now a connection runs at most
`max_requests_in_flight` (256) and the rest are answered -32000 at once; another client is
served meanwhile, and the flooding connection is served again once its calls finish.
Over real processes: a stdio subprocess and a uvicorn server with WebSocket clients."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from tests.memory_bounds import MIB, rss_bytes
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit.server.admission import DEFAULT_MAX_BATCH_MEMBERS, DEFAULT_MAX_REQUESTS_IN_FLIGHT

ROOT = Path(__file__).resolve().parents[2]
SLOW_SERVER = ROOT / "tests" / "transports" / "slow_server.py"
FLOOD = 20_000
RSS_GROWTH_BOUND = 40 * MIB  # the unbounded code grew by ~136 MiB under this flood
SERVER_BUSY = -32000


def _call(request_id: int, seconds: float) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": seconds}}}


def _initialize(version: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "flood", "version": "1"}}}


class _StdioPeer:
    """The slow server on real pipes; a thread files every answer by id."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(SLOW_SERVER), *args], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env={**os.environ}, cwd=ROOT)
        self.answers: dict[Any, dict[str, Any]] = {}
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            message = json.loads(line)
            with self.lock:  # a batch's answer is filed member by member
                for member in message if isinstance(message, list) else [message]:
                    self.answers[json.dumps(member.get("id"))] = member

    def write(self, *messages: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        self.proc.stdin.flush()

    def wait_for(self, request_id: Any, limit_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + limit_s
        key = json.dumps(request_id)
        while time.monotonic() < deadline:
            with self.lock:
                if key in self.answers:
                    return self.answers[key]
            time.sleep(0.02)
        raise AssertionError(f"no answer to {request_id!r} within {limit_s} s")

    def count(self) -> int:
        with self.lock:
            return len(self.answers)


@contextlib.contextmanager
def _stdio_peer(*args: str) -> Iterator[_StdioPeer]:
    peer = _StdioPeer(*args)
    try:
        yield peer
    finally:
        stop_process(peer.proc)
        for pipe in (peer.proc.stdin, peer.proc.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def slow_peer() -> Iterator[_StdioPeer]:
    with _stdio_peer() as peer:
        yield peer


HELD_CALLS = 24
HELD_ITEMS = 262_144  # `"a",` x 262,144: 1 MiB of JSON, ~15 MiB once decoded, per call
BYTES_BUDGET = 64_000_000  # two such calls' estimated footprint (~28 MB each) fit
HELD_GROWTH_BOUND = 80 * MIB  # holding all 24 at once grew the server by ~360 MiB


def test_stdio_calls_holding_large_params_are_bounded_in_bytes() -> None:
    """Counts alone let 24 slow calls hold 24 x ~15 MiB of decoded params; the byte budget
    (server/admission.py) runs only what fits and answers the rest -32000 naming it."""
    with _stdio_peer("--max-request-bytes-per-client", str(BYTES_BUDGET)) as peer:
        peer.write(_initialize("2025-06-18"))
        peer.wait_for(0, 15)
        peer.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
        before = rss_bytes(peer.proc.pid)
        items = ["a"] * HELD_ITEMS
        peer.write(*({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "hold", "arguments": {"items": items, "seconds": 3.0}}}
            for i in range(1, HELD_CALLS + 1)))
        peak = before
        deadline = time.monotonic() + 60
        while peer.count() < HELD_CALLS + 1 and time.monotonic() < deadline:
            peak = max(peak, rss_bytes(peer.proc.pid))
            time.sleep(0.05)
        answers = [peer.wait_for(i, 1) for i in range(1, HELD_CALLS + 1)]
        done = [a for a in answers if "result" in a]
        busy = [a for a in answers if a.get("error", {}).get("code") == SERVER_BUSY]
        assert len(done) + len(busy) == HELD_CALLS
        assert done and busy
        assert all(a["result"]["content"][0]["text"] == f"held {HELD_ITEMS}" for a in done)
        assert busy[0]["error"]["data"] == {"limit": BYTES_BUDGET}
        assert "bytes of params" in busy[0]["error"]["message"]
        assert peak - before < HELD_GROWTH_BOUND, f"RSS grew {(peak - before) / MIB:.0f} MiB"


def test_stdio_flood_of_slow_calls_is_refused_past_the_limit(slow_peer: _StdioPeer) -> None:
    peer = slow_peer
    peer.write(_initialize("2025-06-18"))
    peer.wait_for(0, 15)
    peer.write({"jsonrpc": "2.0", "method": "notifications/initialized"})
    before = rss_bytes(peer.proc.pid)
    # each call sleeps long enough that the server has read the whole flood before the first
    # ones finish, even on a loaded machine (at 2 s, a run beside other jobs once read so
    # slowly that calls finished as fast as new ones came in, and none was refused)
    peer.write(*(_call(i, 6.0) for i in range(1, FLOOD + 1)))
    deadline = time.monotonic() + 60
    peak = before
    while peer.count() < FLOOD + 1 and time.monotonic() < deadline:
        peak = max(peak, rss_bytes(peer.proc.pid))
        time.sleep(0.05)
    answers = [peer.answers[json.dumps(i)] for i in range(1, FLOOD + 1)]
    done = [a for a in answers if a.get("result")]
    busy = [a for a in answers if a.get("error", {}).get("code") == SERVER_BUSY]
    assert len(done) + len(busy) == FLOOD  # every call completed or got the precise error
    assert 0 < len(done) <= DEFAULT_MAX_REQUESTS_IN_FLIGHT
    assert busy[0]["error"]["data"] == {"limit": DEFAULT_MAX_REQUESTS_IN_FLIGHT}
    assert "256 requests in flight" in busy[0]["error"]["message"]
    assert peak - before < RSS_GROWTH_BOUND, f"RSS grew {(peak - before) / MIB:.0f} MiB"
    # the connection is served again once its calls have finished
    peer.write({"jsonrpc": "2.0", "id": "after", "method": "ping"})
    assert peer.wait_for("after", 5)["result"] == {}


def test_stdio_cancel_read_with_its_request_is_kept(slow_peer: _StdioPeer) -> None:
    """The cancellation is handled at once, before the request's task has started."""
    peer = slow_peer
    peer.write(_initialize("2025-06-18"))
    peer.wait_for(0, 15)
    peer.write(_call(1, 1.0), {"jsonrpc": "2.0", "method": "notifications/cancelled",
                               "params": {"requestId": 1}},
               {"jsonrpc": "2.0", "id": 2, "method": "ping"})
    assert peer.wait_for(2, 5)["result"] == {}
    time.sleep(1.5)  # the call would have been answered by now
    assert peer.count() == 2  # initialize and the ping: nothing for the cancelled call


def test_stdio_batch_over_the_member_limit_is_refused(slow_peer: _StdioPeer) -> None:
    peer = slow_peer
    peer.write(_initialize("2025-03-26"))
    peer.wait_for(0, 15)
    assert peer.proc.stdin is not None

    def batch(first: int, size: int) -> None:
        members = [{"jsonrpc": "2.0", "id": first + i, "method": "ping"} for i in range(size)]
        peer.proc.stdin.write(json.dumps(members).encode() + b"\n")  # type: ignore[union-attr]
        peer.proc.stdin.flush()  # type: ignore[union-attr]

    batch(1000, DEFAULT_MAX_BATCH_MEMBERS + 1)
    refused = peer.wait_for(None, 5)
    assert refused["error"]["code"] == -32600
    assert f"exceeds the limit of {DEFAULT_MAX_BATCH_MEMBERS}" in refused["error"]["message"]
    batch(5000, DEFAULT_MAX_BATCH_MEMBERS)  # a batch at the limit runs whole
    peer.wait_for(5000, 5)
    assert all(peer.wait_for(5000 + i, 5)["result"] == {}
               for i in range(DEFAULT_MAX_BATCH_MEMBERS))


@pytest.fixture
def http_server() -> Any:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SLOW_SERVER), "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ}, cwd=ROOT)
    try:
        wait_for_port(proc, port)
        yield proc, f"http://127.0.0.1:{port}/ws"
    finally:
        stop_process(proc)


async def _open_ws(http: aiohttp.ClientSession, url: str) -> aiohttp.ClientWebSocketResponse:
    ws = await http.ws_connect(url, protocols=("mcp",), max_msg_size=0)
    await ws.send_str(json.dumps(_initialize("2025-06-18")))
    assert json.loads(await ws.receive_str())["id"] == 0
    return ws


@pytest.mark.anyio
async def test_websocket_flood_does_not_starve_another_client(http_server: Any) -> None:
    proc, url = http_server
    async with aiohttp.ClientSession() as http:
        hog = await _open_ws(http, url)
        other = await _open_ws(http, url)
        before = rss_bytes(proc.pid)
        answers: dict[Any, dict[str, Any]] = {}

        async def read_hog() -> None:
            while len(answers) < FLOOD:
                message = json.loads(await hog.receive_str())
                answers[message["id"]] = message

        async with anyio.create_task_group() as tg:
            tg.start_soon(read_hog)
            for start in range(1, FLOOD + 1, 1000):
                for i in range(start, start + 1000):
                    await hog.send_str(json.dumps(_call(i, 3.0)))
            # while the hog's calls are running, the other client is answered
            started = time.monotonic()
            await other.send_str(json.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping"}))
            with anyio.fail_after(5):
                assert json.loads(await other.receive_str())["id"] == "p"
            latency = time.monotonic() - started
            peak = rss_bytes(proc.pid)
            with anyio.fail_after(60):
                while len(answers) < FLOOD:  # noqa: ASYNC110 (read_hog fills it)
                    await anyio.sleep(0.05)
        busy = [a for a in answers.values() if a.get("error", {}).get("code") == SERVER_BUSY]
        done = [a for a in answers.values() if a.get("result")]
        assert len(busy) + len(done) == FLOOD
        assert len(done) <= DEFAULT_MAX_REQUESTS_IN_FLIGHT
        assert peak - before < RSS_GROWTH_BOUND, f"RSS grew {(peak - before) / MIB:.0f} MiB"
        print(f"ping during the flood: {latency * 1000:.0f} ms; RSS +{(peak - before) / MIB:.1f}"
              " MiB")
        await hog.close()
        await other.close()


MODERN = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN,
               "io.modelcontextprotocol/clientCapabilities": {}}
PER_CALLER = 40


@pytest.fixture
def http_server_small() -> Any:
    """The slow server over HTTP with a small per-caller cap (and room for the flood)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(SLOW_SERVER), "--transport", "http", "--port", str(port),
         "--max-requests-per-client", str(PER_CALLER), "--max-connections", "400"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ}, cwd=ROOT)
    try:
        wait_for_port(proc, port)
        yield proc, f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(proc)


async def _modern_post(http: aiohttp.ClientSession, url: str, principal: str,
                       body: dict[str, Any], method: str) -> tuple[int, dict[str, Any]]:
    headers = {"accept": "application/json, text/event-stream",
               "content-type": "application/json", "mcp-protocol-version": MODERN,
               "mcp-method": method, "x-test-principal": principal}
    if method == "tools/call":
        headers["mcp-name"] = body["params"]["name"]
    async with http.post(url, json=body, headers=headers) as resp:
        return resp.status, dict(await resp.json(content_type=None))


@pytest.mark.anyio
async def test_one_caller_cannot_hold_every_http_request(http_server_small: Any) -> None:
    """Modern requests (each its own HTTP request) of one principal are capped together;
    another principal is served while the first one's slow calls run."""
    proc, url = http_server_small
    flood = 3 * PER_CALLER
    outcomes: list[tuple[int, dict[str, Any]]] = []
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as hog, \
            aiohttp.ClientSession() as other:

        async def slow_call(i: int) -> None:
            call = _call(i, 3.0)
            call["params"]["_meta"] = MODERN_META
            outcomes.append(await _modern_post(hog, url, "hog", call, "tools/call"))

        async with anyio.create_task_group() as tg:
            for i in range(flood):
                tg.start_soon(slow_call, i)
            with anyio.fail_after(5):  # the refusals come at once, the admitted calls run
                while len(outcomes) < flood - PER_CALLER:  # noqa: ASYNC110
                    await anyio.sleep(0.02)
            listing = {"jsonrpc": "2.0", "id": "l", "method": "tools/list",
                       "params": {"_meta": MODERN_META}}
            with anyio.fail_after(5):
                status, answer = await _modern_post(other, url, "other", listing, "tools/list")
            assert status == 200 and answer["result"]["tools"][0]["name"] == "slow"
    refused = [a for s, a in outcomes if s == 429]
    done = [a for s, a in outcomes if s == 200 and "result" in a]
    assert len(done) == PER_CALLER and len(refused) == flood - PER_CALLER
    assert refused[0]["error"]["code"] == SERVER_BUSY
    assert refused[0]["error"]["data"] == {"limit": PER_CALLER}
    assert "over all its connections" in refused[0]["error"]["message"]
    assert proc.poll() is None


def test_subscriptions_per_session_are_bounded(stdio_peer: Any) -> None:
    """20,000 `resources/subscribe` of distinct 2,000-character URIs used to keep every one
    for the session's life (+42 MiB; 10 KB URIs: +194 MiB). Now a session keeps 128."""
    peer = stdio_peer()
    init = _initialize("2025-06-18")
    assert "result" in peer.request("initialize", init["params"], id=0)
    before = rss_bytes(peer.proc.pid)
    pad = "x" * 2000
    codes: dict[Any, int] = {}
    for start in range(0, FLOOD, 500):
        for i in range(start, start + 500):
            peer.send({"jsonrpc": "2.0", "id": i, "method": "resources/subscribe",
                       "params": {"uri": f"test://{i}/{pad}"}})
        for i in range(start, start + 500):
            answer = peer.response(i)
            code = answer.get("error", {}).get("code", "ok")
            codes[code] = codes.get(code, 0) + 1
            if code != "ok" and codes[code] == 1:
                assert answer["error"]["data"] == {"limit": 128}
                assert "subscribed to 128 resources" in answer["error"]["message"]
    assert codes == {"ok": 128, -32602: FLOOD - 128}
    assert rss_bytes(peer.proc.pid) - before < 16 * MIB
    too_long = peer.request("resources/subscribe", {"uri": "test://" + "y" * 3000})
    assert too_long["error"]["code"] == -32602 and "2048" in too_long["error"]["message"]
    # a slot freed by unsubscribing is usable again; a repeated subscription costs none
    assert "result" in peer.request("resources/unsubscribe", {"uri": f"test://0/{pad}"})
    assert "result" in peer.request("resources/subscribe", {"uri": "test://new"})
    assert "result" in peer.request("resources/subscribe", {"uri": "test://new"})
