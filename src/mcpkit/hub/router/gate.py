"""`McpGate`: the ASGI middleware in front of the hub's `/mcp` - who is calling, and may they.

1. `Authorization: Bearer <API token>` → the user (`store.tokens.verify`), or a bearer that
   is a JWT → the user of one of the hub's own OAuth access tokens (`AccessTokens.user`:
   signature, issuer, audience = the hub's /mcp URL, expiry, user enabled, its login (`sid`)
   not revoked - re-read at most every `oauth_revocation_check_s`, 10 s).
   An OAuth access token bound to a DPoP key (`cnf.jkt`, issued on a proof at the token
   endpoint) must come as `Authorization: DPoP <token>` with a `DPoP` proof for this request
   (RFC 9449 §7: htm, htu = the hub's public /mcp URL, iat freshness, ath, the bound key, a
   jti never seen before by any replica - `OAuthService.dpop`); as `Bearer` it is refused (no
   downgrade), and so is `DPoP` with an unbound token. Those refusals are 401 with a `DPoP`
   challenge naming the check that failed; a replay cache that cannot answer is 503.
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
from dataclasses import dataclass
from typing import Protocol

from starlette.types import ASGIApp, Receive, Scope, Send

from mcpkit.auth.resource import (
    AuthInfo,
    InvalidToken,
    TokenRequest,
    challenge_header,
    presented_token,
)
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

    async def bound_user(self, token: str) -> tuple[UserRecord, str | None] | None: ...


class ProofCheck(Protocol):
    """The DPoP checks of a request whose token was verified (server.authorization's
    DPoPGuard): InvalidToken when the presentation or the proof is wrong."""

    async def check(self, request: TokenRequest, info: AuthInfo) -> object: ...


@dataclass(frozen=True, slots=True)
class DPoPChecks:
    """How the gate checks DPoP-bound tokens (the hub's OAuthService.dpop)."""

    guard: ProofCheck
    resource_url: str
    """The public /mcp URL: a proof's `htu` must name it (replicas share one)."""
    algorithms: tuple[str, ...]
    """Named in the DPoP challenge (`algs`)."""
    unavailable: tuple[type[Exception], ...] = ()
    """Errors meaning the check could not be made (the shared replay cache is down): 503."""


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

    def forget_user(self, user_id: int) -> None:
        """Drop the user's verified tokens (an admin disabled them): read again next time."""
        for key in [key for key, (_, user) in self._known.items() if user.id == user_id]:
            del self._known[key]


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
        dpop: DPoPChecks | None = None,
    ) -> None:
        """`dpop`: None refuses DPoP-bound tokens (there is no authorization server)."""
        self.app = app
        self.access_tokens = access_tokens
        self.resource_metadata = resource_metadata
        self.challenge = 'Bearer realm="mcpkit-hub"' + (
            f', resource_metadata="{resource_metadata}"' if resource_metadata else "")
        self.dpop = dpop
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
        found = await self._authenticated(scope, peer, send)
        if found is None:
            return
        presented, user, jkt = found
        if self.limiter is not None:
            wait = await self.limiter(user_key(user.id))
            if wait is not None:
                await _refuse(send, 429, "rate limit exceeded; retry later",
                              {"retry-after": str(max(1, math.ceil(wait)))})
                return
        # after the rate limit: a user's proofs reach the replay cache at most at that rate
        if (jkt is not None or presented.scheme == "DPoP") and \
                not await self._proof_holds(presented, user, jkt, peer, send):
            return
        session_id = headers.get("mcp-session-id")
        if session_id and self.revoked is not None and await self.revoked(session_id):
            await _refuse(send, 404, "Session not found", {})
            return
        await self.app({**scope, PRINCIPAL_KEY: str(user.id)}, receive, send)


    async def _authenticated(self, scope: Scope, peer: str, send: Send
                             ) -> tuple[TokenRequest, UserRecord, str | None] | None:
        """What the request presented, the user its token names and the DPoP key the token
        is bound to; None when it was refused (401)."""
        url = self.dpop.resource_url if self.dpop is not None else ""
        try:
            presented = presented_token(scope.get("method", "POST"), url,
                                        _values(scope, b"authorization"), _values(scope, b"dpop"))
        except InvalidToken as malformed:
            self.auth_failures.failed(peer)
            await _refuse(send, 401, malformed.description,
                          {"www-authenticate": self.challenge + ', error="invalid_token"'})
            return None
        caller = await self._caller(presented.token) if presented is not None else None
        if presented is None or caller is None:
            self.auth_failures.failed(peer)
            await _refuse(send, 401, "a token is required: Authorization: Bearer <API token "
                          "or OAuth access token>" if presented is None
                          else "the token is not valid",
                          {"www-authenticate": self.challenge
                           + ("" if presented is None else ', error="invalid_token"')})
            return None
        return presented, *caller

    async def _caller(self, token: str) -> tuple[UserRecord, str | None] | None:
        """The user a token names and the DPoP key it is bound to (API tokens: none)."""
        if token.count(".") == 2 and self.access_tokens is not None:
            return await self.access_tokens.bound_user(token)
        user = await self.tokens.user(token)
        return None if user is None else (user, None)

    async def _proof_holds(self, presented: TokenRequest, user: UserRecord, jkt: str | None,
                           peer: str, send: Send) -> bool:
        """Whether a bound token came as DPoP with a good proof; else refused (401 with a
        DPoP challenge naming the check, or 503 when the replay check cannot be made)."""
        checks = self.dpop
        unavailable_errors = checks.unavailable if checks is not None else ()
        try:
            if checks is None:
                raise InvalidToken("this endpoint takes no DPoP-bound tokens")
            await checks.guard.check(presented, AuthInfo(subject=str(user.id), jkt=jkt))
        except InvalidToken as refused:
            self.auth_failures.failed(peer)
            challenge = challenge_header(
                "DPoP", resource_metadata=self.resource_metadata, error=refused.error,
                description=refused.description,
                algs=checks.algorithms if checks is not None and checks.algorithms else None)
            await _refuse(send, 401, refused.description, {"www-authenticate": challenge})
            return False
        except unavailable_errors as unavailable:
            await _refuse(send, 503, str(unavailable), {"retry-after": "1"})
            return False
        return True


def _values(scope: Scope, name: bytes) -> list[str]:
    """Every value of one request header (a repeated Authorization or DPoP is refused)."""
    return [value.decode("latin-1") for key, value in scope.get("headers", ())
            if key.lower() == name]


async def _refuse(send: Send, status: int, message: str, headers: dict[str, str]) -> None:
    code = -32001 if status in (401, 429) else errors.INVALID_REQUEST
    body = jsonrpc.encode_error(None, errors.McpError(code, message))
    await asgi.respond(send, status, body, content_type="application/json", headers=headers)
