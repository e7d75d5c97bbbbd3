"""`JwtVerifier`: RFC 9068 JWT access tokens, checked against the issuer's published keys.

    verifier = JwtVerifier("https://as.example", "https://mcp.example/mcp")
    info = await verifier.verify(TokenRequest("Bearer", token, "POST", url))

The keys come from `jwks_uri` (given, or read once from the issuer's RFC 8414 / OpenID
metadata) through a `JwksCache`. A verification with a cached key does no IO: header, key
lookup, one signature check, the claim checks, and the DPoP checks when the token is bound."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Collection
from typing import Any

from mcpkit.auth.access_token import (
    DEFAULT_ACCESS_TOKEN_ALGORITHMS,
    DEFAULT_LEEWAY_S,
    AccessTokenPolicy,
    PublicKey,
    access_token_info,
    unverified_header,
    verified_claims,
)
from mcpkit.auth.dpop import DEFAULT_MAX_ACCESS_TOKEN_CHARS
from mcpkit.auth.resource import (
    AuthInfo,
    InvalidToken,
    TokenRequest,
    VerifierUnavailable,
)
from mcpkit.server.authorization.dpop import DPoPGuard
from mcpkit.server.authorization.fetch import AuthServerHttp
from mcpkit.server.authorization.jwks import (
    DEFAULT_JWKS_REFETCH_INTERVAL_S,
    DEFAULT_JWKS_TTL_S,
    DEFAULT_MAX_JWKS_BYTES,
    DEFAULT_MAX_JWKS_KEYS,
    JwksCache,
    log,
)
from mcpkit.server.authorization.metadata import issuer_metadata


class JwtVerifier:
    """A `TokenVerifier` for the JWT access tokens of one issuer, meant for `audience`."""

    def __init__(self, issuer: str, audience: str | Collection[str], *,
                 jwks_uri: str | None = None,
                 leeway_s: float = DEFAULT_LEEWAY_S,
                 algorithms: Collection[str] = DEFAULT_ACCESS_TOKEN_ALGORITHMS,
                 allow_plain_jwt: bool = False,
                 max_token_chars: int = DEFAULT_MAX_ACCESS_TOKEN_CHARS,
                 jwks_ttl_s: float = DEFAULT_JWKS_TTL_S,
                 jwks_refetch_interval_s: float = DEFAULT_JWKS_REFETCH_INTERVAL_S,
                 max_jwks_bytes: int = DEFAULT_MAX_JWKS_BYTES,
                 max_jwks_keys: int = DEFAULT_MAX_JWKS_KEYS,
                 dpop: DPoPGuard | None = None,
                 http: AuthServerHttp | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.policy = AccessTokenPolicy(
            issuer=issuer, audience=audience, leeway_s=leeway_s, algorithms=tuple(algorithms),
            allow_plain_jwt=allow_plain_jwt, max_token_chars=max_token_chars)
        self.dpop = dpop or DPoPGuard()
        self._http = http or AuthServerHttp()
        self._jwks_uri = jwks_uri
        self._jwks: JwksCache | None = None
        self._new_jwks = functools.partial(
            JwksCache, http=self._http, ttl_s=jwks_ttl_s,
            min_refetch_interval_s=jwks_refetch_interval_s, max_bytes=max_jwks_bytes,
            max_keys=max_jwks_keys)
        self._clock = clock
        self._refetch_interval_s = jwks_refetch_interval_s
        self._discovery_failed_at: float | None = None
        self._lock: Any = None  # an anyio.Lock, made in the event loop that first needs it

    async def verify(self, request: TokenRequest) -> AuthInfo:
        header = unverified_header(request.token, self.policy)
        jwks = await self._keys()
        keys = await jwks.keys_for(header.get("kid"), str(header["alg"]))
        claims = self._claims_under_one_of(request.token, keys, header)
        info = access_token_info(header, claims, self.policy, self._clock())
        await self.dpop.check(request, info)
        return info

    @staticmethod
    def _claims_under_one_of(token: str, keys: list[PublicKey],
                             header: dict[str, Any]) -> dict[str, Any]:
        # With a `kid` there is one key; without, each usable key is tried (bounded by the
        # JWKS key limit).
        for key in keys[:-1]:
            try:
                return verified_claims(token, key, header)
            except InvalidToken:
                continue
        return verified_claims(token, keys[-1], header)

    async def _keys(self) -> JwksCache:
        if self._jwks is not None:
            return self._jwks
        if self._lock is None:
            import anyio
            self._lock = anyio.Lock()
        async with self._lock:  # one metadata fetch for all the callers waiting on it
            if self._jwks is None:
                self._jwks = self._new_jwks(self._jwks_uri or await self._discovered_jwks_uri())
        return self._jwks

    async def _discovered_jwks_uri(self) -> str:
        # Rate-limited like the JWKS itself: an AS that is down is asked once per interval.
        now = time.monotonic()
        if self._discovery_failed_at is not None and (
                now - self._discovery_failed_at < self._refetch_interval_s):
            raise VerifierUnavailable("the authorization server's metadata could not be "
                                      "fetched; retrying later")
        try:
            metadata = await issuer_metadata(self.policy.issuer, self._http)
        except VerifierUnavailable as exc:
            self._discovery_failed_at = now
            log.warning("authorization server metadata: %s", exc.description)
            raise
        if metadata.jwks_uri is None:
            self._discovery_failed_at = now
            raise VerifierUnavailable("the authorization server's metadata has no jwks_uri")
        return metadata.jwks_uri

    @property
    def jwks(self) -> JwksCache | None:
        """The key cache, once the first verification made it."""
        return self._jwks
