"""Resource-server token checks with IO: the verifiers a protected server's HTTP gate asks
(`mcpkit.auth.resource.TokenVerifier`). Not imported by `mcpkit.server`; aiohttp and anyio
load when a verifier first talks to its authorization server.

    JwtVerifier            RFC 9068 JWTs against the issuer's JWKS (jwt_verifier, jwks)
    IntrospectionVerifier  opaque tokens by RFC 7662 introspection, with a short cache
    discover_verifier      the verifier the issuer's metadata calls for (discovery, metadata)
    DPoPGuard              DPoP proofs: presentation, proof, nonces, replay (dpop)
    AuthServerHttp         the bounded HTTP exchanges with the AS (fetch)

The pure checks they run are `mcpkit.auth.access_token`, `.introspection`, `.dpop_proof`."""

from mcpkit.server.authorization.discovery import discover_verifier
from mcpkit.server.authorization.dpop import (
    DEFAULT_NONCE_ROTATION_S,
    DEFAULT_REPLAY_CACHE_BYTES,
    DPoPGuard,
    DPoPNonces,
    MemoryReplayCache,
    ReplayCache,
    ReplayCacheFull,
)
from mcpkit.server.authorization.fetch import DEFAULT_FETCH_TIMEOUT_S, AuthServerHttp
from mcpkit.server.authorization.introspection import (
    DEFAULT_INTROSPECTION_CACHE_BYTES,
    DEFAULT_INTROSPECTION_CACHE_ENTRIES,
    DEFAULT_INTROSPECTION_CACHE_TTL_S,
    DEFAULT_MAX_CONCURRENT_INTROSPECTIONS,
    IntrospectionVerifier,
)
from mcpkit.server.authorization.jwks import (
    DEFAULT_JWKS_REFETCH_INTERVAL_S,
    DEFAULT_JWKS_TTL_S,
    DEFAULT_MAX_JWKS_BYTES,
    DEFAULT_MAX_JWKS_KEYS,
    JwksCache,
)
from mcpkit.server.authorization.jwt_verifier import JwtVerifier

__all__ = [
    "DEFAULT_FETCH_TIMEOUT_S",
    "DEFAULT_INTROSPECTION_CACHE_BYTES",
    "DEFAULT_INTROSPECTION_CACHE_ENTRIES",
    "DEFAULT_INTROSPECTION_CACHE_TTL_S",
    "DEFAULT_JWKS_REFETCH_INTERVAL_S",
    "DEFAULT_JWKS_TTL_S",
    "DEFAULT_MAX_CONCURRENT_INTROSPECTIONS",
    "DEFAULT_MAX_JWKS_BYTES",
    "DEFAULT_MAX_JWKS_KEYS",
    "DEFAULT_NONCE_ROTATION_S",
    "DEFAULT_REPLAY_CACHE_BYTES",
    "AuthServerHttp",
    "DPoPGuard",
    "DPoPNonces",
    "IntrospectionVerifier",
    "JwksCache",
    "JwtVerifier",
    "MemoryReplayCache",
    "ReplayCache",
    "ReplayCacheFull",
    "discover_verifier",
]
