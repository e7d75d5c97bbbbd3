"""`/api/v1/users/mcp/upstreams`: the caller's upstreams (every query is scoped to the caller;
another user's upstream id is answered exactly like a missing one: 404).

    GET    /api/v1/users/mcp/upstreams                 list (paged: limit, cursor, enabled)
    POST   /api/v1/users/mcp/upstreams                 register (201, Location)
    GET    /api/v1/users/mcp/upstreams/{id}            one
    PATCH  /api/v1/users/mcp/upstreams/{id}            partial update (optional `version`)
    DELETE /api/v1/users/mcp/upstreams/{id}            remove (optional ?version=)
    GET    /api/v1/users/mcp/upstreams/{id}/tools      its stored tools (?refresh=true: ask it)
    GET    /api/v1/users/mcp/upstreams/{id}/tools/{name}   one stored tool (its schema, /mcp name)
    POST   /api/v1/users/mcp/upstreams/{id}/refresh    fetch its catalog now (502 if it fails)

A refresh that finds the upstream asking for authorization (a 401, the owner's login missing
or dead) records it as `needs_auth` and answers 502 `upstream_needs_auth`, whose message -
like the upstream's `last_error` and its `login` member - names the way in: the login
endpoint `POST …/{id}/oauth/start`, or credentials it accepts.
"""

# No `from __future__ import annotations`: the routes' parameter types include `Limit`, made
# inside `router()` from the settings, which FastAPI could not resolve from a string.
import logging
import re
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response, status

from mcpkit.hub.api.auth import Context, CurrentUser
from mcpkit.hub.api.context import HubContext
from mcpkit.hub.api.errors import AUTHED, WITH_BODY, ApiError, responses
from mcpkit.hub.api.paging import page_of
from mcpkit.hub.api.schemas import (
    UPDATE_NOT_NULL,
    ToolOut,
    ToolPage,
    UpstreamCreate,
    UpstreamOut,
    UpstreamPage,
    UpstreamUpdate,
    Version,
)
from mcpkit.hub.api.ssrf import check_upstream_url
from mcpkit.hub.api.views import tool_out, upstream_out
from mcpkit.hub.catalog import UpstreamNeedsAuth, UpstreamUnavailable, refresh_catalog
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import (
    Invalid,
    NotFound,
    UpstreamChanges,
    UpstreamRecord,
    UpstreamSpec,
)
from mcpkit.hub.store import validation as check
from mcpkit.hub.store._paging import decode_cursor
from mcpkit.hub.store.records import Catalog
from mcpkit.hub.store.validation import STDIO_HINT
from mcpkit.hub.upstream_auth import credentials_for

log = logging.getLogger(__name__)
PREFIX = "/api/v1/users/mcp/upstreams"
UPSTREAM_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
Cursor = Annotated[str | None, Query(max_length=512, description="from `next_cursor`")]
# OpenAPI links: what a client (and the property tests) can do with a new upstream's id
UPSTREAM_LINKS = {
    name: {"operationId": name, "parameters": {"upstream_id": "$response.body#/id"}}
    for name in ("get_upstream", "update_upstream", "delete_upstream", "list_upstream_tools",
                 "refresh_upstream")
}
# API field → store field (only the bearers differ)
STORE_FIELDS = {"bearer_token": "bearer", "catalog_bearer_token": "catalog_bearer"}
NEEDS_AUTH_CODE = "upstream_needs_auth"


