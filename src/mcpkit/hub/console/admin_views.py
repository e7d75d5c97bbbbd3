"""The operators' read-only pages, through the admin REST API (403 for a non-admin):

    GET /console/admin/audit    the audit log of tool calls: filters, newest first, paged
    GET /console/admin/health   every user's upstreams with their health, by status

Filters are the API's query parameters, passed on as typed; a value the API refuses comes
back as its 422 message next to the filter form. "Previous page" walks back a trail of the
cursors already seen (keyset pages only go forward), bounded in length.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mcpkit.hub.console import sign_in
from mcpkit.hub.console.hub_calls import ADMIN
from mcpkit.hub.console.page_kit import call, console, refused, signed

AUDIT_FILTERS = ("user_id", "upstream", "tool", "outcome", "since", "until")
OUTCOMES = ("ok", "tool_error", "error", "denied", "timeout")
HEALTH_STATUSES = ("unknown", "healthy", "unhealthy", "needs_auth")
MAX_TRAIL = 40
"""How many pages back "Previous page" remembers (past that, "First page" still works)."""
MAX_FILTER_CHARS = 300
"""A filter value longer than this is not passed on (the API bounds each one lower)."""


def _filters(request: Request, names: tuple[str, ...]) -> dict[str, str]:
    """The filters the page's query sets (empty ones left out: "any")."""
    return {name: value[:MAX_FILTER_CHARS] for name in names
            if (value := request.query_params.get(name, "").strip())}


def _trail(request: Request) -> list[str]:
    """The cursors of the pages before this one, oldest first ("" is the first page)."""
    raw = request.query_params.get("trail", "")
    return raw.split(".")[-MAX_TRAIL:] if "trail" in request.query_params else []


async def _listing(request: Request, found: sign_in.SignedIn, path: str,
                   filters: dict[str, str], template: str, **values: Any) -> Response:
    cursor = request.query_params.get("cursor") or ""
    params = {**filters, **({"cursor": cursor} if cursor else {})}
    reply = await call(request, found, "GET", path, params=params)
    if reply.status == 422:  # a filter (or a typed cursor) the API refused: say which
        error = reply.error
        return console().page(request, template, 422, found, page=None, filters=filters,
                              error=error, **values)
    if not reply.ok:
        return refused(request, found, reply)
    trail = _trail(request)
    return console().page(request, template, signed=found, page=reply.body, filters=filters,
                          error=None, cursor=cursor, trail=trail,
                          next_trail=".".join([*trail, cursor][-MAX_TRAIL:]), **values)


async def audit(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    return await _listing(request, found, ADMIN + "/audit", _filters(request, AUDIT_FILTERS),
                          "admin_audit.html", outcomes=OUTCOMES)


async def health(request: Request) -> Response:
    found = await signed(request)
    if isinstance(found, Response):
        return found
    return await _listing(request, found, ADMIN + "/upstreams",
                          _filters(request, ("health_status",)), "admin_health.html",
                          statuses=HEALTH_STATUSES)


PAGES = [
    ("/console/admin/audit", audit, "GET"),
    ("/console/admin/health", health, "GET"),
]
"""(path, handler, method) of every read-only operators' page."""
