"""Opaque pagination cursors.

A cursor names the list it belongs to and the offset of the next page. It is not secret,
but it is checked: a cursor from another list, or a malformed one, is -32602.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import TypeVar

from mcpkit.protocol import errors

T = TypeVar("T")


def encode_cursor(kind: str, offset: int) -> str:
    return base64.urlsafe_b64encode(f"{kind}:{offset}".encode()).decode().rstrip("=")


def decode_cursor(kind: str, cursor: str) -> int:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode()
        prefix, _, offset_text = text.rpartition(":")
        offset = int(offset_text)
    except (ValueError, UnicodeError):
        raise errors.invalid_params("invalid cursor", {"cursor": cursor}) from None
    if prefix != kind or offset < 0:
        raise errors.invalid_params("invalid cursor", {"cursor": cursor})
    return offset


def paginate(
    kind: str, items: Sequence[T], cursor: str | None, page_size: int | None
) -> tuple[Sequence[T], str | None]:
    """One page of `items` and the cursor of the next page (None on the last page)."""
    start = 0 if cursor is None else decode_cursor(kind, cursor)
    if start > len(items):
        raise errors.invalid_params("cursor is past the end of the list", {"cursor": cursor})
    if page_size is None:
        return items[start:], None
    end = start + page_size
    next_cursor = encode_cursor(kind, end) if end < len(items) else None
    return items[start:end], next_cursor
