"""The REST API's request and response bodies (pydantic), which FastAPI validates and turns
into the OpenAPI document.

Requests are strict (`"10"` is not a number, `1` is not `true`) and closed (an unknown field is
an error: a typo must not be silently ignored). Bounds mirror the store's checks
(`mcpkit.hub.store.validation`), so most bad input is refused before the store sees it and the
OpenAPI document states the real limits; the store still checks everything (names of reserved
headers, the URL's scheme against the transport, …) and its `Invalid` has the same shape.

One page shape everywhere: `{"items": [...], "next_cursor": "…" | null}` - pass `cursor` back
for the next page; null means the last one.

Secrets are write-only: `headers` values and `bearer_token` go in, and come back only as
`headers` with masked values, `has_bearer` and `bearer_token_hint` ("…wxyz" for a long one);
the same for `catalog_headers` and `catalog_bearer_token`, the optional credentials of catalog
fetches and health checks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints
from pydantic.json_schema import SkipJsonSchema

from mcpkit.hub.store import validation as limits
from mcpkit.hub.store.records import AuthMode, HealthStatus, Outcome, Transport

T = TypeVar("T")


MAX_ID = 2**31 - 1
"""Integer ids (users, tokens) and versions fit a 32-bit signed column."""

Slug = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9_-]{0,62}$", min_length=1, max_length=63)
]
Url = Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_URL)]
HeaderName = Annotated[
    str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$", max_length=128)
]
HeaderValue = Annotated[
    str, StringConstraints(pattern=r"^[\t -~]*$", max_length=limits.MAX_HEADER_VALUE)
]
"""Visible ASCII, space and tab: no CR/LF (header injection), nothing a proxy would mangle."""
Headers = Annotated[dict[HeaderName, HeaderValue], Field(max_length=limits.MAX_HEADERS)]
Bearer = Annotated[
    str, StringConstraints(pattern=r"^[!-~]+$", min_length=1, max_length=limits.MAX_BEARER)
]
CommandArg = Annotated[str, StringConstraints(pattern=r"^[^\x00]*$",
                                              max_length=limits.MAX_COMMAND_ARG)]
Command = Annotated[list[CommandArg], Field(min_length=1, max_length=limits.MAX_COMMAND_ARGS)]
ToolName = Annotated[str, StringConstraints(min_length=1, max_length=limits.MAX_TOOL_NAME)]
ToolNames = Annotated[list[ToolName], Field(max_length=limits.MAX_TOOL_NAMES)]
Timeout = Annotated[float, Field(gt=0, le=limits.MAX_TIMEOUT_S, allow_inf_nan=False)]
Version = Annotated[int, Field(ge=1, le=MAX_ID)]
TokenName = Annotated[
    str,
    StringConstraints(
        pattern=r"^[^\x00-\x1f\x7f]*[^\x00-\x20\x7f][^\x00-\x1f\x7f]*$",
        min_length=1,
        max_length=limits.MAX_TOKEN_NAME,
    ),
]

REQUEST = ConfigDict(strict=True, extra="forbid")


# --- errors ---------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str = Field(description="machine-readable: invalid, not_found, conflict, …")
    message: str = Field(description="for people: what is wrong and, where it helps, what to do")
    field: str | None = Field(
        default=None, description="the offending field, e.g. `url`, `headers.X-Key`, `limit`"
    )


class ErrorOut(BaseModel):
    error: ErrorDetail


# --- pages ----------------------------------------------------------------------------------


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(
        description="pass as `cursor` for the next page; null on the last page"
    )


# --- upstreams ------------------------------------------------------------------------------


class UpstreamCreate(BaseModel):
    """A new upstream. http/sse take an http(s) URL, ws a ws(s) URL, stdio a `command`
    (only when the operator allows stdio upstreams)."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={"examples": [
            {"name": "github", "url": "https://api.githubcopilot.com/mcp/",
             "bearer_token": "ghp_your_token", "disabled_tools": ["delete_repository"]},
            {"name": "search", "transport": "sse", "url": "https://search.example.com/sse",
             "headers": {"X-Api-Key": "your-key"}, "call_timeout_s": 30},
        ]},
    )

    name: Slug = Field(description="unique among your upstreams; prefixes its tools")
    transport: Transport = "http"
    url: Url | None = None
    command: Command | None = None
    headers: Headers | None = Field(
        default=None, description="sent to the upstream; stored encrypted, never returned"
    )
    bearer_token: Bearer | None = Field(
        default=None,
        description="sent as `Authorization: Bearer …` (wins over an Authorization header); "
        "stored encrypted, never returned",
    )
    enabled: bool = True
    enabled_tools: ToolNames | None = Field(
        default=None, description="only these tools are exposed (null: all not disabled)"
    )
    disabled_tools: ToolNames = Field(default_factory=list)
    connect_timeout_s: Timeout = 10.0
    call_timeout_s: Timeout = 60.0
    auth_mode: AuthMode = Field(
        default="static",
        description='"static": send the stored headers and bearer; "oauth": each call '
        "carries your own OAuth login to the upstream (POST …/{id}/oauth/start); "
        '"token_exchange": your identity at the hub\'s OpenID Connect provider is exchanged '
        "there for a token for the upstream (RFC 8693; the hub needs --oidc-issuer)",
    )
    catalog_headers: Headers | None = Field(
        default=None, description="with `catalog_bearer_token`: what catalog fetches and health "
        "checks send instead of `headers`/`bearer_token` (calls never do); stored encrypted, "
        "never returned",
    )
    catalog_bearer_token: Bearer | None = Field(
        default=None, description="the bearer token of catalog fetches and health checks "
        "(see `catalog_headers`); stored encrypted, never returned",
    )


