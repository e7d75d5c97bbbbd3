"""The hub's registry schema: SQLAlchemy 2.0 typed declarative models.

Tables (every foreign key to a user or an upstream cascades on delete):

    users                 who may call the hub (`name` is a unique slug)
    api_tokens            a user's bearer tokens, stored as the sha256 of the secret
    upstreams             a user's registered MCP servers; `name` is unique per user
    upstream_tools        the stored catalog of an upstream, one row per wire object,
    upstream_prompts        in the order the upstream listed them (`position`)
    upstream_resources
    upstream_resource_templates
    audit_events          one row per tool call: who, where, how long, outcome (never arguments)
    oauth_clients         OAuth clients registered by DCR (RFC 7591): public, redirect URIs
    oauth_codes           authorization codes, stored as sha256, single use (hub/oauth/)
    oauth_consents        which scopes a user granted a client (a second login skips consent)
    oauth_refresh_tokens  refresh tokens as sha256, one family per login, rotated on use,
                          bound to a DPoP key when the login began with a proof
    oauth_signing_keys    the hub's access-token signing keys (private JWK, sealed)
    upstream_logins       a user's OAuth login to one of their upstreams (the grant, sealed)
    upstream_login_states the pending starts of such logins, by the sha256 of their `state`
    oidc_identities       (issuer, subject) at an OpenID Connect provider -> a hub user, and
                          the identity's latest provider tokens (sealed)

Portability: JSON columns are the generic `JSON` type (`json` on PostgreSQL, text on SQLite);
enumerations are short strings with named CHECK constraints (no PostgreSQL ENUM types to
migrate); timestamps are `UTCDateTime`, timezone-aware UTC on both databases.

Ids: users, tokens and audit rows use integer keys (internal, or admin-facing where a short
number is handy: `mcpkit hub token revoke 3`). An upstream's id is a random uuid4 string: it is
an opaque REST id, reveals neither how many upstreams exist nor when one was made, cannot be
guessed from a neighbour's, and is known before the row is written.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from mcpkit.errors import InvalidArgument

TRANSPORTS = ("http", "sse", "ws", "stdio")
HEALTH_STATUSES = ("unknown", "healthy", "unhealthy", "needs_auth")
AUTH_MODES = ("static", "oauth", "token_exchange")
"""How the hub authenticates to an upstream: its stored headers and bearer ("static"), its
owner's own OAuth login ("oauth", hub/upstream_auth.py), or its owner's identity at the hub's
OpenID Connect provider exchanged for an upstream token ("token_exchange", RFC 8693,
hub/upstream_token_exchange.py)."""
AUDIT_OUTCOMES = ("ok", "tool_error", "error", "denied", "timeout")

NAME_LENGTH = 63  # `^[a-z0-9][a-z0-9_-]{0,62}$`
UPSTREAM_ID_LENGTH = 36  # str(uuid4())

# Deterministic constraint names, so migrations can refer to them on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """The current time, timezone-aware UTC (the only kind of time the hub stores)."""
    return datetime.now(UTC)


def new_upstream_id() -> str:
    return str(uuid.uuid4())


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on every database.

    PostgreSQL stores `timestamp with time zone`; SQLite has no time zone, so values are written
    as UTC and read back with `tzinfo=UTC`. A naive datetime is refused rather than guessed at.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise InvalidArgument("naive datetime: the hub stores timezone-aware UTC times only")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def _one_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime()}  # noqa: RUF012 (SQLAlchemy's hook)


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    disabled: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # argon2id PHC string (mcpkit.hub.passwords); None: the user cannot sign in with a password
    password_hash: Mapped[str | None] = mapped_column(Text)


class ApiToken(Base):
    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(100))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of the secret
    prefix: Mapped[str] = mapped_column(String(16))  # the first characters, for display
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_used_at: Mapped[datetime | None]
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class Upstream(Base):
    __tablename__ = "upstreams"
    __table_args__ = (
        UniqueConstraint("user_id", "name"),
        CheckConstraint(_one_of("transport", TRANSPORTS), name="transport"),
        CheckConstraint(_one_of("health_status", HEALTH_STATUSES), name="health_status"),
        CheckConstraint(_one_of("auth_mode", AUTH_MODES), name="auth_mode"),
    )

    id: Mapped[str] = mapped_column(
        String(UPSTREAM_ID_LENGTH), primary_key=True, default=new_upstream_id
    )
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    transport: Mapped[str] = mapped_column(String(8))
    url: Mapped[str | None] = mapped_column(Text)
    # argv of a stdio upstream (a list of strings); only when the operator enables stdio
    command: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))
    # Fernet tokens (see mcpkit.hub.crypto): a JSON object of header values, a bearer string
    headers_encrypted: Mapped[str | None] = mapped_column(Text)
    bearer_encrypted: Mapped[str | None] = mapped_column(Text)
    # the same for catalog fetches and health checks, when they differ from the calls' (0011)
    catalog_headers_encrypted: Mapped[str | None] = mapped_column(Text)
    catalog_bearer_encrypted: Mapped[str | None] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    enabled_tools: Mapped[list[str] | None] = mapped_column(JSON(none_as_null=True))  # None: all
    disabled_tools: Mapped[list[str]] = mapped_column(JSON, default=list)
    connect_timeout_s: Mapped[float] = mapped_column(Float)
    call_timeout_s: Mapped[float] = mapped_column(Float)
    health_status: Mapped[str] = mapped_column(String(16), default="unknown")
    last_error: Mapped[str | None] = mapped_column(Text)
    last_checked_at: Mapped[datetime | None]
    tool_count: Mapped[int] = mapped_column(Integer, default=0)
    catalog_updated_at: Mapped[datetime | None]
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    # bumped by every change of the user's configuration (not by health or catalog updates)
    version: Mapped[int] = mapped_column(Integer, default=1)
    auth_mode: Mapped[str] = mapped_column(String(16), default="static",
                                           server_default="static")


class _CatalogEntry:
    """Columns shared by the catalog tables: one wire object of an upstream's list."""

    upstream_id: Mapped[str] = mapped_column(
        ForeignKey("upstreams.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    definition: Mapped[dict[str, Any]] = mapped_column(JSON)  # the object as the upstream sent it


class UpstreamTool(_CatalogEntry, Base):
    __tablename__ = "upstream_tools"
    __table_args__ = (Index("ix_upstream_tools_upstream_id_name", "upstream_id", "name"),)

    name: Mapped[str] = mapped_column(Text)


class UpstreamPrompt(_CatalogEntry, Base):
    __tablename__ = "upstream_prompts"

    name: Mapped[str] = mapped_column(Text)


class UpstreamResource(_CatalogEntry, Base):
    __tablename__ = "upstream_resources"

    uri: Mapped[str] = mapped_column(Text)


class UpstreamResourceTemplate(_CatalogEntry, Base):
    __tablename__ = "upstream_resource_templates"

    uri_template: Mapped[str] = mapped_column(Text)


class AuditEvent(Base):
    """One tool call through the hub. Deliberately has no column for arguments or results.

    Not foreign keys: the audit trail outlives the users and upstreams it mentions.
    """

    __tablename__ = "audit_events"
    __table_args__ = (
        Index("ix_audit_events_user_id_at", "user_id", "at"),
        CheckConstraint(_one_of("outcome", AUDIT_OUTCOMES), name="outcome"),
    )

    id: Mapped[int] = mapped_column(
        BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
    )
    at: Mapped[datetime] = mapped_column(default=utcnow)
    user_id: Mapped[int] = mapped_column(Integer)
    upstream_id: Mapped[str | None] = mapped_column(String(UPSTREAM_ID_LENGTH))
    upstream_name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    tool: Mapped[str] = mapped_column(Text)
    duration_ms: Mapped[float] = mapped_column(Float)
    outcome: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text)


OAUTH_CLIENT_ID_LENGTH = 64
HASH_LENGTH = 64  # sha256 hex
JKT_LENGTH = 128  # an RFC 7638 SHA-256 thumbprint is 43 characters


class OAuthClient(Base):
    """A client registered by DCR. Public (token_endpoint_auth_method "none") with PKCE."""

    __tablename__ = "oauth_clients"

    client_id: Mapped[str] = mapped_column(String(OAUTH_CLIENT_ID_LENGTH), primary_key=True)
    client_name: Mapped[str | None] = mapped_column(Text)
    redirect_uris: Mapped[list[str]] = mapped_column(JSON)
    application_type: Mapped[str] = mapped_column(String(8))
    grant_types: Mapped[list[str]] = mapped_column(JSON)
    token_endpoint_auth_method: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


def _client_fk() -> Any:
    return ForeignKey("oauth_clients.client_id", ondelete="CASCADE")


class OAuthCode(Base):
    __tablename__ = "oauth_codes"

    code_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), primary_key=True)
    client_id: Mapped[str] = mapped_column(_client_fk(), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    redirect_uri: Mapped[str] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(Text)
    resource: Mapped[str] = mapped_column(Text)
    code_challenge: Mapped[str] = mapped_column(String(128))
    code_challenge_method: Mapped[str] = mapped_column(String(8))
    family_id: Mapped[str] = mapped_column(String(HASH_LENGTH))  # the refresh family it starts
    # RFC 9449 §10: the DPoP key the token request must prove (the request's dpop_jkt)
    dpop_jkt: Mapped[str | None] = mapped_column(String(JKT_LENGTH))
    expires_at: Mapped[datetime] = mapped_column(index=True)  # the purge
    used_at: Mapped[datetime | None]


class OAuthConsent(Base):
    __tablename__ = "oauth_consents"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    client_id: Mapped[str] = mapped_column(_client_fk(), primary_key=True)
    scope: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class OAuthRefreshToken(Base):
    __tablename__ = "oauth_refresh_tokens"

    token_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), primary_key=True)
    family_id: Mapped[str] = mapped_column(String(HASH_LENGTH), index=True)
    client_id: Mapped[str] = mapped_column(_client_fk(), index=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    scope: Mapped[str] = mapped_column(Text)
    resource: Mapped[str] = mapped_column(Text)
    # RFC 9449 §5: the thumbprint of the DPoP key the token is bound to (None: bearer)
    dpop_jkt: Mapped[str | None] = mapped_column(String(JKT_LENGTH))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(index=True)  # the purge
    used_at: Mapped[datetime | None]  # rotated: presenting it again is reuse
    revoked_at: Mapped[datetime | None]


class OAuthSigningKey(Base):
    __tablename__ = "oauth_signing_keys"

    kid: Mapped[str] = mapped_column(String(HASH_LENGTH), primary_key=True)
    private_jwk_sealed: Mapped[str] = mapped_column(Text)  # SecretBox-sealed JSON JWK
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    # 1, 2, ...: the highest signs. Unique, so of replicas rotating at once only one adds
    # the next generation (hub/oauth/keys.py).
    generation: Mapped[int] = mapped_column(unique=True)


def _upstream_fk() -> Any:
    return ForeignKey("upstreams.id", ondelete="CASCADE")


class UpstreamLogin(Base):
    """A user's OAuth login to their upstream: the grant (tokens, the authorization server's
    metadata, the client registration, resource, scopes) as one SecretBox-sealed JSON record.
    Keyed by (user, upstream) and read only by both: never another user's."""

    __tablename__ = "upstream_logins"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True)
    upstream_id: Mapped[str] = mapped_column(_upstream_fk(), primary_key=True, index=True)
    grant_sealed: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class UpstreamLoginState(Base):
    """A login started and not yet finished: single use, expiring, bound to the user and the
    upstream that started it. What the callback needs (PKCE verifier, metadata, client,
    resource, scopes) is sealed; the key is the sha256 of `state`."""

    __tablename__ = "upstream_login_states"

    state_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    upstream_id: Mapped[str] = mapped_column(_upstream_fk(), index=True)
    pending_sealed: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[datetime] = mapped_column(index=True)  # the purge


