"""Records of the store → response bodies. The one place secrets are masked: header values
and the bearer token (the calls' and the catalog's) are decrypted only to show their names and
a hint, never in full."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from mcpkit.hub.api.context import HubContext
from mcpkit.hub.api.schemas import TokenOut, ToolOut, UpstreamLogin, UpstreamOut, UserOut
from mcpkit.hub.crypto import CredentialError
from mcpkit.hub.needs_auth import login_action, login_path
from mcpkit.hub.store import Credentials, TokenRecord, UpstreamRecord, UserRecord
from mcpkit.hub.store.records import Purpose

log = logging.getLogger(__name__)

HINT_MIN_LENGTH = 16
"""Secrets shorter than this show no characters at all: 4 of 8 would give half away."""
ELLIPSIS = "…"


def hint(secret: str) -> str:
    return ELLIPSIS + secret[-4:] if len(secret) >= HINT_MIN_LENGTH else ELLIPSIS


async def upstream_out(context: HubContext, record: UpstreamRecord) -> UpstreamOut:
    credentials = Credentials()
    if record.has_headers or record.has_bearer:
        credentials = await _credentials(context, record, "call")
    catalog = Credentials()
    if record.has_catalog_credentials:
        catalog = await _credentials(context, record, "catalog")
    connected = None
    if record.auth_mode == "oauth":
        connected = await context.store.upstream_logins.has(record.user_id, record.id)
    return upstream_body(record, credentials, catalog, oauth_connected=connected)


async def _credentials(context: HubContext, record: UpstreamRecord, purpose: Purpose
                       ) -> Credentials:
    try:
        return await context.store.upstreams.credentials(record.user_id, record.id,
                                                         purpose=purpose)
    except CredentialError as error:  # shown as present but unreadable; logged for the op
        log.warning("credentials of upstream %s cannot be opened: %s", record.id, error)
        return Credentials()


def upstream_body(record: UpstreamRecord, credentials: Credentials,
                  catalog: Credentials | None = None, *,
                  oauth_connected: bool | None = None) -> UpstreamOut:
    catalog = catalog or Credentials()
    login = None
    if record.health_status == "needs_auth" and record.auth_mode != "token_exchange":
        login = UpstreamLogin(path=login_path(record.id), message=login_action(record))
    return UpstreamOut(
        id=record.id,
        name=record.name,
        transport=record.transport,
        url=record.url,
        command=None if record.command is None else list(record.command),
        headers=_masked_headers(record.has_headers, credentials),
        has_bearer=record.has_bearer,
        bearer_token_hint=_bearer_hint(record.has_bearer, credentials),
        enabled=record.enabled,
        enabled_tools=None if record.enabled_tools is None else list(record.enabled_tools),
        disabled_tools=list(record.disabled_tools),
        connect_timeout_s=record.connect_timeout_s,
        call_timeout_s=record.call_timeout_s,
        health_status=record.health_status,
        last_error=record.last_error,
        last_checked_at=record.last_checked_at,
        tool_count=record.tool_count,
        catalog_updated_at=record.catalog_updated_at,
        created_at=record.created_at,
        updated_at=record.updated_at,
        version=record.version,
        auth_mode=record.auth_mode,
        oauth_connected=oauth_connected,
        catalog_headers=_masked_headers(record.has_catalog_headers, catalog),
        has_catalog_bearer=record.has_catalog_bearer,
        catalog_bearer_token_hint=_bearer_hint(record.has_catalog_bearer, catalog),
        login=login,
    )


def _masked_headers(present: bool, credentials: Credentials) -> dict[str, str] | None:
    if not present:
        return None
    return {name: hint(value) for name, value in credentials.headers.items()}


def _bearer_hint(present: bool, credentials: Credentials) -> str | None:
    if not present:
        return None
    return hint(credentials.bearer) if credentials.bearer else ELLIPSIS


def tool_out(record: UpstreamRecord, tool: Mapping[str, Any],
             mcp_names: Mapping[tuple[str, str], str] | None = None) -> ToolOut:
    """A stored tool (wire form). Members of an unexpected type are left out rather than
    failing the listing: the catalog is what a foreign server said."""
    name = str(tool.get("name", ""))
    schema = tool.get("inputSchema")
    return ToolOut(
        name=name,
        title=_text(tool.get("title")),
        description=_text(tool.get("description")),
        input_schema=schema if isinstance(schema, dict) else {"type": "object"},
        output_schema=_object(tool.get("outputSchema")),
        annotations=_object(tool.get("annotations")),
        allowed=record.tool_allowed(name),
        mcp_name=(mcp_names or {}).get((record.id, name)),
    )


def user_out(user: UserRecord) -> UserOut:
    return UserOut(id=user.id, name=user.name, is_admin=user.is_admin, disabled=user.disabled,
                   created_at=user.created_at)


def token_out(token: TokenRecord, now: datetime) -> TokenOut:
    return TokenOut(
        id=token.id,
        user_id=token.user_id,
        name=token.name,
        prefix=token.prefix,
        created_at=token.created_at,
        last_used_at=token.last_used_at,
        expires_at=token.expires_at,
        revoked_at=token.revoked_at,
        active=token.active(now),
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _object(value: object) -> dict[str, Any] | None:
    return value if isinstance(value, dict) else None
