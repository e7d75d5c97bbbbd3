"""`asgi.header_map`: lower-case names, repeated headers joined, latin-1 values, and one map
per request - made once, kept in the scope and found again by whatever serves the request
further in (the hub's gate, then the MCP app), also through a copy of the scope."""

from __future__ import annotations

from typing import Any

from mcpkit.transports.server.http import asgi


def scope_with(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {"type": "http", "headers": list(headers)}


def test_names_are_lower_case_and_repeats_are_joined() -> None:
    scope = scope_with((b"Accept", b"application/json"), (b"X-Thing", b"a"),
                       (b"x-thing", b"b"), (b"X-Latin", "caf\u00e9".encode("latin-1")))
    assert dict(asgi.header_map(scope)) == {
        "accept": "application/json", "x-thing": "a, b", "x-latin": "caf\u00e9"}


def test_the_map_is_made_once_per_request_and_follows_scope_copies() -> None:
    scope = scope_with((b"Authorization", b"Bearer t"))
    first = asgi.header_map(scope)
    assert asgi.header_map(scope) is first
    inner = {**scope, "mcpkit.principal": "7"}  # what a middleware passes on
    assert asgi.header_map(inner) is first
    assert asgi.header_map(scope_with((b"Authorization", b"Bearer u"))) == {
        "authorization": "Bearer u"}  # another request: its own map
