"""Tokens and where they are kept.

`TokenSet` holds what a token endpoint returned; its repr and str mask every secret.
`TokenStore` is the interface of token storage, keyed by `TokenKey` (resource + issuer +
client id, so entries of different servers or authorization servers never mix);
`MemoryTokenStore` is the in-process one (persistent stores come later)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.metadata import MAX_DOCUMENT_BYTES

REFRESH_MARGIN_S = 30.0
"""Default: refresh this long before the access token expires."""


def mask(secret: str | None) -> str:
    return "None" if secret is None else "'***'"


@dataclass(frozen=True, slots=True, repr=False)
class TokenSet:
    access_token: str
    token_type: str = "Bearer"
    refresh_token: str | None = None
    expires_at: float | None = None
    """Wall-clock time (time.time()) the access token expires; None: not said."""
    scope: str | None = None

    def expiring(self, margin_s: float = REFRESH_MARGIN_S, now: float | None = None) -> bool:
        if self.expires_at is None:
            return False
        return (time.time() if now is None else now) >= self.expires_at - margin_s

    def __repr__(self) -> str:
        return (f"TokenSet(access_token={mask(self.access_token)}, token_type={self.token_type!r}"
                f", refresh_token={mask(self.refresh_token)}, expires_at={self.expires_at!r}"
                f", scope={self.scope!r})")

    __str__ = __repr__


class _TokenResponse(msgspec.Struct):
    access_token: str
    token_type: str
    expires_in: int | float | None = None
    refresh_token: str | None = None
    scope: str | None = None


def parse_token_response(body: bytes, *, max_bytes: int = MAX_DOCUMENT_BYTES,
                         previous_refresh: str | None = None,
                         now: float | None = None, dpop: bool = False) -> TokenSet:
    """A successful token response (RFC 6749 §5.1) as a `TokenSet`. A response without a
    refresh token keeps `previous_refresh` (RFC 6749 §6: the old one stays valid unless
    rotated). `token_type` must be `Bearer`, or `DPoP` when the request carried a DPoP proof
    (`dpop`; RFC 9449 §5): a token of a type the client cannot present is refused. Errors
    name the fault, never the body."""
    if len(body) > max_bytes:
        raise AuthorizationError(f"the token response is over the {max_bytes}-byte limit")
    try:
        doc = msgspec.json.decode(body, type=_TokenResponse)
    except msgspec.ValidationError as exc:
        raise AuthorizationError(f"the token response is invalid: {exc}") from None
    except msgspec.DecodeError:
        raise AuthorizationError("the token response is not a JSON object") from None
    token_type = _token_type(doc.token_type, dpop)
    if not doc.access_token:
        raise AuthorizationError("the token response has an empty access_token")
    expires_at = None
    if doc.expires_in is not None:
        expires_at = (time.time() if now is None else now) + float(doc.expires_in)
    return TokenSet(access_token=doc.access_token, token_type=token_type,
                    refresh_token=doc.refresh_token or previous_refresh,
                    expires_at=expires_at, scope=doc.scope)


def _token_type(token_type: str, dpop: bool) -> str:
    """The canonical spelling of a token type the client can present (RFC 6749 §7.1: token
    types compare case-insensitively)."""
    kind = token_type.lower()
    if kind == "bearer":
        return "Bearer"
    if kind == "dpop" and dpop:
        return "DPoP"
    shown = token_type if len(token_type) <= 40 and token_type.isprintable() else "(unprintable)"
    supported = "Bearer or DPoP" if dpop else "Bearer"
    raise AuthorizationError(f"the token type {shown!r} is not supported ({supported})")


def oauth_error_code(body: bytes) -> str | None:
    """The `error` code of an OAuth error body (RFC 6749 §5.2), if it has one and it is made
    of the characters the RFC allows (so it is safe to show); else None."""
    try:
        doc = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return None
    error = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(error, str) and 0 < len(error) <= 64 and all(
            0x20 <= ord(ch) <= 0x7E and ch not in '"\\' for ch in error):
        return error
    return None


@dataclass(frozen=True, slots=True)
class TokenKey:
    resource: str
    issuer: str
    client_id: str


class TokenStore(Protocol):
    async def get(self, key: TokenKey) -> TokenSet | None: ...
    async def put(self, key: TokenKey, tokens: TokenSet) -> None: ...
    async def delete(self, key: TokenKey) -> None: ...


@dataclass(slots=True)
class MemoryTokenStore:
    """Tokens for the life of this process."""

    _entries: dict[TokenKey, TokenSet] = field(default_factory=dict)

    async def get(self, key: TokenKey) -> TokenSet | None:
        return self._entries.get(key)

    async def put(self, key: TokenKey, tokens: TokenSet) -> None:
        self._entries[key] = tokens

    async def delete(self, key: TokenKey) -> None:
        self._entries.pop(key, None)


@dataclass(frozen=True, slots=True, repr=False)
class ClientRegistration:
    """A client's identity at one authorization server (configured, CIMD or DCR)."""

    client_id: str
    client_secret: str | None = None
    auth_method: str = "none"
    source: str = "configured"
    """"configured", "cimd" or "dcr" (only a DCR registration is redone on invalid_client)."""

    def __repr__(self) -> str:
        return (f"ClientRegistration(client_id={self.client_id!r}, client_secret="
                f"{mask(self.client_secret)}, auth_method={self.auth_method!r}, "
                f"source={self.source!r})")


@dataclass(slots=True)
class MemoryRegistrationStore:
    """DCR registrations for the life of this process, keyed by (issuer, redirect URI)."""

    _entries: dict[tuple[str, str], ClientRegistration] = field(default_factory=dict)

    async def get(self, issuer: str, redirect_uri: str) -> ClientRegistration | None:
        return self._entries.get((issuer, redirect_uri))

    async def put(self, issuer: str, redirect_uri: str, reg: ClientRegistration) -> None:
        self._entries[(issuer, redirect_uri)] = reg

    async def delete(self, issuer: str, redirect_uri: str) -> None:
        self._entries.pop((issuer, redirect_uri), None)
