"""Keyset pagination: a listing is ordered by a unique key and a cursor is the last key seen,
so pages stay stable while rows are added or removed between requests."""

from __future__ import annotations

import base64
import binascii

from mcpkit.hub.store.errors import Invalid

DEFAULT_LIMIT = 50
MAX_LIMIT = 500


def encode_cursor(key: str) -> str:
    return base64.urlsafe_b64encode(key.encode("utf-8")).decode("ascii").rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        raw = base64.b64decode(padded.encode("ascii"), altchars=b"-_", validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, UnicodeError, ValueError):
        raise Invalid("cursor", "not a cursor this listing gave") from None
