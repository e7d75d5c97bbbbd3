"""Fetching an upstream's catalog (tools, prompts, resources, templates) over MCP, and storing
it with the upstream's health: what `POST …/refresh`, `GET …/tools?refresh=true` and (later)
the health checker do.

    catalog = await fetch_catalog(upstream, credentials, settings)    # talks to the upstream
    catalog = await refresh_catalog(store, upstream, settings)        # fetch + store + health

A failing upstream raises `UpstreamUnavailable` with a one-line reason, after
`refresh_catalog` recorded it as the upstream's `last_error` (status "unhealthy"); the stored
catalog is then left as it was, so a flapping upstream keeps its last good list. An upstream
that wants authorization the hub lacks (a 401, the owner's login missing or dead:
`needs_auth.py`) raises `UpstreamNeedsAuth` (an `UpstreamUnavailable`) and is recorded as
"needs_auth", with the action that fixes it in `last_error`.

Credentials: the upstream's catalog credentials when it has any (`catalog_headers`,
`catalog_bearer`), else the ones its calls use (`store.upstreams.credentials(...,
purpose="catalog")`).

Bounded: in time by the upstream's timeouts, in count, bytes and nesting by
`catalog_limits.py` (checked page by page, as the lists arrive). The connection is
`upstream_client.upstream_client`'s, the very client the router's calls
use (capabilities, client info, SSRF checks, headers, timeouts): an upstream that lists some
tools only to capable clients lists them here too, so every stored tool can be called.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from mcpkit.client import Client, ServerError
from mcpkit.hub import needs_auth
from mcpkit.hub.catalog_limits import CatalogBudget, CatalogLimits, CatalogTooLarge
from mcpkit.hub.needs_auth import UpstreamNeedsAuth
from mcpkit.hub.store.records import Catalog, Credentials, HealthStatus, UpstreamRecord
from mcpkit.hub.upstream_client import UpstreamUnavailable, reason, upstream_client
from mcpkit.protocol import headers, types
from mcpkit.protocol.errors import METHOD_NOT_FOUND
from mcpkit.protocol.versions import Era

__all__ = ["CatalogLimits", "CatalogTooLarge", "Fetcher", "UpstreamNeedsAuth",
           "UpstreamUnavailable", "fetch_catalog", "reason", "refresh_catalog"]

if TYPE_CHECKING:
    from mcpkit.hub.settings import HubSettings
    from mcpkit.hub.store import Store

log = logging.getLogger(__name__)

Fetcher = Callable[[UpstreamRecord, Credentials, "HubSettings"], Awaitable[Catalog]]
"""What `fetch_catalog` is: the seam where tests (and other transports) plug in."""


async def fetch_catalog(
    upstream: UpstreamRecord, credentials: Credentials, settings: HubSettings
) -> Catalog:
    """Connect to `upstream` and list everything it offers (each list only if the server
    declares that capability). Connecting is bounded by the upstream's `connect_timeout_s`,
    each list request by its `call_timeout_s`, and the whole by their sum; what is listed by
    `settings`' catalog limits (`catalog_limits.py`: `CatalogTooLarge` past them)."""
    client = upstream_client(upstream, credentials, settings)
    budget = CatalogBudget(CatalogLimits.from_settings(settings), upstream.name)
    limit = upstream.connect_timeout_s + upstream.call_timeout_s
    try:
        with anyio.fail_after(limit):
            async with client:
                return await _list_everything(client, budget)
    except UpstreamUnavailable:
        raise
    except TimeoutError:
        raise UpstreamUnavailable(
            f"{upstream.name}: no catalog within {limit:g} s (connect + list)") from None
    except Exception as error:  # anything a foreign server or the network can do
        refused = needs_auth.refusal(upstream, error, sent_credentials=bool(
            credentials.bearer or credentials.headers))
        if refused is not None:
            raise refused from error
        raise UpstreamUnavailable(f"{upstream.name}: {reason(error)}") from error


async def refresh_catalog(
    store: Store,
    upstream: UpstreamRecord,
    settings: HubSettings,
    *,
    fetch: Fetcher | None = None,
    credentials: Callable[[UpstreamRecord], Awaitable[Credentials]] | None = None,
) -> Catalog:
    """Fetch the upstream's catalog (with `fetch`, default `fetch_catalog`), store it and mark
    the upstream healthy; on failure record the error ("needs_auth" when the upstream wants
    authorization or its owner's login is missing or dead, else "unhealthy") and raise
    `UpstreamUnavailable` (`UpstreamNeedsAuth` for the former). `NotFound` if the upstream
    went away meanwhile. `credentials` gives what the fetch presents (default: the stored
    ones for catalog fetches - its catalog credentials if it has any; the hub's callers attach
    the owner's OAuth login, whose absence is `UpstreamNeedsLogin`)."""
    presented: Credentials | None = None
    try:
        if credentials is not None:
            presented = await credentials(upstream)
        else:
            presented = await store.upstreams.credentials(upstream.user_id, upstream.id,
                                                          purpose="catalog")
        catalog = await (fetch or fetch_catalog)(upstream, presented, settings)
        await _check_user_total(store, upstream, catalog, settings)
    except UpstreamUnavailable as error:
        # the owner's login missing or dead (`UpstreamNeedsLogin`, before any request or on
        # a refused refresh) reaches here as it was raised: needs_auth too
        refused = error if isinstance(error, UpstreamNeedsAuth) else needs_auth.refusal(
            upstream, error, sent_credentials=presented is not None and bool(
                presented.bearer or presented.headers))
        await _record_failure(store, upstream, refused or error)
        if refused is None or refused is error:
            raise
        raise refused from error
    await store.catalog.replace(
        upstream.user_id,
        upstream.id,
        tools=catalog.tools,
        prompts=catalog.prompts,
        resources=catalog.resources,
        resource_templates=catalog.resource_templates,
    )
    await store.upstreams.set_health(upstream.user_id, upstream.id, "healthy")
    return catalog