def router(settings: HubSettings) -> APIRouter:
    api = APIRouter(prefix=PREFIX, tags=["upstreams"], responses=responses(*AUTHED, 422))
    Limit = Annotated[
        int | None, Query(ge=1, le=settings.max_page_size,
                          description=f"items per page (default {settings.page_size})"),
    ]

    @api.get("", response_model=UpstreamPage, summary="List your upstreams",
             operation_id="list_upstreams")
    async def list_upstreams(
        user: CurrentUser,
        context: Context,
        limit: Limit = None,
        cursor: Cursor = None,
        enabled: Annotated[bool | None, Query(description="only enabled or disabled")] = None,
    ) -> UpstreamPage:
        page = await context.store.upstreams.list(
            user.id, limit=limit or settings.page_size, cursor=_name_cursor(cursor),
            enabled=enabled,
        )
        items = [await upstream_out(context, record) for record in page.items]
        return UpstreamPage(items=items, next_cursor=page.next_cursor)

    @api.post(
        "",
        response_model=UpstreamOut,
        status_code=status.HTTP_201_CREATED,
        summary="Register an upstream",
        operation_id="create_upstream",
        responses={**responses(*WITH_BODY, 409), 201: {"links": UPSTREAM_LINKS}},
    )
    async def create_upstream(
        body: UpstreamCreate, user: CurrentUser, context: Context, response: Response
    ) -> UpstreamOut:
        spec = await _checked_spec(body, settings, context)
        record = await context.store.upstreams.create(
            user.id, spec, max_per_user=settings.max_upstreams_per_user)
        response.headers["Location"] = f"{PREFIX}/{record.id}"
        await announce_change(context, user.id, record.id)
        return await upstream_out(context, record)

    @api.get("/{upstream_id}", response_model=UpstreamOut, summary="One of your upstreams",
             operation_id="get_upstream", responses=responses(404))
    async def get_upstream(upstream_id: str, user: CurrentUser, context: Context) -> UpstreamOut:
        return await upstream_out(context, await _owned(context, user.id, upstream_id))

    @api.patch(
        "/{upstream_id}",
        response_model=UpstreamOut,
        summary="Change an upstream (absent fields are kept)",
        operation_id="update_upstream",
        responses=responses(*WITH_BODY, 404, 409),
    )
    async def update_upstream(
        upstream_id: str, body: UpstreamUpdate, user: CurrentUser, context: Context
    ) -> UpstreamOut:
        current = await _owned(context, user.id, upstream_id)
        changes = await _checked_changes(body, current, settings, context)
        record = await context.store.upstreams.update(
            user.id, current.id, changes, expected_version=body.version
        )
        await announce_change(context, user.id, record.id)
        return await upstream_out(context, record)

    @api.delete(
        "/{upstream_id}",
        status_code=status.HTTP_204_NO_CONTENT,
        response_class=Response,
        summary="Remove an upstream and its catalog",
        operation_id="delete_upstream",
        responses=responses(404, 409, 422),
    )
    async def delete_upstream(
        upstream_id: str,
        user: CurrentUser,
        context: Context,
        version: Annotated[Version | None, Query(description="409 unless still at it")] = None,
    ) -> Response:
        current = await _owned(context, user.id, upstream_id)
        await context.store.upstreams.delete(user.id, current.id, expected_version=version)
        await announce_change(context, user.id, current.id)
        return Response(status_code=status.HTTP_204_NO_CONTENT)

    _add_catalog_routes(api, settings, Limit)
    return api


def _add_catalog_routes(api: APIRouter, settings: HubSettings, Limit: Any) -> None:
    """An upstream's catalog: its tools (all, one) and a refresh now."""

    @api.get(
        "/{upstream_id}/tools",
        response_model=ToolPage,
        summary="The upstream's tools (stored catalog; refresh=true asks the upstream)",
        operation_id="list_upstream_tools",
        responses=responses(404, 422, 502),
    )
    async def list_tools(
        upstream_id: str,
        user: CurrentUser,
        context: Context,
        refresh: Annotated[bool, Query(description="fetch the catalog from the upstream first")]
        = False,
        limit: Limit = None,
        cursor: Cursor = None,
    ) -> ToolPage:
        record = await _owned(context, user.id, upstream_id)
        if refresh:
            catalog = await _refresh(context, record)
        else:
            catalog = await context.store.catalog.get(user.id, record.id)
        tools, next_cursor = page_of(catalog.tools, cursor, limit or settings.page_size)
        names = await _mcp_names(context, user.id)
        return ToolPage(items=[tool_out(record, tool, names) for tool in tools],
                        next_cursor=next_cursor)

    @api.get(
        "/{upstream_id}/tools/{tool_name:path}",
        response_model=ToolOut,
        summary="One tool of the upstream's stored catalog",
        operation_id="get_upstream_tool",
        responses=responses(404, 422),
    )
    async def get_tool(upstream_id: str, tool_name: str, user: CurrentUser,
                       context: Context) -> ToolOut:
        record = await _owned(context, user.id, upstream_id)
        catalog = await context.store.catalog.get(user.id, record.id)
        for tool in catalog.tools:
            if tool.get("name") == tool_name:
                return tool_out(record, tool, await _mcp_names(context, user.id))
        raise NotFound("tool", tool_name)

    @api.post(
        "/{upstream_id}/refresh",
        response_model=UpstreamOut,
        summary="Fetch the upstream's catalog now; the upstream with its new health",
        operation_id="refresh_upstream",
        responses=responses(404, 502),
    )
    async def refresh_upstream(
        upstream_id: str, user: CurrentUser, context: Context
    ) -> UpstreamOut:
        record = await _owned(context, user.id, upstream_id)
        await _refresh(context, record)
        return await upstream_out(context, await _owned(context, user.id, record.id))



async def _checked_spec(
    body: UpstreamCreate, settings: HubSettings, context: HubContext
) -> UpstreamSpec:
    """The new upstream, once its transport is allowed and its URL passed the SSRF check
    (the store validates the rest)."""
    _check_transport(body.transport, settings)
    _check_auth_mode(body.auth_mode, body.transport, settings)
    url, _command = check.endpoint(body.transport, body.url, body.command)
    if url is not None:
        await check_upstream_url(url, settings, context.resolve)
    return UpstreamSpec(
        name=body.name,
        transport=body.transport,
        url=body.url,
        command=body.command,
        headers=body.headers,
        bearer=body.bearer_token,
        enabled=body.enabled,
        enabled_tools=body.enabled_tools,
        disabled_tools=body.disabled_tools,
        connect_timeout_s=body.connect_timeout_s,
        call_timeout_s=body.call_timeout_s,
        auth_mode=body.auth_mode,
        catalog_headers=body.catalog_headers,
        catalog_bearer=body.catalog_bearer_token,
    )


