"""Pages of lists the hub holds whole (a stored tool catalog, a user's tokens), in the same
`{items, next_cursor}` shape as the store's keyset pages. The cursor is an opaque offset; a
cursor that is not one of ours is `Invalid("cursor")`, like the store's."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import TypeVar

from mcpkit.hub.store import Invalid

T = TypeVar("T")
PREFIX = "o:"


def page_of(items: Sequence[T], cursor: str | None, limit: int) -> tuple[Sequence[T], str | None]:
    start = 0 if cursor is None else _offset(cursor)
    chunk = items[start: start + limit]
    end = start + len(chunk)
    return chunk, (_cursor(end) if end < len(items) else None)


def _cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"{PREFIX}{offset}".encode()).decode("ascii").rstrip("=")


def _offset(cursor: str) -> int:
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        text = raw.decode("ascii")
    except (binascii.Error, UnicodeError, ValueError):
        text = ""
    digits = text[len(PREFIX):]
    if not text.startswith(PREFIX) or not digits.isdigit() or len(digits) > 9:
        raise Invalid("cursor", "not a cursor this listing gave")
    return int(digits)