async def _record_failure(store: Store, upstream: UpstreamRecord,
                          error: UpstreamUnavailable) -> None:
    status: HealthStatus = "needs_auth" if isinstance(error, UpstreamNeedsAuth) else "unhealthy"
    log.info("upstream %s of user %s is %s: %s", upstream.id, upstream.user_id, status, error)
    await store.upstreams.set_health(upstream.user_id, upstream.id, status, error=str(error))


async def _check_user_total(
    store: Store, upstream: UpstreamRecord, catalog: Catalog, settings: HubSettings
) -> None:
    """`CatalogTooLarge` when `catalog`, with the stored catalogs of the user's other
    upstreams (disabled ones too: they may be enabled without a refresh), passes
    `settings.max_user_catalog_bytes` - what one user's /mcp lists can hold. Checked at every
    refresh, so reading the others costs at most that bound."""
    limit = settings.max_user_catalog_bytes
    total = catalog_bytes(catalog)
    for other, stored in await store.catalog.all(upstream.user_id, enabled_only=False):
        if other.id != upstream.id:
            total += catalog_bytes(stored)
        if total > limit:
            raise CatalogTooLarge(
                f"{upstream.name}: catalog too large: with the user's other upstreams it passes "
                f"{limit:,} bytes (MCPKIT_HUB_MAX_USER_CATALOG_BYTES)")


def catalog_bytes(catalog: Catalog) -> int:
    """A catalog's size as JSON (its four lists)."""
    return sum(len(msgspec.json.encode(items)) for items in (
        catalog.tools, catalog.prompts, catalog.resources, catalog.resource_templates))


@dataclass(frozen=True, slots=True)
class _List:
    kind: str
    method: str
    key: str
    type: type[Any]


_TOOLS = _List("tools", "tools/list", "tools", types.Tool)
_PROMPTS = _List("prompts", "prompts/list", "prompts", types.Prompt)
_RESOURCES = _List("resources", "resources/list", "resources", types.Resource)
_TEMPLATES = _List("resource_templates", "resources/templates/list", "resourceTemplates",
                   types.ResourceTemplate)


async def _list_everything(client: Client, budget: CatalogBudget) -> Catalog:
    caps = client.server_capabilities
    tools = await _list(client, _TOOLS, budget) if "tools" in caps else ()
    prompts = await _list(client, _PROMPTS, budget) if "prompts" in caps else ()
    resources: tuple[dict[str, Any], ...] = ()
    templates: tuple[dict[str, Any], ...] = ()
    if "resources" in caps:
        resources = await _list(client, _RESOURCES, budget)
        try:
            templates = await _list(client, _TEMPLATES, budget)
        except ServerError as error:  # resources without templates: an empty list
            if error.code != METHOD_NOT_FOUND:
                raise
    return Catalog(tools=tools, prompts=prompts, resources=resources,
                   resource_templates=templates)


async def _list(client: Client, spec: _List, budget: CatalogBudget) -> tuple[dict[str, Any], ...]:
    """Every page of one list, each item checked against the budget as its page arrives and
    kept in its wire form (camelCase, unknown members dropped, as `Client.list_*` give)."""
    items: list[dict[str, Any]] = []
    async with contextlib.aclosing(client.list_pages(spec.method, spec.key)) as pages:
        async for batch in pages:
            budget.next_page(spec.method)
            for raw in batch:
                items.extend(_admitted(client, spec, raw, budget))
    return tuple(items)


def _admitted(client: Client, spec: _List, raw: Any, budget: CatalogBudget
              ) -> tuple[dict[str, Any], ...]:
    """`raw` counted against the budget (before anything walks it), in its wire form; () for
    an item a client leaves out."""
    if not isinstance(raw, dict):
        raise UpstreamUnavailable(f"{budget.upstream_name}: {spec.method} lists "
                                  "something that is not an object")
    budget.admit(spec.kind, raw)
    item = _item(client, spec, raw, budget.upstream_name)
    return () if item is None else (item,)


def _item(client: Client, spec: _List, raw: dict[str, Any], upstream_name: str
          ) -> dict[str, Any] | None:
    """One listed object in its wire form; None for a tool a client must not call (no name,
    or invalid `x-mcp-header` annotations in the modern era: `Client.list_tools` too)."""
    if spec is _TOOLS:
        if not isinstance(raw.get("name"), str):
            return None
        if client.era is Era.MODERN and not _annotations_valid(raw):
            log.warning("upstream %s: leaving out tool %r (invalid x-mcp-header annotations)",
                        upstream_name, raw["name"][:100])
            return None
    try:
        typed = msgspec.convert(raw, spec.type)
    except msgspec.ValidationError as error:
        raise UpstreamUnavailable(f"{upstream_name}: an invalid {spec.method} result: "
                                  f"{error}") from None
    wire: dict[str, Any] = msgspec.to_builtins(typed)
    return wire


def _annotations_valid(tool: dict[str, Any]) -> bool:
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return True
    try:
        headers.header_params(schema)
    except ValueError:
        return False
    return True
