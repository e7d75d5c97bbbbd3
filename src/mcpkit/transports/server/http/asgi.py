"""Small ASGI helpers: headers, bounded body reading, plain responses."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from typing import Any

from mcpkit.errors import InvalidArgument

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES = 64 * 1024 * 1024
"""Bytes of request bodies an app receives at once, over all requests (`BodyBudget`)."""
BODIES_RETRY_AFTER_S = 1
"""The Retry-After (seconds) of a request refused because `BodyBudget` is full."""


class _BodyTooLarge(Exception):
    """The body passes the app's per-request limit (answered 413 by the app)."""


class _BodiesInFlightFull(Exception):
    """The bodies being received already fill the app's `BodyBudget`."""


class BodyBudget:
    """Bytes of request bodies being received, over every request of an app: a body is
    charged chunk by chunk as it arrives and paid back once read whole (or abandoned), so
    many slow bodies just under the per-body limit cannot add up without bound."""

    def __init__(self, limit: int = DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES) -> None:
        if limit < 1:
            raise InvalidArgument("the bodies-in-flight budget must be at least 1 byte")
        self.limit = limit
        self.used = 0

    def take(self, size: int) -> bool:
        if self.used + size > self.limit:
            return False
        self.used += size
        return True

    def give_back(self, size: int) -> None:
        self.used -= size


HEADER_MAP_KEY = "mcpkit.header_map"


def header_map(scope: Scope) -> Mapping[str, str]:
    """Request headers keyed by lower-case name (repeated headers joined with ", ").

    Made once per request: the map is kept in the scope (copies of it made further in, as
    the hub's gate makes, carry it along), so a middleware and the app it wraps do not
    decode the same headers twice. Shared, hence read-only."""
    made: Mapping[str, str] | None = scope.get(HEADER_MAP_KEY)
    if made is not None:
        return made
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        out[name] = f"{out[name]}, {value}" if name in out else value
    scope[HEADER_MAP_KEY] = out
    return out


async def read_body(
    receive: Receive,
    limit: int,
    headers: Mapping[str, str] | None = None,
    budget: BodyBudget | None = None,
) -> bytes:
    """The request body, or `_BodyTooLarge` as soon as it passes `limit` bytes (at once when
    its Content-Length says it will), or `_BodiesInFlightFull` when `budget` cannot hold its
    next chunk."""
    declared = (headers or {}).get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _BodyTooLarge
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise ConnectionResetError("client disconnected")
            chunk = message.get("body", b"")
            if size + len(chunk) > limit:
                raise _BodyTooLarge
            if budget is not None and not budget.take(len(chunk)):
                raise _BodiesInFlightFull
            size += len(chunk)
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks) if len(chunks) != 1 else chunks[0]
    finally:
        if budget is not None:
            budget.give_back(size)


def encode_headers(headers: dict[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers.items()]


async def respond(
    send: Send,
    status: int,
    body: bytes = b"",
    *,
    content_type: str | None = None,
    headers: dict[str, str] | None = None,
) -> None:
    out = dict(headers or {})
    if content_type is not None:
        out["content-type"] = content_type
    out["content-length"] = str(len(body))
    await send({"type": "http.response.start", "status": status, "headers": encode_headers(out)})
    await send({"type": "http.response.body", "body": body})
