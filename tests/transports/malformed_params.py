"""Messages with a valid JSON-RPC envelope and hostile values inside params: the corpus and
the hypothesis strategies that `test_malformed_params.py` sends over every transport.

Payloads are built as raw bytes, since most of these values cannot come out of
`json.dumps`: a number beyond a float's range, invalid UTF-8 inside a string, an escaped
lone surrogate, nesting deeper than any decoder follows.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import EllipsisType
from typing import Any

from hypothesis import strategies as st

VERSION = "2026-07-28"
LEGACY_VERSION = "2025-03-26"  # the one legacy version that allows batches
META = {
    "io.modelcontextprotocol/protocolVersion": VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
}
META_JSON = json.dumps(META).encode()
INITIALIZE_PARAMS = {
    "protocolVersion": LEGACY_VERSION,
    "capabilities": {},
    "clientInfo": {"name": "tests", "version": "0"},
}

PARSE, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL = (
    -32700, -32600, -32601, -32602, -32603)
HEADER_MISMATCH = -32020
# Every code a request with hostile params may be answered with. Never -32603: that would
# be a value of the wrong type reaching code that assumed another.
ACCEPTABLE_CODES = frozenset({PARSE, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS,
                              HEADER_MISMATCH, -32021, -32022,
                              -32002})  # resource not found (legacy resources/read)


def raw_message(method: str, params: bytes | None, id: Any = ...) -> bytes:
    """A JSON-RPC message whose params are the raw JSON text `params` (no id: a
    notification)."""
    members = [b'"jsonrpc":"2.0"']
    if id is not ...:
        members.append(b'"id":' + json.dumps(id).encode())
    members.append(b'"method":' + json.dumps(method).encode())
    if params is not None:
        members.append(b'"params":' + params)
    return b"{" + b",".join(members) + b"}"


def raw_object(members: dict[str, bytes]) -> bytes:
    """A JSON object from raw member values."""
    return b"{" + b",".join(json.dumps(k).encode() + b":" + v for k, v in members.items()) + b"}"


def modern_raw(method: str, id: Any, **members: bytes) -> bytes:
    """A modern request (its `_meta` names the version) with raw param values."""
    return raw_message(method, raw_object({**members, "_meta": META_JSON}), id)


def deep(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@dataclass(frozen=True)
class Expect:
    """A JSON-RPC error (`code`, for request `id`) or, with `code` None, a result; over
    Streamable HTTP with `status`."""

    code: int | None
    id: Any = None
    status: int = 400


@dataclass(frozen=True)
class Case:
    label: str
    payload: bytes
    streamed: Expect | None
    """The answer on stdio, WebSocket and HTTP+SSE (None: no answer, a notification)."""
    http: Expect | None
    """The answer over Streamable HTTP (None: 202 and no body)."""
    http_headers: tuple[tuple[str, str], ...] = ()
    """The Mcp-* headers a client would send with it (Streamable HTTP, modern era)."""

    @property
    def utf8(self) -> bool:
        """Whether it can travel in a WebSocket text frame (which must be valid UTF-8)."""
        try:
            self.payload.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True


def _modern_headers(method: str, name: str | None = None) -> tuple[tuple[str, str], ...]:
    found = [("mcp-method", method), ("mcp-protocol-version", VERSION)]
    if name is not None:
        found.append(("mcp-name", name))
    return tuple(found)


LIST = _modern_headers("tools/list")
CALL = _modern_headers("tools/call", "test_simple_text")


def _case(label: str, payload: bytes, streamed: Expect | None,
          http: Expect | EllipsisType | None = ...,
          headers: tuple[tuple[str, str], ...] = ()) -> Case:
    """A case answered alike on every transport unless `http` says otherwise."""
    return Case(label, payload, streamed, streamed if isinstance(http, EllipsisType) else http,
                headers)


def _undecodable(label: str, id: int, value: bytes, code: int, *, readable_id: bool = True
                 ) -> Case:
    """tools/list with `value` in its params: refused before any method logic runs."""
    expect = Expect(code, id if readable_id else None)
    return _case(label, modern_raw("tools/list", id, x=value), expect, headers=LIST)


TASKS_META = json.dumps({**META, "io.modelcontextprotocol/clientCapabilities": {
    "extensions": {"io.modelcontextprotocol/tasks": {}}}}).encode()
NOTIFICATION_NOT_DECODED_HTTP = Expect(INVALID_PARAMS)  # 400 with id null (nothing to answer)

CORPUS: list[Case] = [
    # params that cannot be decoded: the error names the request when the envelope could
    # be read (a value out of range, invalid UTF-8), else id null (escapes and nesting that
    # the envelope decoder already refuses)
    _undecodable("number beyond float range", 101, b"1e400", INVALID_PARAMS),
    _undecodable("negative number beyond float range", 102, b"-1e400", INVALID_PARAMS),
    _undecodable("integer of 5000 digits", 103, b"1" + b"0" * 5000, INVALID_PARAMS),
    _undecodable("invalid UTF-8 in a string", 104, b'"\xff"', PARSE),
    _undecodable("overlong UTF-8 in a string", 105, b'"\xc0\xaf"', PARSE),
    _undecodable("UTF-8-encoded surrogate", 106, b'"\xed\xa0\x80"', PARSE),
    _undecodable("truncated UTF-8 sequence", 107, b'"\xe2\x82"', PARSE),
    _undecodable("lone surrogate escape", 108, b'"\\ud800"', PARSE, readable_id=False),
    _undecodable("reversed surrogate pair", 109, b'"\\udc00\\ud800"', PARSE, readable_id=False),
    _undecodable("raw control character", 110, b'"a\x01b"', PARSE, readable_id=False),
    _undecodable("nesting 3000 deep", 111, deep(3000), PARSE, readable_id=False),
    _case(
        "1e400 inside tool arguments",
        modern_raw("tools/call", 112, name=b'"test_simple_text"', arguments=b'{"a":[{"b":1e400}]}'),
        Expect(INVALID_PARAMS, 112), headers=CALL,
    ),
    _case(
        "invalid UTF-8 inside tool arguments",
        modern_raw("tools/call", 113, name=b'"test_simple_text"', arguments=b'{"a":"x\xfe"}'),
        Expect(PARSE, 113), headers=CALL,
    ),
    _case(
        "1e400 as initialize's protocolVersion",
        raw_message("initialize", b'{"protocolVersion":1e400,"capabilities":{},'
                                  b'"clientInfo":{"name":"t","version":"0"}}', 114),
        Expect(INVALID_PARAMS, 114),
    ),
    _case(
        "1e400 in _meta",
        raw_message("tools/list", b'{"_meta":{"io.modelcontextprotocol/protocolVersion":1e400}}',
                    115),
        Expect(INVALID_PARAMS, 115), headers=LIST,
    ),
    # decodable, but of a type the method does not take: -32602, never -32603 or a 500
    _case(
        "_meta logLevel is an array",
        raw_message("tools/list", json.dumps(
            {"_meta": {**META, "io.modelcontextprotocol/logLevel": ["debug"]}}).encode(), 120),
        Expect(INVALID_PARAMS, 120), headers=LIST,
    ),
    _case(
        "_meta logLevel is an object",
        raw_message("tools/list", json.dumps(
            {"_meta": {**META, "io.modelcontextprotocol/logLevel": {"a": 1}}}).encode(), 121),
        Expect(INVALID_PARAMS, 121), headers=LIST,
    ),
    _case(
        "_meta clientCapabilities is a string",
        raw_message("tools/list", json.dumps(
            {"_meta": {**META, "io.modelcontextprotocol/clientCapabilities": "x"}}).encode(),
            122),
        Expect(INVALID_PARAMS, 122), headers=LIST,
    ),
    _case("cursor is an object", modern_raw("tools/list", 123, cursor=b'{"a":[]}'),
          Expect(INVALID_PARAMS, 123), Expect(INVALID_PARAMS, 123, 200), headers=LIST),
    _case("tool name is an array", modern_raw("tools/call", 124, name=b"[1]"),
          Expect(INVALID_PARAMS, 124), Expect(HEADER_MISMATCH, 124),
          headers=_modern_headers("tools/call", "[1]")),
    _case("tool name with a NUL", modern_raw("tools/call", 125, name=b'"a\\u0000b"'),
          Expect(INVALID_PARAMS, 125), Expect(HEADER_MISMATCH, 125),
          headers=_modern_headers("tools/call", "a")),
    _case("resource uri is an object", modern_raw("resources/read", 126, uri=b'{"u":1}'),
          Expect(INVALID_PARAMS, 126), Expect(HEADER_MISMATCH, 126),
          headers=_modern_headers("resources/read", "x")),
    _case("task id is an array",
          raw_message("tasks/get", raw_object({"taskId": b"[[]]", "_meta": TASKS_META}), 127),
          Expect(INVALID_PARAMS, 127), Expect(HEADER_MISMATCH, 127),
          headers=_modern_headers("tasks/get")),
    _case("integer past 64 bits is an ordinary value",
          modern_raw("tools/list", 128, x=b"18446744073709551616"),
          Expect(None, 128), Expect(None, 128, 200), headers=LIST),
    # notifications: never answered, never fatal (over HTTP: 202, or 400 when undecodable)
    _case("cancelled, requestId an array",
          raw_message("notifications/cancelled", b'{"requestId":[1,2]}'), None, None),
    _case("cancelled, requestId an object",
          raw_message("notifications/cancelled", b'{"requestId":{"a":1}}'), None, None),
    _case("cancelled, requestId a float",
          raw_message("notifications/cancelled", b'{"requestId":1.5}'), None, None),
    _case("cancelled, requestId true",
          raw_message("notifications/cancelled", b'{"requestId":true}'), None, None),
    _case("cancelled, requestId 1e400",
          raw_message("notifications/cancelled", b'{"requestId":1e400}'), None,
          NOTIFICATION_NOT_DECODED_HTTP),
    _case("progress with invalid UTF-8",
          raw_message("notifications/progress", b'{"progressToken":"\xff","progress":1}'), None,
          Expect(PARSE)),
    _case("roots changed with 1e400",
          raw_message("notifications/roots/list_changed", b'{"x":-1e400}'), None,
          NOTIFICATION_NOT_DECODED_HTTP),
    _case("initialized with nested arrays",
          raw_message("notifications/initialized", b'{"x":' + deep(50) + b"}"), None, None),
]


# --- batches (in a live 2025-03-26 session) ------------------------------------------------

INITIALIZE_IN_BATCH = json.dumps([
    {"jsonrpc": "2.0", "id": "b-init", "method": "initialize",
     "params": {**INITIALIZE_PARAMS, "protocolVersion": "2024-11-05"}},
    {"jsonrpc": "2.0", "id": "b-ping", "method": "ping"},
]).encode()
BAD_MEMBER_BATCH = (
    b"[" + raw_message("ping", b'{"x":1e400}', "b-bad") + b","
    + raw_message("notifications/cancelled", b'{"requestId":[1]}') + b","
    + raw_message("ping", None, "b-ok") + b"]"
)


def check_batch_replies(initialize_reply: Any, bad_member_reply: Any) -> None:
    """`initialize` in a batch is -32600 (its neighbour is answered); a member with
    undecodable params is -32602 with its id, the others are answered as usual."""
    assert isinstance(initialize_reply, list), initialize_reply
    by_id = {r["id"]: r for r in initialize_reply}
    assert set(by_id) == {"b-init", "b-ping"}, initialize_reply
    assert by_id["b-init"]["error"]["code"] == INVALID_REQUEST, by_id["b-init"]
    assert "result" not in by_id["b-init"]
    assert by_id["b-ping"]["result"] == {}
    assert isinstance(bad_member_reply, list), bad_member_reply
    by_id = {r["id"]: r for r in bad_member_reply}
    assert set(by_id) == {"b-bad", "b-ok"}, bad_member_reply
    assert by_id["b-bad"]["error"]["code"] == INVALID_PARAMS
    assert by_id["b-ok"]["result"] == {}


def check_answer(case: Case, expect: Expect | None, got: list[dict[str, Any]]) -> None:
    """What came back for `case` (before the next valid request's answer)."""
    if expect is None:
        assert got == [], (case.label, got)
        return
    assert len(got) == 1, (case.label, got)
    message = got[0]
    assert message.get("jsonrpc") == "2.0", (case.label, message)
    assert message["id"] == expect.id, (case.label, message)
    if expect.code is None:
        assert "result" in message and "error" not in message, (case.label, message)
    else:
        assert "result" not in message, (case.label, message)
        assert message["error"]["code"] == expect.code, (case.label, message)
        assert isinstance(message["error"]["message"], str), case.label


# --- fuzzing: hostile values anywhere inside params ---------------------------------------

HOSTILE_LEAVES: list[bytes] = [
    b"1e400", b"-1e400", b"1e-400", b"1" + b"0" * 4400, b"-" + b"9" * 4300,
    b"18446744073709551616", b"-9223372036854775809", b"1.7976931348623157e309",
    b'"\xff"', b'"\xc0\xaf"', b'"\xed\xa0\x80"', b'"\xf4\x90\x80\x80"', b'"\xe2\x82"',
    b'"\\ud800"', b'"\\udfff"', b'"\\ud800\\u0041"', b'"a\\u0000b"', b'"\x7f"',
    b'"a\x01"', b'"\\u00"', deep(40), deep(2000),
]
KEYS = ["_meta", "name", "arguments", "cursor", "uri", "requestId", "progressToken", "level",
        "ref", "argument", "taskId", "notifications", "protocolVersion", "capabilities",
        "clientInfo", "inputResponses", "requestState", "progress", "x"]
REQUEST_METHODS = ["tools/list", "tools/call", "prompts/get", "prompts/list", "resources/read",
                   "resources/list", "completion/complete", "logging/setLevel", "tasks/get",
                   "server/discover", "ping", "no/such"]
# (not subscriptions/listen: a valid one is a stream that never ends by itself)
NOTIFICATION_METHODS = ["notifications/cancelled", "notifications/progress",
                        "notifications/roots/list_changed", "notifications/whatever"]


def _plain_json(value: Any) -> bytes:
    return json.dumps(value).encode()


json_leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
).map(_plain_json)
leaves = st.one_of(json_leaves, st.sampled_from(HOSTILE_LEAVES))
values = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda items: b"[" + b",".join(items) + b"]"),
        st.dictionaries(st.sampled_from(KEYS), inner, max_size=3).map(raw_object),
    ),
    max_leaves=6,
)
meta_values = st.one_of(
    st.just(META_JSON),
    st.dictionaries(
        st.sampled_from([*META, "io.modelcontextprotocol/logLevel", "progressToken"]),
        values, max_size=3,
    ).map(raw_object),
    values,
)


