"""`McpGate`: the ASGI middleware in front of the hub's `/mcp` - who is calling, and may they.

1. `Authorization: Bearer <API token>` → the user (`store.tokens.verify`), else 401 with
   `WWW-Authenticate: Bearer` and a JSON-RPC error body. The user id goes into the scope as
   the MCP app's principal: handlers see only that user's upstreams, and a legacy session
   opened by one user is "not found" for every other. The token itself goes no further:
   nothing of it reaches an upstream or a log.
   Before the token is looked at, the client address's budget of wrong tokens
   (`AuthFailures`, shared with the REST API) → 429 with `Retry-After` once it is spent.
2. The user's rate limit (`context.limiter`, shared through Redis by replicas) → 429 with
   `Retry-After`.
3. A sealed session id that was ended at another replica is refused (404) before the app
   would rebuild it.

Verified tokens are remembered for `token_ttl_s` (a sha256-keyed cache): a revoked token or
a disabled user stops working within that time, and a call does not cost a database read.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable

from starlette.types import ASGIApp, Receive, Scope, Send

from mcpkit.hub.crypto import hash_token
from mcpkit.hub.ratelimit import user_key
from mcpkit.hub.store import Store, UserRecord
from mcpkit.protocol import errors, jsonrpc
from mcpkit.transports.server.http import asgi
from mcpkit.transports.server.http.app import PRINCIPAL_KEY
from mcpkit.transports.server.http.auth_failures import AuthFailures
from mcpkit.transports.server.http.peers import peer_key

log = logging.getLogger(__name__)

DEFAULT_TOKEN_TTL_S = 10.0
MAX_CACHED_TOKENS = 10_000
Limiter = Callable[[str], Awaitable[float | None]]
RevocationCheck = Callable[[str], Awaitable[bool]]


class TokenCache:
    def __init__(self, store: Store, ttl_s: float = DEFAULT_TOKEN_TTL_S) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._known: dict[str, tuple[float, UserRecord]] = {}

    async def user(self, token: str) -> UserRecord | None:
        key = hash_token(token)
        now = time.monotonic()
        cached = self._known.get(key)
        if cached is not None and now - cached[0] < self._ttl_s:
            return cached[1]
        user = await self._store.tokens.verify(token)
        if user is None:
            self._known.pop(key, None)
            return None
        if len(self._known) >= MAX_CACHED_TOKENS:
            self._known.clear()
        self._known[key] = (now, user)
        return user


class McpGate:
    def __init__(
        self,
        app: ASGIApp,
        tokens: TokenCache,
        *,
        limiter: Limiter | None = None,
        revoked: RevocationCheck | None = None,
        auth_failures: AuthFailures | None = None,
    ) -> None:
        self.app = app
        self.tokens = tokens
        self.auth_failures = auth_failures if auth_failures is not None else AuthFailures()
        self.limiter = limiter
        self.revoked = revoked

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = asgi.header_map(scope)
        peer = peer_key(scope)
        wait = self.auth_failures.blocked(peer)
        if wait is not None:
            await _refuse(send, 429, "too many requests with a missing or wrong API token "
                          "from this address; retry later",
                          {"retry-after": str(max(1, math.ceil(wait)))})
            return
        token = _bearer(headers.get("authorization", ""))
        user = await self.tokens.user(token) if token else None
        if user is None:
            self.auth_failures.failed(peer)
            await _refuse(send, 401, "an API token is required: Authorization: Bearer <token>"
                          if not token else "the API token is not valid", {
                              "www-authenticate": 'Bearer realm="mcpkit-hub"'
                              + ("" if not token else ', error="invalid_token"')})
            return
        if self.limiter is not None:
            wait = await self.limiter(user_key(user.id))
            if wait is not None:
                await _refuse(send, 429, "rate limit exceeded; retry later",
                              {"retry-after": str(max(1, math.ceil(wait)))})
                return
        session_id = headers.get("mcp-session-id")
        if session_id and self.revoked is not None and await self.revoked(session_id):
            await _refuse(send, 404, "Session not found", {})
            return
        await self.app({**scope, PRINCIPAL_KEY: str(user.id)}, receive, send)


def _bearer(value: str) -> str:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def _refuse(send: Send, status: int, message: str, headers: dict[str, str]) -> None:
    code = -32001 if status in (401, 429) else errors.INVALID_REQUEST
    body = jsonrpc.encode_error(None, errors.McpError(code, message))
    await asgi.respond(send, status, body, content_type="application/json", headers=headers)
