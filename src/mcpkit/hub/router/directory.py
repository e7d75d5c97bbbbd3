"""A user's upstreams as one server: the aggregated lists and where each name leads.

    view = await directory.view(user_id)          # cached for `ttl_s`; fresh after `forget`
    view.tools            the exposed tool objects, named `<upstream>__<tool>`
    view.tool("a__b")     -> Route(upstream, "b")  or None

Built from the stored catalogs (`store.catalog.all`), never by asking upstreams: a list
request costs one database read, not a round trip to every upstream. What is left out:
- disabled upstreams, and tools that `enabled_tools` / `disabled_tools` filter out;
- upstreams whose last check failed ("unhealthy"): an upstream that is down drops out of
  the lists (one log line per rebuild) instead of failing them; the health checker, or a
  successful call, brings it back. An upstream in "needs_auth" stays listed (its last
  catalog, if it ever had one): calling it answers what login it needs.

Names: tools and prompts get `<upstream>__<name>` through one `NameTable` per kind, filled
in upstream-name order, so the same catalogs always give the same names and a collision
(sanitizing is lossy) gets a hash-suffixed variant instead of an error. Resources keep their
URIs - they are addresses that tool results and prompts refer to - and a URI two upstreams
both list leads to the first of them by name. Templates are matched in the same order.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from mcpkit.hub.store import Catalog, UpstreamRecord
from mcpkit.manager.names import NameTable
from mcpkit.server.resources import compile_template

log = logging.getLogger(__name__)

CatalogSource = Callable[[int], Awaitable[Sequence[tuple[UpstreamRecord, Catalog]]]]
"""user id → every enabled upstream of the user with its stored catalog."""


@dataclass(frozen=True, slots=True)
class Route:
    """Where an exposed name leads: the upstream and the name it has there."""

    upstream: UpstreamRecord
    name: str
    definition: dict[str, Any] | None = None
    """A tool's object as the upstream listed it (its call needs the `x-mcp-header`
    annotations: `forward.py`)."""


@dataclass(slots=True)
class View:
    """One user's aggregate at one moment (immutable once built)."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[dict[str, Any]] = field(default_factory=list)
    resources: list[dict[str, Any]] = field(default_factory=list)
    templates: list[dict[str, Any]] = field(default_factory=list)
    upstreams: dict[str, UpstreamRecord] = field(default_factory=dict)
    """Every enabled upstream by id, the unhealthy ones too (calls may still reach them)."""
    left_out: list[str] = field(default_factory=list)
    """Names of the upstreams dropped from the lists because they are down."""
    tool_names: dict[tuple[str, str], str] = field(default_factory=dict)
    """(upstream id, the tool's name there) → its exposed name, for every listed tool."""
    _tools: dict[str, Route] = field(default_factory=dict)
    _prompts: dict[str, Route] = field(default_factory=dict)
    _resources: dict[str, Route] = field(default_factory=dict)
    _templates: list[tuple[re.Pattern[str], Route]] = field(default_factory=list)
    built_at: float = 0.0

    def tool(self, exposed: str) -> Route | None:
        return self._tools.get(exposed)

    def prompt(self, exposed: str) -> Route | None:
        return self._prompts.get(exposed)

    def resource(self, uri: str) -> Route | None:
        """The upstream serving `uri`: a listed resource, else the first matching template."""
        route = self._resources.get(uri)
        if route is not None:
            return route
        for pattern, template_route in self._templates:
            if pattern.fullmatch(uri):
                return Route(template_route.upstream, uri)
        return None

    def template(self, uri_template: str) -> Route | None:
        """The upstream that listed the template `uri_template` (completions refer to it)."""
        for item, (_pattern, route) in zip(self.templates, self._templates, strict=True):
            if item.get("uriTemplate") == uri_template:
                return route
        return None


def build_view(entries: Sequence[tuple[UpstreamRecord, Catalog]]) -> View:
    """The aggregate of `entries` (upstream-name order; see the module docstring)."""
    view = View(built_at=time.monotonic())
    tool_names, prompt_names = NameTable(prefix=""), NameTable(prefix="")
    for upstream, catalog in entries:
        view.upstreams[upstream.id] = upstream
        if upstream.health_status == "unhealthy":
            view.left_out.append(upstream.name)
            continue
        for tool in catalog.tools:
            original = tool.get("name")
            if isinstance(original, str) and upstream.tool_allowed(original):
                exposed = tool_names.add(upstream.name, original)
                if exposed in view._tools:  # listed twice by the upstream
                    continue
                view.tools.append({**tool, "name": exposed})
                view._tools[exposed] = Route(upstream, original, tool)
                view.tool_names[(upstream.id, original)] = exposed
        for prompt in catalog.prompts:
            original = prompt.get("name")
            if isinstance(original, str):
                exposed = prompt_names.add(upstream.name, original)
                if exposed in view._prompts:
                    continue
                view.prompts.append({**prompt, "name": exposed})
                view._prompts[exposed] = Route(upstream, original)
        _add_resources(view, upstream, catalog)
    return view


def _add_resources(view: View, upstream: UpstreamRecord, catalog: Catalog) -> None:
    for resource in catalog.resources:
        uri = resource.get("uri")
        if not isinstance(uri, str):
            continue
        if uri in view._resources:
            log.info("resource %s of upstream %s is hidden by upstream %s's", uri,
                     upstream.name, view._resources[uri].upstream.name)
            continue
        view.resources.append(resource)
        view._resources[uri] = Route(upstream, uri)
    for template in catalog.resource_templates:
        uri_template = template.get("uriTemplate")
        if not isinstance(uri_template, str):
            continue
        try:
            pattern, _names = compile_template(uri_template)
        except re.error:  # an upstream's odd template must not break the user's lists
            log.info("upstream %s lists an unusable URI template %r", upstream.name,
                     uri_template)
            continue
        view.templates.append(template)
        view._templates.append((pattern, Route(upstream, uri_template)))


class Directory:
    """Per-user views, built from the store and kept for `ttl_s` seconds.

    A view is rebuilt when it is older than `ttl_s`, or at once after `forget(user)` - which
    the router calls when it learns that the user's upstreams or catalogs changed (a REST
    change, a refresh, an upstream's list_changed; from other replicas through the event
    bus). Lists always read fresh (`fresh=True`): staleness only ever affects routing calls,
    for at most `ttl_s`.
    """

    def __init__(self, source: CatalogSource, *, ttl_s: float = 5.0) -> None:
        self._source = source
        self._ttl_s = ttl_s
        self._views: dict[int, View] = {}
        self._locks: dict[int, anyio.Lock] = {}

    async def view(self, user_id: int, *, fresh: bool = False) -> View:
        cached = self._views.get(user_id)
        if not fresh and cached is not None and time.monotonic() - cached.built_at < self._ttl_s:
            return cached
        lock = self._locks.setdefault(user_id, anyio.Lock())
        async with lock:
            cached = self._views.get(user_id)
            if (not fresh and cached is not None
                    and time.monotonic() - cached.built_at < self._ttl_s):
                return cached  # another task rebuilt it while this one waited
            view = build_view(await self._source(user_id))
            if view.left_out:
                log.info("user %s: leaving out upstreams that are down: %s", user_id,
                         ", ".join(view.left_out))
            self._views[user_id] = view
            return view

    def forget(self, user_id: int) -> None:
        self._views.pop(user_id, None)

    def forget_all(self) -> None:
        self._views.clear()
