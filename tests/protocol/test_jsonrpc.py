from __future__ import annotations

import json
import tracemalloc
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.protocol import errors, jsonrpc


def fail(data: bytes | str) -> jsonrpc.DecodeFailure:
    with pytest.raises(jsonrpc.DecodeFailure) as info:
        jsonrpc.decode_message(data)
    return info.value


@pytest.mark.parametrize(
    "data", [b"{", b'{"jsonrpc": "2.0",', b"", b"nul", b"\xff\xfe{}", b"{'a':1}"]
)
def test_unparsable_is_parse_error(data: bytes) -> None:
    failure = fail(data)
    assert failure.error.code == errors.PARSE_ERROR
    assert failure.id is None


@pytest.mark.parametrize(
    "data",
    [
        b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}',
        b'{"jsonrpc":"2.0","id":"\xc3","method":"ping"}',
        b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":'
        + b"[" * 5000
        + b"]" * 5000
        + b"}}",
    ],
    ids=["bad-utf8-method", "bad-utf8-id", "deep-nesting"],
)
def test_undecodable_content_is_parse_error(data: bytes) -> None:
    failure = fail(data)
    assert failure.error.code == errors.PARSE_ERROR
    try:
        items = jsonrpc.decode_batch(b"[" + data + b"]")
    except jsonrpc.DecodeFailure as whole:
        assert whole.error.code == errors.PARSE_ERROR
    else:
        assert isinstance(items[0], jsonrpc.DecodeFailure)
        assert items[0].error.code == errors.PARSE_ERROR


@pytest.mark.parametrize("data", [b"[]", b"1", b'"x"', b"null", b"true"])
def test_non_object_is_invalid_request(data: bytes) -> None:
    failure = fail(data)
    assert failure.error.code == errors.INVALID_REQUEST
    assert failure.id is None


@pytest.mark.parametrize(
    ("message", "expected_id"),
    [
        ({"jsonrpc": "2.0", "id": None, "method": "x"}, None),
        ({"jsonrpc": "1.0", "id": 7, "method": "x"}, 7),
        ({"id": "a", "method": "x"}, "a"),
        ({"jsonrpc": "2.0", "id": 3, "method": "x", "params": [1, 2]}, 3),
        ({"jsonrpc": "2.0", "id": 4, "method": "x", "params": "s"}, 4),
        ({"jsonrpc": "2.0", "id": 5, "method": 12}, 5),
        ({"jsonrpc": "2.0", "id": 6, "method": ""}, 6),
        ({"jsonrpc": "2.0", "id": 1.5, "method": "x"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "x"}, None),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "x"}, None),
        ({"jsonrpc": "2.0", "id": 8}, 8),
        ({"jsonrpc": "2.0", "id": 9, "result": {}, "error": {"code": 1}}, 9),
        ({"jsonrpc": "2.0", "result": {}}, None),
        ({"jsonrpc": "2.0", "id": 10, "error": {"message": "no code"}}, 10),
        ({"jsonrpc": 2.0, "id": 11, "method": "x"}, 11),
    ],
)
def test_invalid_request_echoes_readable_id(message: dict, expected_id: object) -> None:
    failure = fail(json.dumps(message))
    assert failure.error.code == errors.INVALID_REQUEST
    assert failure.id == expected_id


def test_decodes_request_notification_and_responses() -> None:
    request = jsonrpc.decode_message(
        b'{"jsonrpc":"2.0","id":"r1","method":"ping","params":{"a":1}}'
    )
    assert isinstance(request, jsonrpc.Request)
    assert request.id == "r1" and request.method == "ping"
    assert request.params == {"a": 1}

    note = jsonrpc.decode_message('{"jsonrpc":"2.0","method":"notifications/initialized"}')
    assert note == jsonrpc.Notification("notifications/initialized", None)

    response = jsonrpc.decode_message(b'{"jsonrpc":"2.0","id":2,"result":{"ok":true}}')
    assert isinstance(response, jsonrpc.Response)
    assert response.id == 2 and jsonrpc.decode_value(response.result) == {"ok": True}

    error = jsonrpc.decode_message(
        b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad","data":[1]}}'
    )
    assert error == jsonrpc.ErrorResponse(None, -32700, "bad", [1])


