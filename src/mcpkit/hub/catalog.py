"""Fetching an upstream's catalog (tools, prompts, resources, templates) over MCP, and storing
it with the upstream's health: what `POST …/refresh`, `GET …/tools?refresh=true` and (later)
the health checker do.

    catalog = await fetch_catalog(upstream, credentials, settings)    # talks to the upstream
    catalog = await refresh_catalog(store, upstream, settings)        # fetch + store + health

A failing upstream raises `UpstreamUnavailable` with a one-line reason, after
`refresh_catalog` recorded it as the upstream's `last_error` (status "unhealthy"); the stored
catalog is then left as it was, so a flapping upstream keeps its last good list.

SSRF: unless the operator allows private upstreams, an IP-literal host is checked here (no
resolver sees it) and a name is resolved by `netguard.GuardedResolver`, which refuses the
connection if any address is not public - at connect time, so DNS rebinding after
registration does not get through. Nothing of the caller (its API token) is sent upstream:
only the upstream's own stored headers and bearer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import msgspec

from mcpkit.client import Client, ServerError
from mcpkit.hub.store.records import Catalog, Credentials, UpstreamRecord
from mcpkit.netguard import GuardedResolver, host_problem
from mcpkit.protocol.errors import METHOD_NOT_FOUND

if TYPE_CHECKING:
    from mcpkit.hub.settings import HubSettings
    from mcpkit.hub.store import Store

log = logging.getLogger(__name__)

CLIENT_KINDS = {"http": "http", "sse": "sse", "ws": "websocket", "stdio": "stdio"}
"""The store's transport names → `mcpkit.Client`'s."""
MAX_REASON = 500
"""An upstream's error, as shown and stored, is cut to this many characters."""
PROBE_TIMEOUT_S = 3.0


Fetcher = Callable[[UpstreamRecord, Credentials, "HubSettings"], Awaitable[Catalog]]
"""What `fetch_catalog` is: the seam where tests (and other transports) plug in."""


class UpstreamUnavailable(Exception):
    """The upstream could not be reached or listed; `str()` is the reason (no secrets)."""


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


def upstream_client(
    upstream: UpstreamRecord, credentials: Credentials, settings: HubSettings, **options: Any
) -> Client:
    """A (not yet connected) `Client` for `upstream`: its own stored headers and bearer, the
    SSRF checks, and its timeouts - a call may take `call_timeout_s` in all. `options` go to
    `Client` (the router's relay handlers). `UpstreamUnavailable` for a target the operator
    does not allow."""
    return Client(
        _target(upstream, settings),
        transport=CLIENT_KINDS[upstream.transport],
        headers=dict(credentials.headers),
        bearer_token=credentials.bearer,
        resolver=GuardedResolver(allow_private=settings.allow_private_upstreams),
        connect_timeout=upstream.connect_timeout_s,
        probe_timeout=min(PROBE_TIMEOUT_S, upstream.connect_timeout_s),
        timeout=upstream.call_timeout_s,
        max_timeout=upstream.call_timeout_s,
        validate_output=False,
        **options,
    )


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


def reason(error: BaseException) -> str:
    """One line for an upstream failure: the message, else the exception's type name."""
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 1] + "…"


def _target(upstream: UpstreamRecord, settings: HubSettings) -> str | list[str]:
    if upstream.transport == "stdio":
        if not settings.allow_stdio:
            raise UpstreamUnavailable(f"{upstream.name}: stdio upstreams are disabled")
        if not upstream.command:
            raise UpstreamUnavailable(f"{upstream.name}: no command")
        return list(upstream.command)
    if not upstream.url:
        raise UpstreamUnavailable(f"{upstream.name}: no URL")
    if not settings.allow_private_upstreams:
        host = urlsplit(upstream.url).hostname or ""
        problem = host_problem(host)
        if problem is not None:
            raise UpstreamUnavailable(f"{upstream.name}: refused to connect to {host}: {problem}")
    return upstream.url


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
