"""The server's JSON answers as typed values (`mcpkit.protocol.types`), checked once.

A result that does not have the shape its method promises is a `ProtocolError` naming the
method; optional facts the server may get wrong (its `serverInfo`) become None instead.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from mcpkit.protocol import errors, types

T = TypeVar("T")


def typed(value: Any, type_: type[T], what: str) -> T:
    try:
        return msgspec.convert(value, type_)
    except msgspec.ValidationError as exc:
        raise errors.ProtocolError(
            errors.INVALID_REQUEST, f"the server sent an invalid {what} result: {exc}"
        ) from None


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def implementation(value: Any) -> types.Implementation | None:
    try:
        return msgspec.convert(value, types.Implementation) if value is not None else None
    except msgspec.ValidationError:
        return None
