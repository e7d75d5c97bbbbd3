from __future__ import annotations

import pytest

from mcpkit.protocol import errors, meta

GOOD = {
    meta.PROTOCOL_VERSION: "2026-07-28",
    meta.CLIENT_CAPABILITIES: {"sampling": {}},
    meta.CLIENT_INFO: {"name": "c", "version": "1"},
    meta.LOG_LEVEL: "warning",
    meta.PROGRESS_TOKEN: "tok",
}


def test_parse_full_meta() -> None:
    parsed = meta.parse_request_meta(GOOD)
    assert parsed.protocol_version == "2026-07-28"
    assert parsed.client_capabilities == {"sampling": {}}
    assert parsed.client_info == {"name": "c", "version": "1"}
    assert parsed.log_level == "warning"
    assert parsed.progress_token == "tok"


def test_minimal_meta() -> None:
    parsed = meta.parse_request_meta({meta.PROTOCOL_VERSION: "x", meta.CLIENT_CAPABILITIES: {}})
    assert parsed.client_info is None and parsed.log_level is None and parsed.progress_token is None


@pytest.mark.parametrize(
    "bad",
    [
        None,
        [],
        {},
        {meta.CLIENT_CAPABILITIES: {}},
        {meta.PROTOCOL_VERSION: "", meta.CLIENT_CAPABILITIES: {}},
        {meta.PROTOCOL_VERSION: 2026, meta.CLIENT_CAPABILITIES: {}},
        {meta.PROTOCOL_VERSION: "2026-07-28"},
        {meta.PROTOCOL_VERSION: "2026-07-28", meta.CLIENT_CAPABILITIES: []},
        {**GOOD, meta.CLIENT_INFO: "me"},
        {**GOOD, meta.LOG_LEVEL: "verbose"},
    ],
)
def test_bad_meta_is_invalid_params(bad: object) -> None:
    with pytest.raises(errors.ProtocolError) as info:
        meta.parse_request_meta(bad)
    assert info.value.code == errors.INVALID_PARAMS


def test_has_modern_meta() -> None:
    assert meta.has_modern_meta({meta.PROTOCOL_VERSION: "anything"})
    assert not meta.has_modern_meta({"progressToken": 1})
    assert not meta.has_modern_meta(None)
    assert not meta.has_modern_meta("io.modelcontextprotocol/protocolVersion")


@pytest.mark.parametrize(
    ("value", "token"),
    [
        ({"progressToken": 5}, 5),
        ({"progressToken": "a"}, "a"),
        ({"progressToken": True}, None),
        ({"progressToken": 1.5}, None),
        ({}, None),
        (None, None),
        ({"progressToken": None}, None),
    ],
)
def test_progress_token(value: object, token: object) -> None:
    assert meta.progress_token_of(value) == token


def test_log_level_threshold() -> None:
    assert not meta.log_level_allows(None, "emergency")
    assert meta.log_level_allows("debug", "debug")
    assert meta.log_level_allows("warning", "error")
    assert not meta.log_level_allows("warning", "info")
    assert meta.log_level_allows("emergency", "emergency")
    assert not meta.log_level_allows("emergency", "alert")


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("progressToken", True),
        ("io.modelcontextprotocol/protocolVersion", True),
        ("example.com/x", True),
        ("a/b", True),
        ("", True),
        ("io.modelcontextprotocol/", True),
        ("-bad/x", False),
        ("bad-/x", False),
        ("1abc.com/x", False),
        ("a..b/x", False),
        ("x/-y", False),
        ("name with space", False),
        ("a/b/c", False),
    ],
)
def test_meta_key_names(key: str, ok: bool) -> None:
    assert meta.is_valid_meta_key(key) is ok