def test_zero_and_negative_ids_are_valid() -> None:
    for value in (0, -1, 2**62, ""):
        message = jsonrpc.decode_message(json.dumps({"jsonrpc": "2.0", "id": value, "method": "m"}))
        assert isinstance(message, jsonrpc.Request) and message.id == value


def test_whitespace_before_object_params() -> None:
    message = jsonrpc.decode_message(b'{"jsonrpc":"2.0","id":1,"method":"m","params":  {}}')
    assert isinstance(message, jsonrpc.Request)
    assert message.params == {}


def test_batch_decoding() -> None:
    assert jsonrpc.is_batch(b"  [1]") and jsonrpc.is_batch("[") and not jsonrpc.is_batch(b"{}")
    items = jsonrpc.decode_batch(
        b'[{"jsonrpc":"2.0","id":1,"method":"ping"}, 1, {"jsonrpc":"2.0","method":"n"},'
        b' {"jsonrpc":"1.0","id":2,"method":"x"}]'
    )
    assert isinstance(items[0], jsonrpc.Request)
    assert isinstance(items[1], jsonrpc.DecodeFailure)
    assert items[1].error.code == errors.INVALID_REQUEST
    assert isinstance(items[2], jsonrpc.Notification)
    assert isinstance(items[3], jsonrpc.DecodeFailure) and items[3].id == 2
    with pytest.raises(jsonrpc.DecodeFailure) as empty:
        jsonrpc.decode_batch(b"[]")
    assert empty.value.error.code == errors.INVALID_REQUEST
    with pytest.raises(jsonrpc.DecodeFailure) as broken:
        jsonrpc.decode_batch(b"[{")
    assert broken.value.error.code == errors.PARSE_ERROR


def test_encoders_round_trip() -> None:
    assert json.loads(jsonrpc.encode_request(1, "ping")) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "ping",
    }
    assert json.loads(jsonrpc.encode_request("a", "m", {"x": 1}))["params"] == {"x": 1}
    assert json.loads(jsonrpc.encode_notification("n")) == {"jsonrpc": "2.0", "method": "n"}
    assert json.loads(jsonrpc.encode_result(3, {"r": []})) == {
        "jsonrpc": "2.0",
        "id": 3,
        "result": {"r": []},
    }
    err = json.loads(jsonrpc.encode_error(None, errors.method_not_found("zap")))
    assert err == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32601, "message": "Method not found: zap", "data": {"method": "zap"}},
    }
    # no data member when there is no data
    assert "data" not in json.loads(jsonrpc.encode_error(1, errors.parse_error()))["error"]
    raw = jsonrpc.encode_result(1, msgspec.Raw(b'{"pre":"encoded"}'))
    assert json.loads(raw)["result"] == {"pre": "encoded"}


def test_decode_value_none() -> None:
    assert jsonrpc.decode_value(None) is None


def test_error_helpers() -> None:
    assert errors.unsupported_protocol_version("1999", ("2026-07-28",)).data == {
        "supported": ["2026-07-28"],
        "requested": "1999",
    }
    assert errors.resource_not_found("x://y").code == errors.INVALID_PARAMS
    assert errors.resource_not_found("x://y", legacy_code=True).code == -32002
    assert errors.missing_client_capability({"sampling": {}}).data == {
        "requiredCapabilities": {"sampling": {}}
    }
    assert errors.header_mismatch("x").code == -32020
    assert isinstance(errors.invalid_params("x"), errors.ProtocolError)


# --- values inside params and errors: decoded here, failures carry the id -------------------


