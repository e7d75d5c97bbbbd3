"""Hostile values INSIDE params, over every transport, on one connection each.

A message whose envelope is valid but whose params hold a number beyond a float's range,
invalid UTF-8, an escaped lone surrogate, nesting too deep, or values of the wrong type,
gets its JSON-RPC error (-32700, -32600 or -32602; a notification gets none), and the same
connection answers the next valid request: stdio (a real subprocess), Streamable HTTP (the
fixture server under uvicorn, in a legacy session and in the modern era), WebSocket and
HTTP+SSE (with a slow call in flight all along, which must still complete), and the hub's
`/mcp`. The corpus and the hypothesis strategies are in `malformed_params.py`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import anyio
import pytest
from hypothesis import HealthCheck, given, settings

from mcpkit.protocol.sse import EventParser

from .conftest import inprocess_uvicorn
from .malformed_params import (
    BAD_MEMBER_BATCH,
    CORPUS,
    INITIALIZE_IN_BATCH,
    INITIALIZE_PARAMS,
    LEGACY_VERSION,
    Case,
    check_answer,
    check_batch_replies,
    check_fuzz_answer,
    hostile_messages,
    with_id,
)
from .test_legacy_sse import SseStream, open_session
from .test_malformed import http_headers_for

FUZZ_EXAMPLES = {"stdio": 150, "http": 100, "websocket": 100, "sse": 60, "hub": 60}
"""Fuzzed messages per transport (each followed by a valid request on the same connection)."""
SLOW_CALL_S = 1.0
"""A call kept in flight on WebSocket and HTTP+SSE while the hostile messages arrive."""


Examples = list[tuple[bytes, bool]]


def draw_examples(count: int, *, utf8_only: bool = False) -> Examples:
    """`count` hostile messages from hypothesis (collected, then sent by the caller over one
    connection: a server per example would cost seconds each). Drawn before the connection
    opens: drawing takes a while, and an idle keep-alive connection may be closed."""
    samples: list[tuple[bytes, bool]] = []

    @settings(max_examples=count, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(hostile_messages(utf8_only=utf8_only))
    def collect(sample: tuple[bytes, bool]) -> None:
        samples.append(sample)

    collect()
    return samples


def ping(id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": "ping"}).encode()


def initialize(id: str = "init") -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": id, "method": "initialize", "params": INITIALIZE_PARAMS}
    ).encode()


INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
TOOLS_LIST = b'{"jsonrpc":"2.0","id":"after","method":"tools/list"}'


# --- stdio: a real subprocess on pipes ---------------------------------------------------------


@pytest.fixture(scope="module")
def stdio_session() -> Iterator[Any]:
    """The fixture server over stdio, in a 2025-03-26 session (batches allowed)."""
    import conftest

    peer = conftest.StdioPeer(conftest.CONFORMANCE_STDIO)
    try:
        peer.write(initialize() + b"\n")
        assert peer.response("init")["result"]["protocolVersion"] == LEGACY_VERSION
        peer.write(INITIALIZED + b"\n")
        yield peer
        assert peer.close() == 0
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()


def stdio_exchange(peer: Any, payload: bytes, sentinel: str) -> list[dict[str, Any]]:
    """Send `payload` then a ping; what arrived before the ping's answer."""
    peer.write(payload + b"\n" + ping(sentinel) + b"\n")
    got: list[dict[str, Any]] = []
    while True:
        message = peer.read(limit_s=10)
        if message.get("id") == sentinel and "method" not in message:
            assert message["result"] == {}
            return got
        got.append(message)


@pytest.mark.parametrize("case", CORPUS, ids=[c.label for c in CORPUS])
def test_stdio_corpus(stdio_session: Any, case: Case) -> None:
    check_answer(case, case.streamed, stdio_exchange(stdio_session, case.payload, "s"))


