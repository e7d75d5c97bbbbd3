"""What the store takes and gives: frozen dataclasses, never ORM objects (nothing to lazy-load,
nothing bound to a session, nothing that could write back by accident).

    UserRecord, TokenRecord, NewToken, UpstreamRecord, Credentials, Catalog, AuditRecord
    Page[T]          one page of a listing and the cursor of the next (None: last page)
    UpstreamSpec     a new upstream, credentials in plain text (the store seals them)
    UpstreamChanges  a partial update: fields left UNSET are kept
    AuditEntry       one tool call to record
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, TypeVar

if TYPE_CHECKING:
    from mcpkit.auth.provider import HttpAuth

T = TypeVar("T")

Transport = Literal["http", "sse", "ws", "stdio"]
HealthStatus = Literal["unknown", "healthy", "unhealthy", "needs_auth"]
Purpose = Literal["call", "catalog"]
"""What credentials are for: the calls, or catalog fetches and health checks."""
AuthMode = Literal["static", "oauth", "token_exchange"]
Outcome = Literal["ok", "tool_error", "error", "denied", "timeout"]

DEFAULT_CONNECT_TIMEOUT_S = 10.0
DEFAULT_CALL_TIMEOUT_S = 60.0


class _Unset(enum.Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset.UNSET
"""A field of `UpstreamChanges` that the update leaves as it is."""


@dataclass(frozen=True, slots=True)
class UserRecord:
    id: int
    name: str
    is_admin: bool
    disabled: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """An API token as listed: its secret is gone, `prefix` tells it apart."""

    id: int
    user_id: int
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None

    def active(self, now: datetime) -> bool:
        return self.revoked_at is None and (self.expires_at is None or now < self.expires_at)


@dataclass(frozen=True, slots=True)
class NewToken:
    """A token just created: `secret` is shown to its owner once and stored only hashed."""

    record: TokenRecord
    secret: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class UpstreamRecord:
    """An upstream as stored, without its credentials (`has_headers`/`has_bearer` say if any;
    `has_catalog_headers`/`has_catalog_bearer` for the separate catalog credentials)."""

    id: str
    user_id: int
    name: str
    transport: Transport
    url: str | None
    command: tuple[str, ...] | None
    has_headers: bool
    has_bearer: bool
    enabled: bool
    enabled_tools: tuple[str, ...] | None  # None: every tool not disabled
    disabled_tools: tuple[str, ...]
    connect_timeout_s: float
    call_timeout_s: float
    health_status: HealthStatus
    last_error: str | None
    last_checked_at: datetime | None
    tool_count: int
    catalog_updated_at: datetime | None
    created_at: datetime
    updated_at: datetime
    version: int
    auth_mode: AuthMode = "static"
    """"static": the stored headers and bearer; "oauth": the owner's own login
    (hub/upstream_auth.py); "token_exchange": the owner's provider identity exchanged
    (hub/upstream_token_exchange.py)."""
    has_catalog_headers: bool = False
    has_catalog_bearer: bool = False

    @property
    def has_catalog_credentials(self) -> bool:
        """Whether catalog fetches and health checks use credentials of their own."""
        return self.has_catalog_headers or self.has_catalog_bearer

    def tool_allowed(self, tool: str) -> bool:
        """Whether `enabled_tools` / `disabled_tools` let the hub expose `tool`."""
        if tool in self.disabled_tools:
            return False
        return self.enabled_tools is None or tool in self.enabled_tools


@dataclass(frozen=True, slots=True)
class Credentials:
    """An upstream's credentials, decrypted: for the router's connection, never for display."""

    headers: Mapping[str, str] = field(default_factory=dict)
    bearer: str | None = None
    auth: HttpAuth | None = None
    """The owner's OAuth login to an "oauth" upstream (hub/upstream_auth.py): it, not
    `bearer`, authorizes the connection. Never stored here: attached per connection."""

    def __repr__(self) -> str:  # never the values
        bearer = "<hidden>" if self.bearer is not None else None
        auth = "<login>" if self.auth is not None else None
        return (f"Credentials(headers={sorted(self.headers)!r} (values hidden), "
                f"bearer={bearer}, auth={auth})")


@dataclass(frozen=True, slots=True)
class Catalog:
    """An upstream's stored lists, each in the order the upstream gave them (wire objects)."""

    tools: tuple[dict[str, Any], ...] = ()
    prompts: tuple[dict[str, Any], ...] = ()
    resources: tuple[dict[str, Any], ...] = ()
    resource_templates: tuple[dict[str, Any], ...] = ()
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    items: tuple[T, ...]
    next_cursor: str | None  # pass it back for the next page; None on the last one


@dataclass(frozen=True, slots=True)
class UpstreamSpec:
    """A new upstream. `headers` and `bearer` are plain text here and sealed by the store.

    `bearer` is meant to be sent as `Authorization: Bearer …` and to win over an
    `Authorization` in `headers` (the router's rule); `headers` may carry any other scheme.
    `catalog_headers`/`catalog_bearer`, when either is given, replace both for catalog fetches
    and health checks (never for calls)."""

    name: str
    transport: Transport
    url: str | None = None
    command: Sequence[str] | None = None
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    bearer: str | None = field(default=None, repr=False)
    enabled: bool = True
    enabled_tools: Sequence[str] | None = None
    disabled_tools: Sequence[str] = ()
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    auth_mode: AuthMode = "static"
    catalog_headers: Mapping[str, str] | None = field(default=None, repr=False)
    catalog_bearer: str | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class UpstreamChanges:
    """A partial update (PATCH). UNSET keeps a field; None clears a nullable one (`headers`,
    `bearer`, `url`, `command`, `enabled_tools`, `catalog_headers`, `catalog_bearer`)."""

    name: str | _Unset = UNSET
    transport: Transport | _Unset = UNSET
    url: str | _Unset | None = UNSET
    command: Sequence[str] | _Unset | None = UNSET
    headers: Mapping[str, str] | _Unset | None = field(default=UNSET, repr=False)
    bearer: str | _Unset | None = field(default=UNSET, repr=False)
    enabled: bool | _Unset = UNSET
    enabled_tools: Sequence[str] | _Unset | None = UNSET
    disabled_tools: Sequence[str] | _Unset = UNSET
    connect_timeout_s: float | _Unset = UNSET
    call_timeout_s: float | _Unset = UNSET
    auth_mode: AuthMode | _Unset = UNSET
    catalog_headers: Mapping[str, str] | _Unset | None = field(default=UNSET, repr=False)
    catalog_bearer: str | _Unset | None = field(default=UNSET, repr=False)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One tool call to record. There is deliberately no place for its arguments or result."""

    user_id: int
    upstream_id: str | None
    upstream_name: str
    tool: str
    duration_ms: float
    outcome: Outcome
    error: str | None = None
    at: datetime | None = None  # None: now


@dataclass(frozen=True, slots=True)
class AuditRecord:
    id: int
    at: datetime
    user_id: int
    upstream_id: str | None
    upstream_name: str
    tool: str
    duration_ms: float
    outcome: Outcome
    error: str | None
