"""ASGI middleware in front of the coding server's MCP app: the bearer token and the task.

- `--token T`: every request needs `Authorization: Bearer T` (compared in constant time);
  otherwise 401 with `WWW-Authenticate: Bearer`. The token is never logged. Wrong tokens
  are rate-limited per client address (`AuthFailures`): past the burst, 429 with
  `Retry-After`, whatever the token, until the address's budget refills.
- `?task_id=ID` selects the task scope for the whole request (`scope.current_task`); an
  invalid id is 400. Without it, the default task.
"""

from __future__ import annotations

import hmac
import math
import urllib.parse
from collections.abc import Callable
from typing import Any

from mcpkit.coding.scope import DEFAULT_TASK, current_task, valid_task_id
from mcpkit.transports.server.http.auth_failures import AuthFailures
from mcpkit.transports.server.http.peers import peer_key

Scope = dict[str, Any]


class CodingHttpApp:
    def __init__(self, app: Any, *, token: str | None = None,
                 on_shutdown: Callable[[], None] | None = None,
                 auth_failures: AuthFailures | None = None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.on_shutdown = on_shutdown
        self.auth_failures = auth_failures if auth_failures is not None else AuthFailures()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        if self.token is not None:
            peer = peer_key(scope)
            wait = self.auth_failures.blocked(peer)
            if wait is not None:
                await _refuse(scope, receive, send, 429, b"too many wrong bearer tokens from "
                              b"this address; try again later",
                              [(b"retry-after", b"%d" % max(1, math.ceil(wait)))])
                return
            if not self._authorized(scope):
                self.auth_failures.failed(peer)
                await _refuse(scope, receive, send, 401, b"missing or wrong bearer token",
                              [(b"www-authenticate", b"Bearer")])
                return
        task_id = _task_id(scope)
        if task_id is None:
            await _refuse(scope, receive, send, 400, b"invalid task_id", [])
            return
        reset = current_task.set(task_id)
        try:
            await self.app(scope, receive, send)
        finally:
            current_task.reset(reset)

    def _authorized(self, scope: Scope) -> bool:
        assert self.token is not None
        for name, value in scope.get("headers", []):
            if name == b"authorization" and value[:7].lower() == b"bearer ":
                return hmac.compare_digest(value[7:].strip(), self.token)
        return False

    def shutdown(self) -> None:
        """Called on SIGINT/SIGTERM before uvicorn's graceful shutdown: jobs are stopped
        here, so requests waiting on them end within the grace (`mcpkit serve`'s `finally`
        stops whatever is left once the server returns)."""
        shutdown = getattr(self.app, "shutdown", None)
        if shutdown is not None:
            shutdown()
        if self.on_shutdown is not None:
            self.on_shutdown()


def _task_id(scope: Scope) -> str | None:
    query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
    values = query.get("task_id")
    if not values:
        return DEFAULT_TASK
    return values[0] if valid_task_id(values[0]) else None


async def _refuse(scope: Scope, receive: Any, send: Any, status: int, body: bytes,
                  headers: list[tuple[bytes, bytes]]) -> None:
    if scope["type"] == "websocket":
        await receive()
        await send({"type": "websocket.close", "code": 1008})
        return
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain"), *headers]})
    await send({"type": "http.response.body", "body": body})
