from __future__ import annotations

import pytest

from mcpkit.protocol import errors, headers


def mismatch(fn: object, *args: object) -> errors.McpError:
    with pytest.raises(errors.ProtocolError) as info:
        fn(*args)  # type: ignore[operator]
    assert info.value.code == errors.HEADER_MISMATCH
    return info.value


def test_plain_value_passes_through() -> None:
    assert headers.decode_header_value("us-west1") == "us-west1"


def test_sentinel_decodes() -> None:
    assert headers.decode_header_value("=?base64?SGVsbG8=?=") == "Hello"
    assert headers.decode_header_value("=?base64?5pel5pys?=") == "日本"
    assert headers.decode_header_value("=?base64??=") == ""


@pytest.mark.parametrize(
    "value",
    [
        "=?base64?SGVsbG8?=",  # missing padding
        "=?base64?SGVsbG8==?=",  # too much padding
        "=?base64?SGV sbG8=?=",  # space
        "=?base64?SGVs*bG8=?=",  # bad alphabet
        "=?base64?SGVsbG9=?=",  # non-canonical trailing bits
        "=?base64?_-8=?=",  # url-safe alphabet is not base64
        "=?base64?/w==?=",  # not UTF-8
    ],
)
def test_bad_sentinel(value: str) -> None:
    mismatch(headers.decode_header_value, value)


@pytest.mark.parametrize("value", ["plain", "with space inside", "", "a=b?c"])
def test_safe_values_are_kept(value: str) -> None:
    assert headers.encode_header_value(value) == value


@pytest.mark.parametrize(
    "value", [" lead", "trail ", "tab\tin", "日本", "line\nbreak", "=?base64?abc?=", "\x7f"]
)
def test_unsafe_values_round_trip_through_sentinel(value: str) -> None:
    encoded = headers.encode_header_value(value)
    assert encoded.startswith("=?base64?") and encoded.endswith("?=")
    assert encoded.isascii()
    assert headers.decode_header_value(encoded) == value


def test_standard_headers() -> None:
    params = {"name": "my tool", "arguments": {}}
    headers.check_standard_headers({"mcp-method": "tools/list"}, "tools/list", {})
    headers.check_standard_headers(
        {"mcp-method": "tools/call", "mcp-name": "my tool"}, "tools/call", params
    )
    headers.check_standard_headers(
        {"mcp-method": "tools/call", "mcp-name": "=?base64?bXkgdG9vbA==?="}, "tools/call", params
    )
    headers.check_standard_headers(
        {"mcp-method": "resources/read", "mcp-name": "file:///a"},
        "resources/read",
        {"uri": "file:///a"},
    )
    mismatch(headers.check_standard_headers, {}, "tools/list", {})
    mismatch(headers.check_standard_headers, {"mcp-method": "tools/call"}, "tools/list", {})
    mismatch(headers.check_standard_headers, {"mcp-method": "tools/call"}, "tools/call", params)
    mismatch(
        headers.check_standard_headers,
        {"mcp-method": "tools/call", "mcp-name": "other"},
        "tools/call",
        params,
    )
    mismatch(
        headers.check_standard_headers,
        {"mcp-method": "prompts/get", "mcp-name": "x"},
        "prompts/get",
        {},
    )


SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "flag": {"type": "boolean", "x-mcp-header": "Flag"},
        "nested": {
            "type": "object",
            "properties": {"deep": {"type": "string", "x-mcp-header": "Deep"}},
        },
        "plain": {"type": "string"},
    },
}


def test_header_params_collects_paths() -> None:
    assert headers.header_params(SCHEMA) == {
        "Region": ("region",),
        "Count": ("count",),
        "Flag": ("flag",),
        "Deep": ("nested", "deep"),
    }
    assert headers.header_params({"type": "object"}) == {}


@pytest.mark.parametrize(
    "props",
    [
        {"a": {"type": "string", "x-mcp-header": "bad name"}},
        {"a": {"type": "string", "x-mcp-header": ""}},
        {"a": {"type": "string", "x-mcp-header": 7}},
        {
            "a": {"type": "string", "x-mcp-header": "Dup"},
            "b": {"type": "string", "x-mcp-header": "dup"},
        },
        {"a": {"type": "object", "x-mcp-header": "Obj"}},
        {"a": {"type": "number", "x-mcp-header": "Num"}},
        {"a": {"x-mcp-header": "Untyped"}},
        {"a": {"type": "array", "x-mcp-header": "Arr"}},
    ],
)
def test_invalid_annotations(props: dict) -> None:
    with pytest.raises(ValueError, match="x-mcp-header"):
        headers.header_params({"type": "object", "properties": props})


def test_check_param_headers() -> None:
    ann = headers.header_params(SCHEMA)
    args = {"region": "eu", "count": 3, "flag": True, "nested": {"deep": "日本"}}
    good = {
        "mcp-param-region": "eu",
        "mcp-param-count": "3",
        "mcp-param-flag": "true",
        "mcp-param-deep": headers.encode_header_value("日本"),
    }
    headers.check_param_headers(good, ann, args)
    headers.check_param_headers({**good, "mcp-param-count": "3.0"}, ann, args)
    # absent or null arguments need no header
    headers.check_param_headers({}, ann, {})
    headers.check_param_headers({}, ann, {"region": None})
    headers.check_param_headers({}, ann, None)
    mismatch(
        headers.check_param_headers,
        {k: v for k, v in good.items() if k != "mcp-param-region"},
        ann,
        args,
    )
    mismatch(headers.check_param_headers, {**good, "mcp-param-region": "us"}, ann, args)
    mismatch(headers.check_param_headers, {**good, "mcp-param-flag": "True"}, ann, args)
    mismatch(headers.check_param_headers, {**good, "mcp-param-count": "three"}, ann, args)
    mismatch(headers.check_param_headers, {**good, "mcp-param-count": "inf"}, ann, args)
    mismatch(headers.check_param_headers, {**good, "mcp-param-region": "e\u00e9"}, ann, args)
    mismatch(
        headers.check_param_headers, {**good, "mcp-param-deep": "=?base64?5pel5pys?"}, ann, args
    )
