"""A protected upstream for the needs_auth and catalog-credential tests: an mcpkit Server
(Streamable HTTP, both eras) behind a bearer check, served on 127.0.0.1 in a thread.

    with guarded_upstream({"catalog-token", "call-token"}) as guard:
        guard.url                       # http://127.0.0.1:PORT/mcp
        guard.tokens.discard("call-token")  # revoked: the next request with it gets 401
        guard.seen                      # [(token or "", JSON-RPC method), ...] of accepted POSTs

A request without an accepted token is answered 401 with an OAuth challenge
(`WWW-Authenticate: Bearer error="invalid_token", resource_metadata="…"`, RFC 9728), as an
MCP resource server answers; its metadata names an authorization server that does not exist
(the hub only has to recognise the challenge). Every accepted POST is recorded with the token
it carried and the JSON-RPC method it asked, so a test can tell which credential the hub
used for its catalog fetch and which for a call.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tests.procs import serve_in_thread

from mcpkit import Server

METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"
MAX_BODY_BYTES = 1 << 20


@dataclass
class Guard:
    tokens: set[str]
    base: str = ""
    seen: list[tuple[str, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def methods_with(self, token: str) -> set[str]:
        with self._lock:
            return {method for used, method in self.seen if used == token}

    def record(self, token: str, method: str) -> None:
        with self._lock:
            self.seen.append((token, method))


def echo_server() -> Server:
    server = Server("guarded", "1.0.0")

    @server.tool()
    def echo(text: str) -> str:
        """Say it back."""
        return text

    @server.prompt()
    def greet() -> str:
        """A greeting."""
        return "hello"

    return server


class _App:
    def __init__(self, guard: Guard, app: Any) -> None:
        self.guard = guard
        self.app = app

    async def shutdown(self) -> None:
        await self.app.shutdown()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == METADATA_PATH:
            await _send_json(send, 200, {"resource": self.guard.url,
                                         "authorization_servers": [self.guard.base + "/as"]})
            return
        headers = dict(scope.get("headers", ()))
        scheme, _, token = headers.get(b"authorization", b"").decode("latin-1").partition(" ")
        if scheme.lower() != "bearer" or token not in self.guard.tokens:
            challenge = (f'Bearer error="invalid_token", resource_metadata='
                         f'"{self.guard.base}{METADATA_PATH}"')
            await _send_json(send, 401, {"error": "invalid_token"},
                             [(b"www-authenticate", challenge.encode())])
            return
        if scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await _read(receive)
        try:
            method = json.loads(body).get("method", "")
        except (ValueError, AttributeError):
            method = ""
        self.guard.record(token, str(method))
        await self.app(scope, replay, send)


async def _read(receive: Any) -> tuple[bytes, Any]:
    """The request body (bounded) and a `receive` that hands it over again."""
    chunks: list[bytes] = []
    messages: list[Any] = []
    while True:
        message = await receive()
        messages.append(message)
        chunks.append(message.get("body", b""))
        if not message.get("more_body") or sum(map(len, chunks)) > MAX_BODY_BYTES:
            break

    async def replay() -> Any:
        return messages.pop(0) if messages else await receive()

    return b"".join(chunks), replay


async def _send_json(send: Any, status: int, doc: Any,
                     extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(doc).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def guarded_upstream(tokens: set[str]) -> Iterator[Guard]:
    guard = Guard(set(tokens))
    with serve_in_thread(_App(guard, echo_server().asgi_app()), name="guarded") as base:
        guard.base = base
        yield guard