class UpstreamUpdate(BaseModel):
    """A partial update: absent fields are kept; `null` clears `url`, `command`, `headers`,
    `bearer_token`, `catalog_headers`, `catalog_bearer_token` and `enabled_tools`. With
    `version`, the update applies only if the upstream is still at that version (409
    otherwise)."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        json_schema_extra={"examples": [
            {"enabled": False},
            {"disabled_tools": ["delete_repository"], "call_timeout_s": 30, "version": 1},
            {"bearer_token": None, "headers": {"X-Api-Key": "new-key"}},
        ]},
    )

    # `X | SkipJsonSchema[None] = None`: absent is allowed, null is not (the route says so)
    name: Slug | SkipJsonSchema[None] = None
    transport: Transport | SkipJsonSchema[None] = None
    url: Url | None = None
    command: Command | None = None
    headers: Headers | None = None
    bearer_token: Bearer | None = None
    enabled: bool | SkipJsonSchema[None] = None
    enabled_tools: ToolNames | None = None
    disabled_tools: ToolNames | SkipJsonSchema[None] = None
    connect_timeout_s: Timeout | SkipJsonSchema[None] = None
    call_timeout_s: Timeout | SkipJsonSchema[None] = None
    auth_mode: AuthMode | SkipJsonSchema[None] = None
    catalog_headers: Headers | None = None
    catalog_bearer_token: Bearer | None = None
    version: Version | SkipJsonSchema[None] = Field(
        default=None, description="the version you read; 409 if it changed since"
    )


UPDATE_NOT_NULL = frozenset({
    "name", "transport", "enabled", "disabled_tools", "connect_timeout_s", "call_timeout_s",
    "auth_mode", "version",
})


class UpstreamLogin(BaseModel):
    """How to give the hub the login an upstream in `needs_auth` asks for."""

    method: Literal["POST"] = "POST"
    path: str = Field(description="the hub's endpoint that starts the login (OAuth): it "
                      "answers with the authorization URL to open (an upstream whose "
                      'auth_mode is "static" is switched to "oauth" first)')
    message: str = Field(description="what to do, in a sentence")


class UpstreamOut(BaseModel):
    id: str
    name: str
    transport: Transport
    url: str | None
    command: list[str] | None
    headers: dict[str, str] | None = Field(
        description="header names with masked values (null: no headers)"
    )
    has_bearer: bool
    bearer_token_hint: str | None = Field(description="'…' and the last 4 characters of a "
                                          "long token; '…' alone for a short one")
    enabled: bool
    enabled_tools: list[str] | None
    disabled_tools: list[str]
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
    auth_mode: AuthMode
    oauth_connected: bool | None = Field(
        default=None, description="for an oauth upstream: whether you have a login to it")
    catalog_headers: dict[str, str] | None = Field(
        default=None, description="the catalog credentials' header names, values masked "
        "(null: none)")
    has_catalog_bearer: bool = False
    catalog_bearer_token_hint: str | None = None
    login: UpstreamLogin | None = Field(
        default=None, description="while `health_status` is `needs_auth`: how to log in (a "
        "token_exchange upstream has none: its owner signs in to the hub again)")


class UpstreamPage(Page[UpstreamOut]):
    pass


class ToolOut(BaseModel):
    """A tool from the upstream's stored catalog, as the upstream described it."""

    name: str
    title: str | None = None
    description: str | None = None
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    allowed: bool = Field(description="whether enabled_tools/disabled_tools let it through")
    mcp_name: str | None = Field(
        default=None, description="the name clients call it by on the hub's /mcp; null when "
        "/mcp does not list it (switched off, or the upstream disabled or down)")


