"""A corpus of malformed messages, run over real stdio and HTTP servers.

Every request gets exactly the answer the spec gives it (JSON-RPC code, and over HTTP the
status), notifications and stray responses get no answer (202 over HTTP), and the server
neither crashes nor hangs: it still answers a valid request afterwards, within bounded
waits. Random JSON-ish bytes from hypothesis must be answered with a well-formed error (or
nothing, when they happen to decode as a notification or response).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcpkit.protocol import headers as mcp_headers
from mcpkit.protocol.sse import EventParser

VERSION = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
}


@dataclass(frozen=True)
class Expect:
    code: int
    id: Any = None
    status: int = 400  # over HTTP


NO_ANSWER = None
PARSE = Expect(-32700)
INVALID = Expect(-32600)


def req(method: Any, params: Any = ..., id: Any = 1, **extra: Any) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method, **extra}
    if params is not ...:
        message["params"] = params
    return json.dumps(message).encode()


def modern(method: str, id: Any = 1, **params: Any) -> bytes:
    return req(method, {**params, "_meta": META}, id=id)


def nested(depth: int) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":'
        + b"[" * depth
        + b"]" * depth
        + b"}}"
    )


# (label, payload, stdio expectation, http expectation)
CORPUS: list[tuple[str, bytes, Expect | None, Expect | None]] = [
    # not JSON at all
    ("truncated object", b'{"jsonrpc":"2.0","id":1,"method":"ping"', PARSE, PARSE),
    ("lone brace", b"{", PARSE, PARSE),
    ("garbage", b"hello world", PARSE, PARSE),
    ("single quotes", b"{'jsonrpc':'2.0'}", PARSE, PARSE),
    ("trailing comma", b'{"jsonrpc":"2.0","id":1,"method":"ping",}', PARSE, PARSE),
    ("non-UTF-8", b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', PARSE, PARSE),
    ("NaN id", b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', PARSE, PARSE),
    ("two objects", b'{"jsonrpc":"2.0","id":1,"method":"ping"}{}', PARSE, PARSE),
    ("empty body", b"", None, PARSE),  # a blank line is skipped on stdio
    # JSON, but not a message
    ("number", b"1", INVALID, INVALID),
    ("string", b'"ping"', INVALID, INVALID),
    ("null", b"null", INVALID, INVALID),
    ("empty array", b"[]", INVALID, INVALID),
    ("empty object", b"{}", INVALID, INVALID),
    # envelope errors
    ("jsonrpc 1.0", req("ping", jsonrpc="1.0"), Expect(-32600, 1), Expect(-32600, 1)),
    ("jsonrpc missing", b'{"id":2,"method":"ping"}', Expect(-32600, 2), Expect(-32600, 2)),
    (
        "jsonrpc number",
        b'{"jsonrpc":2.0,"id":3,"method":"ping"}',
        Expect(-32600, 3),
        Expect(-32600, 3),
    ),
    ("id null", req("ping", id=None), INVALID, INVALID),
    ("id float", req("ping", id=1.5), INVALID, INVALID),
    ("id bool", req("ping", id=True), INVALID, INVALID),
    ("id object", req("ping", id={"a": 1}), INVALID, INVALID),
    ("id array", req("ping", id=[1]), INVALID, INVALID),
    ("method number", req(5, id=4), Expect(-32600, 4), Expect(-32600, 4)),
    ("method null", req(None, id=5), Expect(-32600, 5), Expect(-32600, 5)),
    ("method empty", req("", id=6), Expect(-32600, 6), Expect(-32600, 6)),
    ("params array", req("tools/list", [1, 2], id=7), Expect(-32600, 7), Expect(-32600, 7)),
    ("params string", req("tools/list", "x", id=8), Expect(-32600, 8), Expect(-32600, 8)),
    (
        "params number",
        modern("tools/list", id=9).replace(b'"params": {', b'"params": 3, "x": {'),
        Expect(-32600, 9),
        Expect(-32600, 9),
    ),
    (
        "result and error",
        b'{"jsonrpc":"2.0","id":9,"result":{},"error":{"code":1,"message":"x"}}',
        Expect(-32600, 9),
        Expect(-32600, 9),
    ),
    (
        "error without code",
        b'{"jsonrpc":"2.0","id":10,"error":{"message":"x"}}',
        Expect(-32600, 10),
        Expect(-32600, 10),
    ),
    ("deep nesting", nested(5000), None, None),  # filled in below
    # unknown methods
    (
        "unknown modern method",
        modern("no/such/method", id=11),
        Expect(-32601, 11),
        Expect(-32601, 11, 404),
    ),
    (
        "legacy-only method in modern era",
        modern("logging/setLevel", id=12, level="info"),
        Expect(-32601, 12),
        Expect(-32601, 12, 404),
    ),
    # modern _meta problems
    ("no _meta, no session", req("tools/list", {}, id=13), Expect(-32602, 13), None),
    (
        "_meta without capabilities",
        req("tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": VERSION}}, id=14),
        Expect(-32602, 14),
        Expect(-32602, 14),
    ),
    (
        "unsupported version",
        req(
            "tools/list",
            {"_meta": {**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
            id=15,
        ),
        Expect(-32022, 15),
        None,
    ),
    (
        "bad log level",
        req("tools/list", {"_meta": {**META, "io.modelcontextprotocol/logLevel": "x"}}, id=16),
        Expect(-32602, 16),
        Expect(-32602, 16),
    ),
    # bad params for every method
    (
        "tools/list cursor number",
        modern("tools/list", id=20, cursor=5),
        Expect(-32602, 20),
        Expect(-32602, 20),
    ),
    (
        "tools/list cursor garbage",
        modern("tools/list", id=21, cursor="@@"),
        Expect(-32602, 21),
        Expect(-32602, 21),
    ),
    (
        "tools/call name missing",
        modern("tools/call", id=22),
        Expect(-32602, 22),
        Expect(-32020, 22),
    ),
    (
        "tools/call name number",
        modern("tools/call", id=23, name=5),
        Expect(-32602, 23),
        Expect(-32020, 23),
    ),
    (
        "tools/call unknown tool",
        modern("tools/call", id=24, name="nope"),
        Expect(-32602, 24),
        Expect(-32602, 24),
    ),
    (
        "tools/call arguments array",
        modern("tools/call", id=25, name="test_simple_text", arguments=[1]),
        Expect(-32602, 25),
        Expect(-32602, 25),
    ),
    (
        "resources/list cursor",
        modern("resources/list", id=26, cursor=[]),
        Expect(-32602, 26),
        Expect(-32602, 26),
    ),
    (
        "resources/templates/list cursor",
        modern("resources/templates/list", id=27, cursor="x"),
        Expect(-32602, 27),
        Expect(-32602, 27),
    ),
    (
        "resources/read uri missing",
        modern("resources/read", id=28),
        Expect(-32602, 28),
        Expect(-32020, 28),
    ),
    (
        "resources/read unknown uri",
        modern("resources/read", id=29, uri="test://nope"),
        Expect(-32602, 29),
        Expect(-32602, 29),
    ),
    (
        "prompts/list cursor",
        modern("prompts/list", id=30, cursor=1.5),
        Expect(-32602, 30),
        Expect(-32602, 30),
    ),
    (
        "prompts/get name missing",
        modern("prompts/get", id=31),
        Expect(-32602, 31),
        Expect(-32020, 31),
    ),
    (
        "prompts/get unknown",
        modern("prompts/get", id=32, name="nope"),
        Expect(-32602, 32),
        Expect(-32602, 32),
    ),
    (
        "prompts/get missing argument",
        modern("prompts/get", id=33, name="test_prompt_with_arguments", arguments={"arg1": "a"}),
        Expect(-32602, 33),
        Expect(-32602, 33),
    ),
    (
        "prompts/get arguments array",
        modern("prompts/get", id=34, name="test_prompt_with_arguments", arguments=["a"]),
        Expect(-32602, 34),
        Expect(-32602, 34),
    ),
    (
        "completion ref missing",
        modern("completion/complete", id=35),
        Expect(-32602, 35),
        Expect(-32602, 35),
    ),
    (
        "completion bad ref type",
        modern(
            "completion/complete", id=36, ref={"type": "ref/x"}, argument={"name": "a", "value": ""}
        ),
        Expect(-32602, 36),
        Expect(-32602, 36),
    ),
    (
        "completion argument number",
        modern(
            "completion/complete",
            id=37,
            ref={"type": "ref/prompt", "name": "test_prompt_with_arguments"},
            argument={"name": 1, "value": ""},
        ),
        Expect(-32602, 37),
        Expect(-32602, 37),
    ),
    (
        "listen filter string",
        modern("subscriptions/listen", id=38, notifications="all"),
        Expect(-32602, 38),
        Expect(-32602, 38),
    ),
    (
        "tampered requestState",
        modern(
            "tools/call",
            id=39,
            name="test_input_required_result_elicitation",
            requestState="abc.def",
        ),
        Expect(-32602, 39),
        Expect(-32602, 39),
    ),
    # notifications and stray responses: no answer
    (
        "unknown notification",
        b'{"jsonrpc":"2.0","method":"notifications/whatever"}',
        NO_ANSWER,
        NO_ANSWER,
    ),
    (
        "cancel unknown",
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"nope"}}',
        NO_ANSWER,
        NO_ANSWER,
    ),
    (
        "cancel bad params",
        b'{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}',
        NO_ANSWER,
        NO_ANSWER,
    ),
    ("response to unknown id", b'{"jsonrpc":"2.0","id":"zz","result":{}}', NO_ANSWER, NO_ANSWER),
    (
        "error response, id null",
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-1,"message":"x"}}',
        NO_ANSWER,
        NO_ANSWER,
    ),
    (
        "notification with array params",
        b'{"jsonrpc":"2.0","method":"x","params":[1]}',
        INVALID,
        INVALID,
    ),
]

# Deep nesting: msgspec refuses over-deep input as a parse error; either way it is answered.
for _i, _item in enumerate(CORPUS):
    if _item[0] == "deep nesting":
        CORPUS[_i] = (_item[0], _item[1], Expect(-32700), Expect(-32700))

# Invalid params found by a method's handler (past the transport's checks) are an ordinary
# JSON-RPC error response: HTTP 200. Only `_meta` problems and the modern error codes are 400.
for _i, (_label, _payload, _stdio, _http) in enumerate(CORPUS):
    if _http is not None and _http.code == -32602 and isinstance(_http.id, int) and _http.id >= 20:
        CORPUS[_i] = (_label, _payload, _stdio, Expect(-32602, _http.id, 200))

HTTP_ONLY: dict[str, Expect] = {
    # A legacy request without a session over HTTP: no session to find.
    "no _meta, no session": Expect(-32602, 13),
    "unsupported version": Expect(-32022, 15),
}

SENTINEL = b'{"jsonrpc":"2.0","id":"sentinel","method":"ping"}'


def _check_error(message: dict[str, Any], expect: Expect, label: str) -> None:
    assert message.get("jsonrpc") == "2.0", label
    assert "result" not in message, (label, message)
    assert message["error"]["code"] == expect.code, (label, message)
    assert isinstance(message["error"]["message"], str), label
    assert message["id"] == expect.id, (label, message)


# --- stdio -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stdio_server() -> Any:
    import conftest

    peer = conftest.StdioPeer(conftest.CONFORMANCE_STDIO)
    yield peer
    try:
        assert peer.close() == 0
    finally:
        if peer.proc.poll() is None:
            peer.proc.kill()


def stdio_exchange(peer: Any, payload: bytes) -> list[dict[str, Any]]:
    """Send `payload` then a ping; every message that arrives before the ping's answer."""
    peer.write(payload + b"\n" + SENTINEL + b"\n")
    got: list[dict[str, Any]] = []
    while True:
        message = peer.read(limit_s=10)
        if message.get("id") == "sentinel" and "method" not in message:
            assert message["result"] == {}
            return got
        got.append(message)


