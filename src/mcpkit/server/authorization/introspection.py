"""`IntrospectionVerifier`: opaque access tokens, checked by asking the authorization server
(RFC 7662) with this resource's client credentials (client_secret_basic), and a short cache.

Cache invariants: keyed by the SHA-256 of the token (a cache dump or a log line never holds a
token); an entry lives `cache_ttl_s` at most and never past the token's `exp`; bounded in
entries and in bytes (the answer's size), the oldest evicted first; refusals are cached too
(an inactive token never becomes active), so a flood of one bad token costs one request.
Concurrent callers with the same token share one request, and at most
`max_concurrent_requests` introspections are in flight at once (the others wait their turn):
a flood of distinct tokens cannot open unbounded connections to the AS."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from mcpkit.auth.access_token import DEFAULT_LEEWAY_S
from mcpkit.auth.client_auth import basic_authorization
from mcpkit.auth.dpop import DEFAULT_MAX_ACCESS_TOKEN_CHARS
from mcpkit.auth.introspection import IntrospectionPolicy, introspection_info
from mcpkit.auth.metadata import MAX_DOCUMENT_BYTES
from mcpkit.auth.resource import (
    AuthInfo,
    InvalidToken,
    TokenRequest,
    VerifierUnavailable,
)
from mcpkit.server.authorization.dpop import DPoPGuard
from mcpkit.server.authorization.fetch import AuthServerHttp

DEFAULT_INTROSPECTION_CACHE_TTL_S = 30.0
"""How long an introspection answer is reused (a revoked token is honoured this long)."""

DEFAULT_INTROSPECTION_CACHE_ENTRIES = 10_000
DEFAULT_INTROSPECTION_CACHE_BYTES = 8 * 1024 * 1024
"""Bounds on the cache: entries, and the memory the decoded answers take (estimated)."""

DEFAULT_MAX_CONCURRENT_INTROSPECTIONS = 16
"""Introspection requests in flight at once, per verifier."""

_DECODED_BYTES_PER_BODY_BYTE = 4
_ENTRY_OVERHEAD_BYTES = 512
# An answer decoded into AuthInfo (a dict of str, the scope set) and its cache slot take about
# 4 times the JSON body plus a fixed part: 1 487 bytes measured (tracemalloc) for a 268-byte answer
# of ten members, estimated 1 584.


@dataclass(frozen=True, slots=True)
class _Entry:
    outcome: AuthInfo | InvalidToken
    until: float
    size: int


class _Flight:
    """One introspection in progress, which callers with the same token wait for."""

    def __init__(self) -> None:
        import anyio
        self.done = anyio.Event()
        self.outcome: AuthInfo | InvalidToken | None = None
        self.error: VerifierUnavailable | None = None


class IntrospectionCache:
    def __init__(self, *, ttl_s: float, max_entries: int, max_bytes: int,
                 clock: Callable[[], float]) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._clock = clock
        self._entries: OrderedDict[bytes, _Entry] = OrderedDict()
        self.bytes = 0

    def get(self, key: bytes) -> AuthInfo | InvalidToken | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry.until <= self._clock():
            self._drop(key)
            return None
        return entry.outcome

    def put(self, key: bytes, outcome: AuthInfo | InvalidToken, body_size: int) -> None:
        until = self._clock() + self._ttl_s
        if isinstance(outcome, AuthInfo) and outcome.expires_at is not None:
            until = min(until, outcome.expires_at)
        size = _DECODED_BYTES_PER_BODY_BYTE * body_size + _ENTRY_OVERHEAD_BYTES
        if until <= self._clock() or size > self._max_bytes:
            return
        if key in self._entries:
            self._drop(key)
        while self._entries and (len(self._entries) >= self._max_entries
                                 or self.bytes + size > self._max_bytes):
            self._drop(next(iter(self._entries)))
        self._entries[key] = _Entry(outcome, until, size)
        self.bytes += size

    def __len__(self) -> int:
        return len(self._entries)

    def _drop(self, key: bytes) -> None:
        self.bytes -= self._entries.pop(key).size


class IntrospectionVerifier:
    """A `TokenVerifier` that asks `endpoint` (RFC 7662) about each token it has not seen
    within the cache TTL."""

    def __init__(self, endpoint: str, client_id: str, client_secret: str,
                 audience: str | Collection[str], *, issuer: str | None = None,
                 leeway_s: float = DEFAULT_LEEWAY_S, require_audience: bool = True,
                 cache_ttl_s: float = DEFAULT_INTROSPECTION_CACHE_TTL_S,
                 cache_entries: int = DEFAULT_INTROSPECTION_CACHE_ENTRIES,
                 cache_bytes: int = DEFAULT_INTROSPECTION_CACHE_BYTES,
                 max_answer_bytes: int = MAX_DOCUMENT_BYTES,
                 max_token_chars: int = DEFAULT_MAX_ACCESS_TOKEN_CHARS,
                 max_concurrent_requests: int = DEFAULT_MAX_CONCURRENT_INTROSPECTIONS,
                 dpop: DPoPGuard | None = None, http: AuthServerHttp | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.endpoint = endpoint
        self._authorization = basic_authorization(client_id, client_secret)
        self.policy = IntrospectionPolicy(
            audience=audience, issuer=issuer, leeway_s=leeway_s,
            require_audience=require_audience, max_bytes=max_answer_bytes)
        self.max_token_chars = max_token_chars
        self.dpop = dpop or DPoPGuard()
        self._http = http or AuthServerHttp(max_bytes=max_answer_bytes)
        self._clock = clock
        self.cache = IntrospectionCache(ttl_s=cache_ttl_s, max_entries=cache_entries,
                                        max_bytes=cache_bytes, clock=clock)
        self.requests = 0
        """How many introspection requests were sent (for tests and metrics)."""
        self._max_concurrent = max_concurrent_requests
        self._limiter: Any = None  # an anyio.CapacityLimiter, made in the serving event loop
        self._in_flight: dict[bytes, _Flight] = {}

    def __repr__(self) -> str:  # the Basic credentials never show
        return f"IntrospectionVerifier(endpoint={self.endpoint!r})"

    async def verify(self, request: TokenRequest) -> AuthInfo:
        if len(request.token) > self.max_token_chars:
            raise InvalidToken(f"the access token is over {self.max_token_chars} characters")
        key = hashlib.sha256(request.token.encode("utf-8", "surrogatepass")).digest()
        outcome = self.cache.get(key) or await self._shared_introspection(request.token, key)
        if isinstance(outcome, InvalidToken):
            raise InvalidToken(outcome.description)
        # The answer may be cached; its expiry is still checked against this moment.
        if outcome.expires_at is not None and self._clock() > (
                outcome.expires_at + self.policy.leeway_s):
            raise InvalidToken("the access token has expired")
        await self.dpop.check(request, outcome)
        return outcome

    async def _shared_introspection(self, token: str, key: bytes) -> AuthInfo | InvalidToken:
        flight = self._in_flight.get(key)
        if flight is not None:  # someone is asking about this token already: wait for it
            await flight.done.wait()
            if flight.error is not None:
                raise VerifierUnavailable(flight.error.description)
            if flight.outcome is None:
                raise VerifierUnavailable("the introspection this request waited for was "
                                          "cancelled")
            return flight.outcome
        flight = self._in_flight[key] = _Flight()
        try:
            flight.outcome = await self._introspect(token, key)
            return flight.outcome
        except VerifierUnavailable as exc:
            flight.error = exc
            raise
        finally:
            del self._in_flight[key]
            flight.done.set()

    async def _introspect(self, token: str, key: bytes) -> AuthInfo | InvalidToken:
        if self._limiter is None:
            import anyio
            self._limiter = anyio.CapacityLimiter(self._max_concurrent)
        async with self._limiter:
            self.requests += 1
            reply = await self._http.post_form(
                self.endpoint, {"token": token, "token_type_hint": "access_token"},
                {"Authorization": self._authorization})
        if reply.status == 400 and reply.oauth_error() in TOKEN_REFUSALS:
            # The AS refuses this token outright (oidc-provider cannot introspect its own JWT
            # access tokens, RFC 7662 §2.2 / RFC 7009 §2.2.1 style): the caller's fault.
            outcome: AuthInfo | InvalidToken = InvalidToken(
                "the authorization server does not introspect this token")
            self.cache.put(key, outcome, len(reply.body))
            return outcome
        if reply.status != 200:
            # Not the token's fault (a misconfigured client, an AS in trouble): not cached.
            raise VerifierUnavailable(f"the introspection endpoint answered {reply.status}")
        try:
            outcome = introspection_info(reply.body, self.policy, self._clock())
        except InvalidToken as refused:
            outcome = refused
        self.cache.put(key, outcome, len(reply.body))
        return outcome


TOKEN_REFUSALS = frozenset({"unsupported_token_type", "invalid_token"})
"""OAuth error codes of a 400 from the introspection endpoint that are about the token, not
about this server's request or the AS's health."""