class ToolPage(Page[ToolOut]):
    pass


# --- users and tokens -----------------------------------------------------------------------


class UserOut(BaseModel):
    id: int
    name: str
    is_admin: bool
    disabled: bool
    created_at: datetime


class UserPage(Page[UserOut]):
    pass


class UserCreate(BaseModel):
    model_config = REQUEST

    name: Slug
    is_admin: bool = False


class UserUpdate(BaseModel):
    """Absent fields are kept. A disabled user's tokens stop working at once."""

    model_config = REQUEST

    disabled: bool | SkipJsonSchema[None] = None
    is_admin: bool | SkipJsonSchema[None] = None


class TokenCreate(BaseModel):
    model_config = REQUEST

    name: TokenName = "default"
    expires_in_days: Annotated[int, Field(ge=1, le=3650)] | None = Field(
        default=None, description="null: the token does not expire"
    )


class TokenOut(BaseModel):
    id: int
    user_id: int
    name: str
    prefix: str = Field(description="the first characters of the token, to tell it apart")
    created_at: datetime
    last_used_at: datetime | None
    expires_at: datetime | None
    revoked_at: datetime | None
    active: bool


class TokenPage(Page[TokenOut]):
    pass


class TokenCreated(BaseModel):
    token: TokenOut
    secret: str = Field(description="the bearer token: shown now and never again")


# --- operations -----------------------------------------------------------------------------


class Status(BaseModel):
    status: Literal["ok", "ready"]


# --- operators: audit log and health of every user's upstreams ------------------------------


class AuditOut(BaseModel):
    """One tool call: never its arguments or result."""

    id: int
    at: datetime
    user_id: int
    upstream_id: str | None
    upstream_name: str
    tool: str
    duration_ms: float
    outcome: Outcome
    error: str | None


class AuditPage(Page[AuditOut]):
    pass


class UpstreamHealthOut(BaseModel):
    """One upstream of any user, as the health checks last saw it (no credentials, no URL)."""

    id: str
    user_id: int
    name: str
    transport: Transport
    enabled: bool
    health_status: HealthStatus
    last_error: str | None
    last_checked_at: datetime | None
    tool_count: int


class UpstreamHealthPage(Page[UpstreamHealthOut]):
    pass
