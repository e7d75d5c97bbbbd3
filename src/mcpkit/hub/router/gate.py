"""`McpGate`: the ASGI middleware in front of the hub's `/mcp` - who is calling, and may they.

1. `Authorization: Bearer <API token>` → the user (`store.tokens.verify`), or a bearer that
   is a JWT → the user of one of the hub's own OAuth access tokens (`AccessTokens.user`:
   signature, issuer, audience = the hub's /mcp URL, expiry, user enabled, its login (`sid`)
   not revoked - re-read at most every `oauth_revocation_check_s`, 10 s).
   The principal is the same user id either way. Else 401 with `WWW-Authenticate: Bearer
   realm=…, resource_metadata="…/.well-known/oauth-protected-resource/mcp"` (RFC 9728: how
   an MCP client finds the hub's authorization server) and a JSON-RPC error body. A token
   is routed by its shape (an API token has no dots, a JWT two), so neither kind costs the
   other's lookup. The user id goes into the scope as
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
from typing import Protocol

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


class AccessTokenCheck(Protocol):
    """The hub's OAuth access tokens (mcpkit.hub.oauth.keys.AccessTokens)."""

    async def user(self, token: str) -> UserRecord | None: ...


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
        access_tokens: AccessTokenCheck | None = None,
        resource_metadata: str | None = None,
    ) -> None:
        self.app = app
        self.access_tokens = access_tokens
        self.challenge = 'Bearer realm="mcpkit-hub"' + (
            f', resource_metadata="{resource_metadata}"' if resource_metadata else "")
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
        user = await self._user(token) if token else None
        if user is None:
            self.auth_failures.failed(peer)
            await _refuse(send, 401, "a token is required: Authorization: Bearer <API token "
                          "or OAuth access token>" if not token else "the token is not valid",
                          {"www-authenticate": self.challenge
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


    async def _user(self, token: str) -> UserRecord | None:
        if token.count(".") == 2 and self.access_tokens is not None:
            return await self.access_tokens.user(token)
        return await self.tokens.user(token)


def _bearer(value: str) -> str:
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


async def _refuse(send: Send, status: int, message: str, headers: dict[str, str]) -> None:
    code = -32001 if status in (401, 429) else errors.INVALID_REQUEST
    body = jsonrpc.encode_error(None, errors.McpError(code, message))
    await asgi.respond(send, status, body, content_type="application/json", headers=headers)
