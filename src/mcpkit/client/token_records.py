"""What a persistent token store keeps, and its JSON form.

    StoredGrant      one login: the tokens for (resource, issuer, client id) and what a new
                     process needs to refresh them with no discovery and no 401 first - the
                     authorization server's metadata (token endpoint), the client registration
                     (a DCR secret too), the scopes
                     - and for DPoP-bound tokens (RFC 9449) the private key they are bound
                     to, without which they cannot be presented or refreshed
    registration     a client registration at one issuer for one redirect URI (DCR, reused)

Each record is one JSON object (`encode_*`); decoding is strict and bounded, and its errors
name the record, never a value (a value may be a token). Record names (`grant_name`,
`registration_name`) are hashes of the key, so they hold no secret and fit any keyring."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Annotated, TypeVar

import msgspec

from mcpkit.auth.metadata import (
    MAX_DOCUMENT_BYTES,
    AuthorizationServerMetadata,
    decode_document,
)
from mcpkit.auth.tokens import ClientRegistration, TokenKey, TokenSet, mask
from mcpkit.errors import UsageError

MAX_RECORD_BYTES = 256 * 1024
"""Bound on one stored record (a grant with its metadata document is a few KiB)."""

T = TypeVar("T")

Text = Annotated[str, msgspec.Meta(max_length=MAX_DOCUMENT_BYTES)]
"""A stored string: up to what a token response may be (so whatever was accepted fits)."""


class TokenStoreError(UsageError):
    """The token store cannot be used as it is: a corrupt or foreign file, loose permissions,
    a keyring that refuses. The message names the place and the fault, never a secret."""


@dataclass(frozen=True, slots=True, repr=False)
class StoredGrant:
    """One kept login (see the module docstring). `metadata`/`client` are None for tokens put
    with a bare `TokenStore.put` (they can be used until they expire, not refreshed)."""

    key: TokenKey
    tokens: TokenSet
    scopes: tuple[str, ...] = ()
    metadata: AuthorizationServerMetadata | None = None
    client: ClientRegistration | None = None
    dpop_key: str | None = None
    """PEM of the DPoP private key the tokens are bound to (None: not DPoP-bound)."""

    @property
    def resource(self) -> str:
        return self.key.resource

    @property
    def issuer(self) -> str:
        return self.key.issuer

    @property
    def client_id(self) -> str:
        return self.key.client_id

    @property
    def token_endpoint(self) -> str | None:
        return self.metadata.token_endpoint if self.metadata is not None else None

    def summary(self) -> dict[str, object]:
        """What `auth status` shows (and its --json prints): no secret, only whether there is
        a refresh token and whether the tokens are DPoP-bound."""
        return {
            "resource": self.resource, "issuer": self.issuer, "client_id": self.client_id,
            "scopes": list(self.scopes), "token_type": self.tokens.token_type,
            "expires_at": self.tokens.expires_at,
            "refresh_token": self.tokens.refresh_token is not None,
            "dpop_bound": self.dpop_key is not None, "token_endpoint": self.token_endpoint,
            "client_source": self.client.source if self.client is not None else None,
        }

    def __repr__(self) -> str:
        return (f"StoredGrant(resource={self.resource!r}, issuer={self.issuer!r}, "
                f"client_id={self.client_id!r}, scopes={list(self.scopes)!r}, "
                f"tokens={self.tokens!r}, client={self.client!r}, "
                f"dpop_key={mask(self.dpop_key)})")


class _Tokens(msgspec.Struct):
    access_token: Text
    token_type: Text = "Bearer"
    refresh_token: Text | None = None
    expires_at: float | None = None
    scope: Text | None = None


class _Client(msgspec.Struct):
    client_id: Text
    client_secret: Text | None = None
    auth_method: Text = "none"
    source: Text = "configured"


class _Grant(msgspec.Struct):
    resource: Text
    issuer: Text
    client_id: Text
    tokens: _Tokens
    scopes: list[Text] = []
    metadata: AuthorizationServerMetadata | None = None
    client: _Client | None = None
    dpop_key: Text | None = None


class _Registration(msgspec.Struct):
    issuer: Text
    redirect_uri: Text
    client: _Client


def _name(kind: str, *parts: str) -> str:
    digest = hashlib.sha256(msgspec.json.encode(list(parts))).hexdigest()[:40]
    return f"{kind}-{digest}"


def grant_name(key: TokenKey) -> str:
    return _name("grant", key.resource, key.issuer, key.client_id)


def registration_name(issuer: str, redirect_uri: str) -> str:
    return _name("registration", issuer, redirect_uri)


def is_grant_name(name: str) -> bool:
    return name.startswith("grant-")


def _client_record(client: ClientRegistration) -> _Client:
    return _Client(client.client_id, client.client_secret, client.auth_method, client.source)


def _client(record: _Client) -> ClientRegistration:
    return ClientRegistration(record.client_id, record.client_secret, record.auth_method,
                              record.source)


def encode_grant(grant: StoredGrant) -> bytes:
    t = grant.tokens
    return msgspec.json.encode(_Grant(
        grant.resource, grant.issuer, grant.client_id,
        _Tokens(t.access_token, t.token_type, t.refresh_token, t.expires_at, t.scope),
        list(grant.scopes), grant.metadata,
        _client_record(grant.client) if grant.client is not None else None, grant.dpop_key))


def decode_grant(data: bytes, where: str) -> StoredGrant:
    record = _decode(data, _Grant, where)
    t = record.tokens
    return StoredGrant(
        TokenKey(record.resource, record.issuer, record.client_id),
        TokenSet(t.access_token, t.token_type, t.refresh_token, t.expires_at, t.scope),
        tuple(record.scopes), record.metadata,
        _client(record.client) if record.client is not None else None, record.dpop_key)


def encode_registration(issuer: str, redirect_uri: str, client: ClientRegistration) -> bytes:
    return msgspec.json.encode(_Registration(issuer, redirect_uri, _client_record(client)))


def decode_registration(data: bytes, where: str) -> tuple[str, str, ClientRegistration]:
    record = _decode(data, _Registration, where)
    return record.issuer, record.redirect_uri, _client(record.client)


def _decode(data: bytes, kind: type[T], where: str) -> T:
    return decode_document(data, kind, where, MAX_RECORD_BYTES, error=TokenStoreError)

