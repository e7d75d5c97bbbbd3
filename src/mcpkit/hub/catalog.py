"""Fetching an upstream's catalog (tools, prompts, resources, templates) over MCP, and storing
it with the upstream's health: what `POST …/refresh`, `GET …/tools?refresh=true` and (later)
the health checker do.

    catalog = await fetch_catalog(upstream, credentials, settings)    # talks to the upstream
    catalog = await refresh_catalog(store, upstream, settings)        # fetch + store + health

A failing upstream raises `UpstreamUnavailable` with a one-line reason, after
`refresh_catalog` recorded it as the upstream's `last_error` (status "unhealthy"); the stored
catalog is then left as it was, so a flapping upstream keeps its last good list.

The connection is `upstream_client.upstream_client`'s, the very client the router's calls
use (capabilities, client info, SSRF checks, headers, timeouts): an upstream that lists some
tools only to capable clients lists them here too, so every stored tool can be called.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from mcpkit.client import Client, ServerError
from mcpkit.hub.store.records import Catalog, Credentials, UpstreamRecord
from mcpkit.hub.upstream_client import UpstreamUnavailable, reason, upstream_client
from mcpkit.protocol.errors import METHOD_NOT_FOUND

__all__ = ["Fetcher", "UpstreamUnavailable", "fetch_catalog", "reason", "refresh_catalog"]

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
    each list request by its `call_timeout_s`, and the whole by their sum."""
    client = upstream_client(upstream, credentials, settings)
    limit = upstream.connect_timeout_s + upstream.call_timeout_s
    try:
        with anyio.fail_after(limit):
            async with client:
                return await _list_everything(client)
    except UpstreamUnavailable:
        raise
    except TimeoutError:
        raise UpstreamUnavailable(
            f"{upstream.name}: no catalog within {limit:g} s (connect + list)") from None
    except Exception as error:  # anything a foreign server or the network can do
        raise UpstreamUnavailable(f"{upstream.name}: {reason(error)}") from error


async def refresh_catalog(
    store: Store,
    upstream: UpstreamRecord,
    settings: HubSettings,
    *,
    fetch: Fetcher | None = None,
) -> Catalog:
    """Fetch the upstream's catalog (with `fetch`, default `fetch_catalog`), store it and mark
    the upstream healthy; on failure record the error (unhealthy) and raise
    `UpstreamUnavailable`. `NotFound` if the upstream went away meanwhile."""
    credentials = await store.upstreams.credentials(upstream.user_id, upstream.id)
    try:
        catalog = await (fetch or fetch_catalog)(upstream, credentials, settings)
    except UpstreamUnavailable as error:
        log.info("upstream %s of user %s is unavailable: %s", upstream.id, upstream.user_id,
                 error)
        await store.upstreams.set_health(upstream.user_id, upstream.id, "unhealthy",
                                         error=str(error))
        raise
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


async def _list_everything(client: Client) -> Catalog:
    caps = client.server_capabilities
    tools = await client.list_tools() if "tools" in caps else []
    prompts = await client.list_prompts() if "prompts" in caps else []
    resources: Sequence[Any] = []
    templates: Sequence[Any] = []
    if "resources" in caps:
        resources = await client.list_resources()
        try:
            templates = await client.list_resource_templates()
        except ServerError as error:  # resources without templates: an empty list
            if error.code != METHOD_NOT_FOUND:
                raise
    return Catalog(
        tools=_wire(tools),
        prompts=_wire(prompts),
        resources=_wire(resources),
        resource_templates=_wire(templates),
    )


def _wire(items: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Typed MCP objects back to their wire form (camelCase, unset fields left out)."""
    return tuple(msgspec.to_builtins(item) for item in items)