def test_stdio_batches(stdio_session: Any) -> None:
    peer = stdio_session
    peer.write(INITIALIZE_IN_BATCH + b"\n")
    first = json.loads(peer.read_line() or b"null")
    peer.write(BAD_MEMBER_BATCH + b"\n")
    check_batch_replies(first, json.loads(peer.read_line() or b"null"))
    # the session was not re-negotiated: still 2025-03-26, so still batching
    peer.write(b"[" + ping("again") + b"]\n")
    assert json.loads(peer.read_line() or b"null") == [
        {"jsonrpc": "2.0", "id": "again", "result": {}}]


def test_stdio_fuzz(stdio_session: Any) -> None:
    examples = draw_examples(FUZZ_EXAMPLES["stdio"])
    for i, (message, is_request) in enumerate(examples):
        payload = with_id(message, f"f{i}")
        check_fuzz_answer(payload, is_request, f"f{i}", stdio_exchange(stdio_session, payload, "s"))
    assert stdio_session.request("tools/list", {}, id="last")["result"]["tools"]
    assert stdio_session.proc.poll() is None


# --- Streamable HTTP: the fixture server under uvicorn (a subprocess) --------------------------

BASE_HEADERS = {"content-type": "application/json",
                "accept": "application/json, text/event-stream"}


class HttpPeer:
    """POSTs to one /mcp on one keep-alive client, in one legacy (2025-03-26) session."""

    def __init__(self, http: aiohttp.ClientSession, url: str, auth: dict[str, str]) -> None:
        self.http = http
        self.url = url
        self.auth = auth
        self.session_id = ""

    async def post(self, payload: bytes, headers: dict[str, str] | None = None
                   ) -> tuple[int, list[Any]]:
        sent = {**BASE_HEADERS, **self.auth, **(headers or {})}
        if self.session_id:
            sent.setdefault("mcp-session-id", self.session_id)
            sent.setdefault("mcp-protocol-version", LEGACY_VERSION)
        async with self.http.post(self.url, data=payload, headers=sent) as response:
            body = await response.read()
            if response.headers.get("mcp-session-id"):
                self.session_id = response.headers["mcp-session-id"]
            if response.content_type == "text/event-stream":
                events = EventParser().feed(body)
                return response.status, [json.loads(e.data) for e in events if e.data]
            return response.status, ([json.loads(body)] if body else [])

    async def open(self) -> None:
        status, got = await self.post(initialize())
        assert status == 200 and got[-1]["result"]["protocolVersion"] == LEGACY_VERSION, got
        status, _ = await self.post(INITIALIZED)
        assert status == 202

    async def assert_alive(self) -> None:
        """The session answers tools/list, and a modern request is answered too."""
        status, got = await self.post(TOOLS_LIST)
        assert status == 200 and got[-1]["id"] == "after" and "result" in got[-1], got

    async def case(self, case: Case) -> None:
        status, got = await self.post(case.payload, dict(case.http_headers))
        expect = case.http
        if expect is None:
            assert (status, got) == (202, []), (case.label, status, got)
        else:
            assert status == expect.status, (case.label, status, got)
            check_answer(case, expect, got)
        await self.assert_alive()

    async def batches(self) -> None:
        status, first = await self.post(INITIALIZE_IN_BATCH)
        assert status == 200
        status, second = await self.post(BAD_MEMBER_BATCH)
        assert status == 200
        check_batch_replies(first[0], second[0])

    async def fuzz(self, examples: Examples) -> None:
        for i, (message, is_request) in enumerate(examples):
            payload = with_id(message, f"f{i}")
            headers = fuzz_headers(payload)
            status, got = await self.post(payload, headers)
            assert status in (200, 202, 400, 404), (payload[:300], status, got)
            if not is_request:
                # never answered; over HTTP refused (400, an error without id) if undecodable
                assert status in (202, 400), (payload[:300], status, got)
                assert got == [] if status == 202 else got[0]["id"] is None, got
            else:
                check_fuzz_answer(payload, True, f"f{i}", got)
            await self.assert_alive()