async def _checked_changes(
    body: UpstreamUpdate, current: UpstreamRecord, settings: HubSettings, context: HubContext
) -> UpstreamChanges:
    """The fields the PATCH gives (absent ones are kept), once none that must have a value is
    null, a new transport is allowed and a new URL passed the SSRF check."""
    given = body.model_fields_set
    for name in sorted(given & UPDATE_NOT_NULL):
        if getattr(body, name) is None:
            raise ApiError(422, "must not be null (leave it out to keep it)", field=name)
    transport = body.transport if "transport" in given else current.transport
    assert transport is not None
    if "transport" in given:
        _check_transport(transport, settings)
    if given & {"transport", "auth_mode"}:
        _check_auth_mode(body.auth_mode if "auth_mode" in given else current.auth_mode,
                         transport, settings)
    if "url" in given and body.url is not None and transport != "stdio":
        url, _ = check.endpoint(transport, body.url, None)
        assert url is not None
        await check_upstream_url(url, settings, context.resolve)
    changes: dict[str, Any] = {
        STORE_FIELDS.get(name, name): getattr(body, name) for name in given if name != "version"
    }
    return UpstreamChanges(**changes)


async def _mcp_names(context: HubContext, user_id: int) -> Mapping[tuple[str, str], str] | None:
    """The user's tools' names on /mcp (None: this app serves no /mcp)."""
    return await context.tool_names(user_id) if context.tool_names else None


async def _owned(context: HubContext, user_id: int, upstream_id: str) -> UpstreamRecord:
    """The caller's upstream, or 404 - also for an id that could never exist (checked before
    the database sees it: nothing odd reaches a query)."""
    if not UPSTREAM_ID.match(upstream_id):
        raise NotFound("upstream", upstream_id)
    return await context.store.upstreams.get(user_id, upstream_id)


async def _refresh(context: HubContext, record: UpstreamRecord) -> Catalog:
    """Refresh one catalog, waiting for a slot (bounded refreshes per process); 502 when
    the upstream fails (its error is stored on the upstream by then), with the code
    `upstream_needs_auth` when it wants authorization."""
    assert context.refresh_slots is not None
    async with context.refresh_slots.for_user(record.user_id):
        try:
            catalog = await refresh_catalog(context.store, record, context.settings,
                                            fetch=context.fetch,
                                            credentials=credentials_for(context, "catalog"))
        except UpstreamNeedsAuth as error:
            raise ApiError(502, str(error), code=NEEDS_AUTH_CODE) from None
        except UpstreamUnavailable as error:
            raise ApiError(502, str(error), code="upstream_unavailable") from None
    await announce_change(context, record.user_id, record.id)
    return catalog


async def announce_change(context: HubContext, user_id: int, upstream_id: str) -> None:
    """Tell the listeners (the /mcp router: every replica's sessions of the user get
    list_changed) that an upstream or its catalog changed; a failing listener is logged."""
    for listener in list(context.catalog_listeners):
        try:
            await listener(user_id, upstream_id)
        except Exception:
            log.exception("a catalog listener failed")


def _check_transport(transport: str, settings: HubSettings) -> None:
    if transport == "stdio" and not settings.allow_stdio:
        raise ApiError(422, f"stdio upstreams are disabled by the operator ({STDIO_HINT})",
                       field="transport")


def _check_auth_mode(auth_mode: str | None, transport: str, settings: HubSettings) -> None:
    """Token exchange needs the hub's OpenID Connect provider (the identity exchanged) and
    an upstream reached over the network (its resource names it)."""
    if auth_mode != "token_exchange":
        return
    if settings.oidc_issuer is None:
        raise ApiError(422, 'auth_mode "token_exchange" needs the hub to sign users in with '
                       "an OpenID Connect provider (mcpkit hub serve --oidc-issuer): this "
                       "hub has none", field="auth_mode")
    if transport == "stdio":
        raise ApiError(422, 'auth_mode "token_exchange" needs a network upstream (http, sse '
                       "or ws), not stdio", field="auth_mode")


def _name_cursor(cursor: str | None) -> str | None:
    """The store's cursors name the last row seen; one that decodes to anything but a name is
    refused here, so nothing odd (a NUL, say) reaches a query."""
    if cursor is None:
        return None
    decoded = decode_cursor(cursor)
    if decoded is None or not check.NAME_RE.fullmatch(decoded):
        raise Invalid("cursor", "not a cursor this listing gave")
    return cursor