@pytest.mark.parametrize(
    ("label", "payload", "expect"), [(c[0], c[1], c[2]) for c in CORPUS], ids=[c[0] for c in CORPUS]
)
def test_stdio_corpus(stdio_server: Any, label: str, payload: bytes, expect: Expect | None) -> None:
    got = stdio_exchange(stdio_server, payload)
    if expect is None:
        assert got == [], label
    else:
        assert len(got) == 1, (label, got)
        _check_error(got[0], expect, label)


def test_stdio_line_separator_inside_a_string(stdio_server: Any) -> None:
    got = stdio_exchange(stdio_server, b'{"jsonrpc":"2.0","id":"\xe2\x80\xa8","method":"nope"}')
    assert got[0]["id"] == "\u2028" and got[0]["error"]["code"] == -32602


def test_stdio_oversized_line(stdio_server: Any) -> None:
    from mcpkit.protocol.framing import DEFAULT_MAX_LINE_BYTES

    payload = (
        b'{"jsonrpc":"2.0","id":1,"method":"ping","pad":"' + b"x" * DEFAULT_MAX_LINE_BYTES + b'"}'
    )
    got = stdio_exchange(stdio_server, payload)
    assert len(got) == 1 and got[0]["error"]["code"] == -32600 and got[0]["id"] is None


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    st.one_of(
        st.binary(max_size=64).filter(lambda b: b"\n" not in b and b"\r" not in b),
        st.recursive(
            st.none()
            | st.booleans()
            | st.integers()
            | st.floats(allow_nan=False)
            | st.text(max_size=8),
            lambda children: (
                st.lists(children, max_size=4)
                | st.dictionaries(
                    st.sampled_from(["jsonrpc", "id", "method", "params", "result", "error", "x"]),
                    children,
                    max_size=5,
                )
            ),
            max_leaves=12,
        ).map(lambda v: json.dumps(v).encode()),
        st.fixed_dictionaries(
            {
                "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
                "id": st.one_of(st.integers(), st.text(max_size=5), st.none()),
                "method": st.sampled_from(
                    ["ping", "tools/list", "tools/call", "initialize", "x", ""]
                ),
                "params": st.one_of(
                    st.just({"_meta": META}),
                    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                    st.lists(st.integers(), max_size=2),
                ),
            }
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_stdio_random_input(stdio_server: Any, payload: bytes) -> None:
    if payload.strip() in (b"", b'"initialize"') or b'"initialize"' in payload:
        return  # a valid initialize would open a session and change later answers
    got = stdio_exchange(stdio_server, payload)
    assert len(got) <= 1, got
    for message in got:
        assert message["jsonrpc"] == "2.0"
        assert ("error" in message) != ("result" in message)
        if "error" in message:
            assert isinstance(message["error"]["code"], int)


def test_stdio_still_alive(stdio_server: Any) -> None:
    modern_call = modern("tools/call", id="alive", name="test_simple_text")
    got = stdio_exchange(stdio_server, modern_call)
    assert got[0]["id"] == "alive" and got[0]["result"]["resultType"] == "complete"
    assert stdio_server.proc.poll() is None


# --- HTTP --------------------------------------------------------------------------------------

BASE = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def http_headers_for(payload: bytes) -> dict[str, str]:
    """The headers a well-behaved client would send with this body, as far as it can tell."""
    hdrs = dict(BASE)
    try:
        message = json.loads(payload)
    except (ValueError, RecursionError):
        return hdrs
    if not isinstance(message, dict):
        return hdrs
    method = message.get("method")
    if isinstance(method, str) and mcp_headers.encode_header_value(method) == method:
        hdrs["mcp-method"] = method
    params = message.get("params")
    if isinstance(params, dict):
        meta = params.get("_meta")
        version = (
            meta.get("io.modelcontextprotocol/protocolVersion") if isinstance(meta, dict) else None
        )
        if isinstance(version, str) and mcp_headers.encode_header_value(version) == version:
            hdrs["mcp-protocol-version"] = version
        source = mcp_headers.NAME_SOURCES.get(method) if isinstance(method, str) else None
        if source and isinstance(params.get(source), str):
            hdrs["mcp-name"] = mcp_headers.encode_header_value(params[source])
    return hdrs


async def http_post(url: str, payload: bytes) -> tuple[int, list[dict[str, Any]]]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as client,
        client.post(url, data=io.BytesIO(payload), headers=http_headers_for(payload)) as resp,
    ):
        body = await resp.read()
        if resp.content_type == "text/event-stream":
            events = EventParser().feed(body)
            return resp.status, [json.loads(e.data) for e in events if e.data]
        return resp.status, ([json.loads(body)] if body else [])


async def assert_alive(url: str) -> None:
    status, got = await http_post(url, modern("tools/list", id="alive"))
    assert status == 200 and got[0]["id"] == "alive"


@pytest.mark.anyio
async def test_http_corpus(http_server: Any) -> None:
    url = http_server.url
    with anyio.fail_after(40):
        for label, payload, _, expect in CORPUS:
            expect = HTTP_ONLY.get(label, expect)
            status, got = await http_post(url, payload)
            if expect is None:
                assert status == 202 and got == [], (label, status, got)
            else:
                assert status == expect.status, (label, status, got)
                assert len(got) == 1, (label, got)
                _check_error(got[0], expect, label)
        await assert_alive(url)


@pytest.mark.anyio
async def test_http_oversized_body(http_server: Any) -> None:
    payload = b'{"jsonrpc":"2.0","id":1,"method":"ping","pad":"' + b"x" * (4 * 1024 * 1024) + b'"}'
    status, got = await http_post(http_server.url, payload)
    assert status == 413
    assert got[0]["error"]["code"] == -32600
    await assert_alive(http_server.url)


@pytest.mark.anyio
async def test_http_random_input(http_server: Any) -> None:
    samples: list[bytes] = []

    @settings(
        max_examples=100, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(
        st.binary(max_size=64)
        | st.recursive(
            st.none() | st.integers() | st.text(max_size=6),
            lambda c: (
                st.lists(c, max_size=3)
                | st.dictionaries(
                    st.sampled_from(["jsonrpc", "id", "method", "params"]), c, max_size=4
                )
            ),
            max_leaves=8,
        ).map(lambda v: json.dumps(v).encode())
    )
    def collect(payload: bytes) -> None:
        samples.append(payload)

    collect()
    url = http_server.url
    with anyio.fail_after(40):
        for payload in samples:
            status, got = await http_post(url, payload)
            assert status in (200, 202, 400, 404), (payload, status)
            if status == 202:
                assert got == []
            elif status == 200:  # random input that happens to be a valid request
                assert len(got) == 1 and ("result" in got[0]) != ("error" in got[0])
            else:
                assert len(got) == 1 and isinstance(got[0]["error"]["code"], int), (payload, got)
        await assert_alive(url)
