"""How much of an upstream's catalog the hub takes: bounds in count, bytes and nesting, so a
hostile or broken upstream cannot make the hub fetch, hold, store and serve without end.

    limits = CatalogLimits.from_settings(settings)
    budget = CatalogBudget(limits, upstream.name)
    budget.next_page("tools/list")     # before each page
    budget.admit("tools", tool)        # each item as its page arrives; CatalogTooLarge past a bound

The bounds (defaults; the first three are settings, `MCPKIT_HUB_MAX_CATALOG_*`):

- `max_items`: items in one list (tools, prompts, resources or templates) - 2000;
- `max_bytes`: the whole catalog, as JSON - 8 MiB;
- `max_item_bytes`: one item, as JSON - 256 KiB (a tool with a large schema is ~10 KiB);
- `max_depth`: arrays and objects nested in one item - 64;
- `max_name_chars`: a tool's or prompt's name - 256; `max_uri_chars`: a resource's URI or a
  template - 2048;
- `max_pages`: pages of one list - 100 (an endless cursor chain).

And one user's upstreams together: `MCPKIT_HUB_MAX_USER_CATALOG_BYTES` (32 MiB), checked
when a refresh would store a catalog (`catalog.refresh_catalog`): what one user's /mcp lists
hold, however many upstreams they register.

Time is bounded apart from these: the whole fetch by the upstream's connect + call timeouts
(`catalog.fetch_catalog`), and one page by the client's message limit (16 MiB).

Going past a bound fails the fetch with `CatalogTooLarge`, which says what was too large and
by how much; `refresh_catalog` records it as the upstream's `last_error` and keeps the last
good catalog. Pages are checked as they arrive, so the hub never holds more than `max_bytes`
plus one page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

from mcpkit.hub.upstream_client import UpstreamUnavailable

if TYPE_CHECKING:
    from mcpkit.hub.settings import HubSettings

MAX_CATALOG_ITEMS = 2000
MAX_CATALOG_BYTES = 8 * 1024 * 1024
MAX_CATALOG_ITEM_BYTES = 256 * 1024
MAX_ITEM_DEPTH = 64
MAX_NAME_CHARS = 256
MAX_URI_CHARS = 2048
MAX_CATALOG_PAGES = 100

IDENTITY = {"tools": "name", "prompts": "name", "resources": "uri",
            "resource_templates": "uriTemplate"}
"""Each list's identifying member."""


class CatalogTooLarge(UpstreamUnavailable):
    """The upstream's catalog went past one of the hub's bounds; `str()` says which."""


@dataclass(frozen=True, slots=True)
class CatalogLimits:
    max_items: int = MAX_CATALOG_ITEMS
    max_bytes: int = MAX_CATALOG_BYTES
    max_item_bytes: int = MAX_CATALOG_ITEM_BYTES
    max_depth: int = MAX_ITEM_DEPTH
    max_name_chars: int = MAX_NAME_CHARS
    max_uri_chars: int = MAX_URI_CHARS
    max_pages: int = MAX_CATALOG_PAGES

    @classmethod
    def from_settings(cls, settings: HubSettings) -> CatalogLimits:
        return cls(max_items=settings.max_catalog_items, max_bytes=settings.max_catalog_bytes,
                   max_item_bytes=settings.max_catalog_item_bytes)


class CatalogBudget:
    """What one fetch has taken so far, against `limits`."""

    def __init__(self, limits: CatalogLimits, upstream_name: str) -> None:
        self.limits = limits
        self.upstream_name = upstream_name
        self.bytes = 0
        self.items: dict[str, int] = {}
        self.pages: dict[str, int] = {}

    def next_page(self, method: str) -> None:
        """Count one more page of `method`; past `max_pages`, `CatalogTooLarge`."""
        pages = self.pages[method] = self.pages.get(method, 0) + 1
        if pages > self.limits.max_pages:
            self._refuse(f"{method} goes on past {self.limits.max_pages} pages")

    def admit(self, kind: str, item: dict[str, Any]) -> None:
        """Count `item` (an object of the list `kind`, as the upstream sent it) in;
        `CatalogTooLarge` when it, or the catalog with it, goes past a bound. Nesting is
        checked before anything else walks the item."""
        limits = self.limits
        count = self.items[kind] = self.items.get(kind, 0) + 1
        if count > limits.max_items:
            self._refuse(f"more than {limits.max_items} {_plural(kind)} "
                         "(MCPKIT_HUB_MAX_CATALOG_ITEMS)")
        identity = item.get(IDENTITY[kind])
        label = _label(identity)
        if isinstance(identity, str):
            most = limits.max_name_chars if IDENTITY[kind] == "name" else limits.max_uri_chars
            if len(identity) > most:
                self._refuse(f"a {_singular(kind)} {IDENTITY[kind]} of {len(identity):,} "
                             f"characters ({label}); at most {most:,}")
        if nested_deeper_than(item, limits.max_depth):
            self._refuse(f"{_singular(kind)} {label} nests deeper than {limits.max_depth} "
                         "levels")
        size = len(msgspec.json.encode(item))
        if size > limits.max_item_bytes:
            self._refuse(f"{_singular(kind)} {label} is {size:,} bytes; at most "
                         f"{limits.max_item_bytes:,} (MCPKIT_HUB_MAX_CATALOG_ITEM_BYTES)")
        self.bytes += size
        if self.bytes > limits.max_bytes:
            self._refuse(f"the catalog passes {limits.max_bytes:,} bytes "
                         "(MCPKIT_HUB_MAX_CATALOG_BYTES)")

    def _refuse(self, why: str) -> None:
        raise CatalogTooLarge(f"{self.upstream_name}: catalog too large: {why}")


def nested_deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels in `value` (iteratively: a
    hostile value must not exhaust the stack of whoever checks it)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children
                     if isinstance(child, dict | list))
    return False


def _label(identity: object) -> str:
    if not isinstance(identity, str):
        return "(unnamed)"
    return repr(identity if len(identity) <= 40 else identity[:39] + "…")


def _plural(kind: str) -> str:
    return kind.replace("_", " ")


def _singular(kind: str) -> str:
    return _plural(kind).removesuffix("s")