@st.composite
def hostile_messages(draw: st.DrawFn, *, utf8_only: bool = False) -> tuple[bytes, bool]:
    """(a message with hostile values inside its params, whether it is a request)."""
    members = draw(st.dictionaries(st.sampled_from(KEYS[1:]), values, max_size=3))
    if draw(st.booleans()):
        members["_meta"] = draw(meta_values)
    params = raw_object(members)
    if draw(st.integers(0, 3)) == 3:  # a quarter notifications (0 is what hypothesis favours)
        message = raw_message(draw(st.sampled_from(NOTIFICATION_METHODS)), params)
        is_request = False
    else:
        message = raw_message(draw(st.sampled_from(REQUEST_METHODS)), params, "fuzz")
        is_request = True
    if utf8_only:
        message = message.decode("utf-8", "replace").encode("utf-8")
    return message, is_request


def with_id(message: bytes, id: str) -> bytes:
    """The fuzzed message with a unique id in place of the placeholder."""
    return message.replace(b'"id":"fuzz"', b'"id":' + json.dumps(id).encode(), 1)


def check_fuzz_answer(message: bytes, is_request: bool, id: str, got: list[dict[str, Any]],
                      *, refusal: dict[str, Any] | None = None) -> None:
    """A request gets exactly one well-formed answer (with its id, or null when the
    envelope itself did not decode); a notification gets none, unless its JSON text itself
    is invalid (a lone surrogate escape): then nothing says it was a notification, and
    JSON-RPC answers -32700 with id null (its own example of a parse error is such a
    notification)."""
    if refusal is not None:  # HTTP+SSE: a message that did not decode is refused on its POST
        assert refusal["id"] in (id, None) and refusal["error"]["code"] in ACCEPTABLE_CODES
        assert got == [], (message[:300], got)
        return
    if not is_request:
        assert got == [] or (len(got) == 1 and got[0]["id"] is None
                             and got[0]["error"]["code"] == PARSE), (message[:300], got)
        return
    assert len(got) == 1, (message[:300], got)
    answer = got[0]
    assert answer.get("jsonrpc") == "2.0", answer
    assert answer["id"] in (id, None), (message[:300], answer)
    assert ("result" in answer) != ("error" in answer), answer
    if "error" in answer:
        assert answer["error"]["code"] in ACCEPTABLE_CODES, (message[:300], answer)