def fuzz_headers(payload: bytes) -> dict[str, str]:
    """The Mcp-* headers a client would send with a fuzzed message, as far as Python's json
    can read it (none where it reads a lone surrogate no header can carry)."""
    try:
        return {k: v for k, v in http_headers_for(payload).items() if k.startswith("mcp-")}
    except UnicodeEncodeError:
        return {}


@asynccontextmanager
async def http_peer(url: str, auth: dict[str, str] | None = None) -> AsyncIterator[HttpPeer]:
    timeout = aiohttp.ClientTimeout(total=30)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        peer = HttpPeer(http, url, auth or {})
        await peer.open()
        yield peer


@pytest.mark.anyio
async def test_http_corpus_batches_and_fuzz(http_server: Any) -> None:
    examples = draw_examples(FUZZ_EXAMPLES["http"])
    async with http_peer(http_server.url) as peer:
        with anyio.fail_after(120):
            for case in CORPUS:
                await peer.case(case)
            await peer.batches()
            await peer.fuzz(examples)
            await peer.assert_alive()


# --- WebSocket and HTTP+SSE: the fixture server's app under uvicorn in this process ------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def slow_call(id: str) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "slow_compute", "arguments": {"seconds": SLOW_CALL_S}}}).encode()


class StreamPeer:
    """A connection that carries messages both ways (WebSocket, or an HTTP+SSE session):
    answers are matched to what was sent by the ping that follows each message."""

    def __init__(self) -> None:
        self.held: list[dict[str, Any]] = []  # answers to the slow call, kept for the end
        self.count = 0

    async def send(self, payload: bytes) -> None:
        raise NotImplementedError

    async def receive(self) -> Any:
        raise NotImplementedError

    async def exchange(self, payload: bytes) -> list[dict[str, Any]]:
        self.count += 1
        sentinel = f"sentinel-{self.count}"
        await self.send(payload)
        await self.send(ping(sentinel))
        got: list[dict[str, Any]] = []
        while True:
            message = await self.receive()
            if message.get("id") == sentinel and "method" not in message:
                assert message["result"] == {}
                return got
            if message.get("id") == "slow" or "method" in message:
                self.held.append(message)  # the slow call's answer, its progress…
            else:
                got.append(message)

    async def batch(self, payload: bytes) -> Any:
        """A batch's reply (an array; other messages meanwhile are held)."""
        await self.send(payload)
        while not isinstance(message := await self.receive(), list):
            self.held.append(message)
        return message

    async def start(self) -> None:
        await self.send(initialize())
        init = await self.receive()
        assert init["id"] == "init" and init["result"]["protocolVersion"] == LEGACY_VERSION
        await self.send(INITIALIZED)
        await self.send(slow_call("slow"))

    async def run_all(self, examples: Examples, *, utf8_only: bool) -> None:
        for case in CORPUS:
            if utf8_only and not case.utf8:
                continue
            self.check_case(case, await self.exchange(case.payload))
        check_batch_replies(await self.batch(INITIALIZE_IN_BATCH),
                            await self.batch(BAD_MEMBER_BATCH))
        for i, (message, is_request) in enumerate(examples):
            payload = with_id(message, f"f{i}")
            got = await self.exchange(payload)
            check_fuzz_answer(payload, is_request, f"f{i}", got, refusal=self.take_refusal())

    def check_case(self, case: Case, got: list[dict[str, Any]]) -> None:
        check_answer(case, case.streamed, got)

    def take_refusal(self) -> dict[str, Any] | None:
        """The error a POST was refused with (HTTP+SSE), if any."""
        return None

    async def finish(self) -> None:
        """The slow call, in flight all along, completes on the same connection."""
        while not any(m.get("id") == "slow" for m in self.held):
            self.held.append(await self.receive())
        answer = next(m for m in self.held if m.get("id") == "slow")
        assert "Computed" in answer["result"]["content"][0]["text"], answer
        await self.send(TOOLS_LIST)
        while (message := await self.receive()).get("id") != "after":
            pass
        assert message["result"]["tools"]


