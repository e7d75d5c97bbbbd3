"""The resource server's side of MCP authorization: what a verified token says, what a
verifier is asked, and how it refuses. No IO here (the verifiers that fetch JWKS or
introspect live in `mcpkit.server.authorization`; the HTTP gate in the server transports).

    AuthInfo        who is calling: subject, client id, scopes, claims, expiry, DPoP binding
    TokenRequest    what a request presented: the scheme, the token, a DPoP proof, where to
    TokenVerifier   `await verifier.verify(request) -> AuthInfo`, or one of the errors below
    InvalidToken    401 error="invalid_token" (expired, wrong audience, bad signature, …)
    DPoPNonceRequired  401 error="use_dpop_nonce" with the nonce to send (RFC 9449 §9)"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from mcpkit.auth.errors import AuthorizationError

Scheme = Literal["Bearer", "DPoP"]


@dataclass(frozen=True, slots=True)
class AuthInfo:
    """A verified caller, as handlers see it in `ctx.auth`."""

    subject: str
    client_id: str | None = None
    scopes: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)
    """The token's claims (a JWT's payload, an introspection answer); never the token."""
    expires_at: float | None = None
    jkt: str | None = None
    """The JWK thumbprint a DPoP-bound token is bound to (`cnf.jkt`); None for Bearer."""


@dataclass(frozen=True, slots=True, repr=False)
class TokenRequest:
    """What one HTTP request presented for verification."""

    scheme: Scheme
    token: str
    method: str
    url: str
    """The request's URL as the client addressed it (the DPoP `htu` is checked against it)."""
    dpop_proof: str | None = None

    def __repr__(self) -> str:
        return (f"TokenRequest(scheme={self.scheme!r}, token='***', method={self.method!r}, "
                f"url={self.url!r}, dpop_proof={'***' if self.dpop_proof else None})")


class TokenVerifier(Protocol):
    async def verify(self, request: TokenRequest) -> AuthInfo:
        """The caller the token names, or InvalidToken / DPoPNonceRequired."""
        ...


class InvalidToken(AuthorizationError):
    """The token cannot be accepted: 401 with error="invalid_token". `description` is safe to
    send back (it names the check that failed, never the token)."""

    def __init__(self, description: str) -> None:
        super().__init__(description)
        self.description = description


class DPoPNonceRequired(AuthorizationError):
    """The DPoP proof must carry the server's nonce: 401 with error="use_dpop_nonce" and a
    `DPoP-Nonce: <nonce>` header (RFC 9449 §9)."""

    def __init__(self, nonce: str) -> None:
        super().__init__("a DPoP proof with the server's nonce is required")
        self.nonce = nonce
