"""The operators' read-only views, for admins only (403 otherwise):

    GET /api/v1/admin/audit       the audit log of tool calls, newest first, filtered
    GET /api/v1/admin/upstreams   every user's upstreams with their health, filtered by status

Both page with an opaque cursor over the primary key (keyset: the last page costs what the
first does). Every filter is bounded and checked before it reaches a query (a 422 names it).
"""

# No `from __future__ import annotations`: `Limit` is made inside `router()` (see admin.py).
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from mcpkit.hub.api.auth import AdminUser, Context
from mcpkit.hub.api.errors import AUTHED, responses
from mcpkit.hub.api.schemas import (
    MAX_ID,
    AuditOut,
    AuditPage,
    Slug,
    UpstreamHealthOut,
    UpstreamHealthPage,
)
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Invalid
from mcpkit.hub.store._paging import decode_cursor, encode_cursor
from mcpkit.hub.store.audit import AuditFilter
from mcpkit.hub.store.records import HealthStatus, Outcome
from mcpkit.hub.store.validation import MAX_TOOL_NAME

PREFIX = "/api/v1/admin"
Cursor = Annotated[str | None, Query(max_length=64, description="from `next_cursor`")]
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
"""Times before this are no audit time: refused (a 422), not searched."""


def _audit_cursor(cursor: str | None) -> int | None:
    """The id a cursor of this listing holds (an audit id is a positive integer)."""
    key = decode_cursor(cursor)
    if key is None:
        return None
    if not key.isdigit() or not 1 <= int(key) <= 2**63 - 1:
        raise Invalid("cursor", "not a cursor this listing gave")
    return int(key)


def _moment(value: datetime | None, field: str) -> datetime | None:
    """An aware time in the audit's range (a time without a zone is UTC)."""
    if value is None:
        return None
    value = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if value < EARLIEST:
        raise Invalid(field, f"must be {EARLIEST.date()} or later")
    return value


def router(settings: HubSettings) -> APIRouter:
    api = APIRouter(prefix=PREFIX, tags=["admin"], responses=responses(*AUTHED, 403, 422))
    Limit = Annotated[
        int | None, Query(ge=1, le=settings.max_page_size,
                          description=f"items per page (default {settings.page_size})"),
    ]

    @api.get("/audit", response_model=AuditPage, operation_id="list_audit",
             summary="The audit log of tool calls, newest first")
    async def list_audit(
        _admin: AdminUser, context: Context, limit: Limit = None, cursor: Cursor = None,
        user_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
        upstream: Annotated[Slug | None, Query(description="the upstream's name")] = None,
        tool: Annotated[str | None, Query(min_length=1, max_length=MAX_TOOL_NAME)] = None,
        outcome: Outcome | None = None,
        since: Annotated[datetime | None, Query(description="at or after (ISO 8601)")] = None,
        until: Annotated[datetime | None, Query(description="before (ISO 8601)")] = None,
    ) -> AuditPage:
        where = AuditFilter(user_id=user_id, upstream_name=upstream, tool=tool,
                            outcome=outcome, since=_moment(since, "since"),
                            until=_moment(until, "until"))
        size = limit or settings.page_size
        rows = await context.store.audit.search(where, limit=size + 1,
                                                before_id=_audit_cursor(cursor))
        items = [AuditOut(id=r.id, at=r.at, user_id=r.user_id, upstream_id=r.upstream_id,
                          upstream_name=r.upstream_name, tool=r.tool,
                          duration_ms=r.duration_ms, outcome=r.outcome, error=r.error)
                 for r in rows[:size]]
        more = len(rows) > size
        return AuditPage(items=items, next_cursor=encode_cursor(str(items[-1].id))
                         if more else None)

    @api.get("/upstreams", response_model=UpstreamHealthPage, operation_id="list_all_upstreams",
             summary="Every user's upstreams with their health")
    async def list_all_upstreams(
        _admin: AdminUser, context: Context, limit: Limit = None, cursor: Cursor = None,
        health_status: HealthStatus | None = None,
    ) -> UpstreamHealthPage:
        page = await context.store.upstreams.every_users(
            limit=limit or settings.page_size, cursor=cursor, health_status=health_status)
        return UpstreamHealthPage(items=[
            UpstreamHealthOut(id=u.id, user_id=u.user_id, name=u.name, transport=u.transport,
                              enabled=u.enabled, health_status=u.health_status,
                              last_error=u.last_error, last_checked_at=u.last_checked_at,
                              tool_count=u.tool_count)
            for u in page.items], next_cursor=page.next_cursor)

    return api