class WebSocketPeer(StreamPeer):
    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        super().__init__()
        self.ws = ws

    async def send(self, payload: bytes) -> None:
        await self.ws.send_str(payload.decode("utf-8"))

    async def receive(self) -> Any:
        with anyio.fail_after(10):
            frame = await self.ws.receive()
        assert frame.type == aiohttp.WSMsgType.TEXT, (frame, self.ws.close_code)
        return json.loads(frame.data)


class SsePeer(StreamPeer):
    def __init__(self, http: aiohttp.ClientSession, stream: SseStream, url: str) -> None:
        super().__init__()
        self.http = http
        self.stream = stream
        self.url = url
        self.statuses: list[int] = []
        self.refusals: list[dict[str, Any]] = []

    async def send(self, payload: bytes) -> None:
        async with self.http.post(self.url, data=payload,
                                  headers={"content-type": "application/json"}) as response:
            body = await response.read()
            self.statuses.append(response.status)
            assert response.status in (202, 400), response.status
            if response.status == 400:
                self.refusals.append(json.loads(body))

    def take_refusal(self) -> dict[str, Any] | None:
        return self.refusals.pop(0) if self.refusals else None

    def check_case(self, case: Case, got: list[dict[str, Any]]) -> None:
        """A message that does not decode is refused on its POST (400 with the error), a
        notification's with id null; everything else is answered on the stream."""
        refusal = self.take_refusal()
        if refusal is None:
            check_answer(case, case.streamed, got)
        elif case.streamed is None:
            assert case.http is not None and got == [], (case.label, got)
            assert refusal["id"] is None and refusal["error"]["code"] == case.http.code
        else:
            check_answer(case, case.streamed, [refusal, *got])

    async def receive(self) -> Any:
        event = await self.stream.next_event()
        assert event.event == "message", event
        return json.loads(event.data)


@pytest.mark.anyio
async def test_websocket_one_connection_survives_everything() -> None:
    """Invalid UTF-8 cannot travel in a WebSocket text frame (the protocol forbids it), so
    those cases are left out here; everything else goes over one socket."""
    examples = draw_examples(FUZZ_EXAMPLES["websocket"], utf8_only=True)
    async with inprocess_uvicorn() as base:
        ws_url = base.replace("http://", "ws://") + "/prefix/mcp"
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as http, \
                http.ws_connect(ws_url, protocols=["mcp"]) as ws:
            peer = WebSocketPeer(ws)
            with anyio.fail_after(120):
                await peer.start()
                await peer.run_all(examples, utf8_only=True)
                await peer.finish()
            assert not ws.closed


@pytest.mark.anyio
async def test_http_sse_one_session_survives_everything() -> None:
    examples = draw_examples(FUZZ_EXAMPLES["sse"])
    async with inprocess_uvicorn() as base:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=120)) as http, \
                open_session(http, base, "/prefix/sse") as (stream, endpoint):
            peer = SsePeer(http, stream, base + endpoint)
            with anyio.fail_after(120):
                await peer.start()
                await peer.run_all(examples, utf8_only=False)
                await peer.finish()
            # an undecodable message is refused on its POST (400), never by ending the session
            assert 400 in peer.statuses


# --- the hub's /mcp -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from tests.hub.router.support import router_hub

    database = tmp_path_factory.mktemp("hostile") / "hub.db"
    # one user sends a few hundred requests here: a budget the rate limit does not cut short
    with router_hub(f"sqlite+aiosqlite:///{database}", rate_limit_per_minute=60_000,
                    rate_limit_burst=1000) as running:
        yield running


HUB_CASES = [c for c in CORPUS if c.http is None or (c.http.code in (-32700, -32602)
             and c.http.status == 400)]
"""The cases the hub answers as the fixture server does (the rest name fixture tools)."""