class UpstreamOAuthClient(Base):
    """The hub's registration (DCR) at an upstream's authorization server for one redirect
    URI, reused by every user's login there rather than one registration per login. Keyed by
    the sha256 of (issuer, redirect URI); the registration (client id, secret, method) is
    sealed. Bounded in number: the least recently used go first."""

    __tablename__ = "upstream_oauth_clients"

    key_hash: Mapped[str] = mapped_column(String(HASH_LENGTH), primary_key=True)
    registration_sealed: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    used_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)  # the bound


OIDC_ISSUER_LENGTH = 2048
OIDC_SUBJECT_LENGTH = 255  # OpenID Connect Core §2: `sub` is at most 255 ASCII characters


class OidcIdentity(Base):
    """A subject at an OpenID Connect provider, signed in as the hub user `user_id`. The pair
    (issuer, subject) is the identity: never a name or an e-mail address, which a provider
    may reassign."""

    __tablename__ = "oidc_identities"
    __table_args__ = (UniqueConstraint("issuer", "subject"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    issuer: Mapped[str] = mapped_column(String(OIDC_ISSUER_LENGTH))
    subject: Mapped[str] = mapped_column(String(OIDC_SUBJECT_LENGTH))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # the latest provider tokens (access, refresh, id token), SecretBox-sealed JSON mapping
    tokens_sealed: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    last_login_at: Mapped[datetime | None]