@pytest.mark.parametrize(
    ("value", "code"),
    [
        (b"1e400", errors.INVALID_PARAMS),
        (b"-1e400", errors.INVALID_PARAMS),
        (b"1" + b"0" * 5000, errors.INVALID_PARAMS),
        (b'"\xff"', errors.PARSE_ERROR),
        (b'"\xc0\xaf"', errors.PARSE_ERROR),
        (b'{"a":["\xed\xa0\x80"]}', errors.PARSE_ERROR),
    ],
)
def test_undecodable_params_fail_with_the_id(value: bytes, code: int) -> None:
    data = b'{"jsonrpc":"2.0","id":"r7","method":"tools/list","params":{"x":' + value + b"}}"
    failure = fail(data)
    assert (failure.error.code, failure.id, failure.notification) == (code, "r7", False)
    assert failure.answerable
    note = fail(data.replace(b'"id":"r7",', b""))
    assert note.error.code == code and note.notification and not note.answerable
    [member] = jsonrpc.decode_batch(b"[" + data + b"]")
    assert isinstance(member, jsonrpc.DecodeFailure) and member.id == "r7"


def test_params_are_decoded_values() -> None:
    message = jsonrpc.decode_message(
        b'{"jsonrpc":"2.0","id":1,"method":"m","params":{"n":18446744073709551616,"s":"a\\u0000"}}'
    )
    assert isinstance(message, jsonrpc.Request)
    assert message.params == {"n": 2**64, "s": "a\x00"}


def test_undecodable_error_response_settles_its_request() -> None:
    failure = fail(b'{"jsonrpc":"2.0","id":5,"error":{"code":1,"message":"x","data":1e400}}')
    assert failure.response and failure.id == 5
    settled = failure.as_error_response()
    assert settled is not None and settled.id == 5 and settled.code == failure.error.code
    malformed = fail(b'{"jsonrpc":"2.0","id":6,"result":{},"error":{"code":1}}')
    assert malformed.response and malformed.answerable  # answered, as any malformed message
    assert fail(b'{"jsonrpc":"2.0","id":7,"method":"m","params":{"x":1e400}}'
                ).as_error_response() is None


def test_request_ids() -> None:
    assert all(jsonrpc.is_request_id(v) for v in ("", "a", 0, -1, 2**70))
    assert not any(jsonrpc.is_request_id(v) for v in (None, True, 1.5, [1], {"a": 1}))


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False,
                                                                      allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=40) | st.dictionaries(st.text(max_size=4), inner,
                                                                 max_size=12),
    max_leaves=400,
)


def _decoded_bytes(raw: bytes) -> int:
    tracemalloc.start()
    try:
        value = msgspec.json.decode(raw)
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del value
    return size


@settings(max_examples=60, deadline=None)
@given(value=_json_values, repeat=st.sampled_from([1, 40, 400]))
def test_params_footprint_bounds_what_decoding_takes(value: Any, repeat: int) -> None:
    """The estimate admission charges is an upper bound of the decoded params' memory,
    small params (charged without a scan) and large ones (scanned) alike."""
    raw = msgspec.json.encode({"items": [value] * repeat})
    assert _decoded_bytes(raw) <= jsonrpc.params_footprint(raw) + 4096


@pytest.mark.parametrize("item", [b"{}", b"[]", b'{"a":{}}', b"[[[]]]"])
def test_params_whose_decoding_would_blow_up_are_refused_undecoded(item: bytes) -> None:
    """4 MiB of tiny containers would take ~100 MiB once decoded: -32602, with the id."""
    count = (4 * 1024 * 1024) // (len(item) + 1)
    body = (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"x":['
            + b",".join([item] * count) + b"]}}")
    assert jsonrpc.params_footprint(body) > jsonrpc.MAX_PARAMS_FOOTPRINT
    with pytest.raises(jsonrpc.DecodeFailure) as caught:
        jsonrpc.decode_message(body)
    assert caught.value.id == 7 and caught.value.error.code == -32602
    assert "too large once decoded" in caught.value.error.message
