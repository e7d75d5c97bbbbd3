from __future__ import annotations

import base64

import pytest

from mcpkit.protocol import errors
from mcpkit.protocol.pagination import decode_cursor, encode_cursor, paginate


def test_cursor_round_trip() -> None:
    cursor = encode_cursor("tools", 20)
    assert "=" not in cursor
    assert decode_cursor("tools", cursor) == 20


def test_paginate_walks_all_pages() -> None:
    items = list(range(5))
    seen: list[int] = []
    cursor = None
    pages = 0
    while True:
        page, cursor = paginate("k", items, cursor, 2)
        seen += page
        pages += 1
        if cursor is None:
            break
    assert seen == items and pages == 3


def test_no_page_size_returns_everything() -> None:
    assert paginate("k", [1, 2, 3], None, None) == ([1, 2, 3], None)
    assert paginate("k", [], None, 2) == ([], None)
    assert paginate("k", [1, 2], None, 2) == ([1, 2], None)


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "!!!",
        "",
        _b64("tools:abc"),
        _b64("tools:-1"),
        _b64("prompts:2"),  # another list's cursor
        _b64("tools"),
        base64.urlsafe_b64encode(b"\xff\xfe:1").decode(),
    ],
)
def test_tampered_cursor_is_invalid_params(cursor: str) -> None:
    with pytest.raises(errors.ProtocolError) as info:
        paginate("tools", [1, 2, 3], cursor, 2)
    assert info.value.code == errors.INVALID_PARAMS
    assert info.value.data == {"cursor": cursor}


def test_cursor_past_the_end() -> None:
    with pytest.raises(errors.ProtocolError) as info:
        paginate("tools", [1, 2], encode_cursor("tools", 9), 2)
    assert info.value.code == errors.INVALID_PARAMS