@pytest.mark.anyio
async def test_hub_mcp_corpus_batches_and_fuzz(hub: Any) -> None:
    from tests.hub.hub_helpers import fresh_user

    examples = draw_examples(FUZZ_EXAMPLES["hub"])
    _user, api = await fresh_user(hub)
    async with http_peer(f"{hub.url}/mcp", {"authorization": f"Bearer {api.token}"}) as peer:
        with anyio.fail_after(120):
            for case in HUB_CASES:
                await peer.case(case)
            await peer.batches()
            await peer.fuzz(examples)
            await peer.assert_alive()


def test_corpus_size() -> None:
    """The corpus covers every class the issue names (kept honest as it grows)."""
    labels = " ".join(c.label for c in CORPUS)
    for word in ("1e400", "UTF-8", "surrogate", "requestId an array", "requestId an object",
                 "nesting", "NUL", "5000 digits"):
        assert word in labels, word
    assert len(CORPUS) >= 30
    assert sum(c.streamed is None for c in CORPUS) >= 6  # notifications


# --- a malformed answer to the server's own request ---------------------------------------------

ELICITING_INIT = json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
    **INITIALIZE_PARAMS, "capabilities": {"elicitation": {}}}}).encode()
ELICIT_CALL = json.dumps({"jsonrpc": "2.0", "id": "ask", "method": "tools/call", "params": {
    "name": "test_elicitation", "arguments": {"message": "who?"}}}).encode()


def undecodable_answer(request_id: Any) -> bytes:
    """An error response whose data cannot be decoded (1e400)."""
    return (b'{"jsonrpc":"2.0","id":' + json.dumps(request_id).encode()
            + b',"error":{"code":-1,"message":"x","data":[1e400]}}')


def check_failed_at_once(answer: dict[str, Any]) -> None:
    """The call whose elicitation got an undecodable answer ends now (not after the 300 s a
    server request waits), with an error that says so."""
    assert answer["id"] == "ask", answer
    text = json.dumps(answer)
    assert "error" in answer or answer["result"].get("isError") is True, answer
    assert "undecodable" in text, answer


def test_stdio_undecodable_answer_fails_the_servers_request(stdio_peer: Any) -> None:
    peer = stdio_peer()
    peer.write(ELICITING_INIT + b"\n")
    assert peer.response("init")["result"]
    peer.write(INITIALIZED + b"\n" + ELICIT_CALL + b"\n")
    elicit = peer.read(limit_s=10)
    assert elicit["method"] == "elicitation/create", elicit
    peer.write(undecodable_answer(elicit["id"]) + b"\n")
    check_failed_at_once(peer.response("ask", limit_s=10))


@pytest.mark.anyio
async def test_http_undecodable_answer_fails_the_servers_request(http_server: Any) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        async with http.post(http_server.url, data=ELICITING_INIT, headers=BASE_HEADERS) as r:
            await r.read()
            session = {**BASE_HEADERS, "mcp-session-id": r.headers["mcp-session-id"],
                       "mcp-protocol-version": LEGACY_VERSION}
        async with http.post(http_server.url, data=INITIALIZED, headers=session) as r:
            assert r.status == 202
        async with http.post(http_server.url, data=ELICIT_CALL, headers=session) as call:
            parser, pending = EventParser(), []

            async def next_message() -> dict[str, Any]:
                with anyio.fail_after(10):
                    while not (events := [e for e in pending if e.data]):
                        pending.extend(parser.feed(await call.content.readany()))
                    pending.remove(events[0])
                    message: dict[str, Any] = json.loads(events[0].data)
                    return message

            elicit = await next_message()
            assert elicit["method"] == "elicitation/create", elicit
            async with http.post(http_server.url, data=undecodable_answer(elicit["id"]),
                                 headers=session) as refused:
                assert refused.status == 400
                assert (await refused.json())["error"]["code"] == -32700
            check_failed_at_once(await next_message())
