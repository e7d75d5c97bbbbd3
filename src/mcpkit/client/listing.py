"""How much of a paginated list (`tools/list`, `resources/list`, ...) the client fetches when
it follows the cursor chain itself: bounds in pages, items, bytes and cursor size, so a
server whose cursors never end, grow without end, or whose pages are huge costs the client
bounded memory and time.

    budget = ListBudget(limits, "tools/list")
    budget.page(batch)          # each page's items as it arrives
    budget.cursor(next_cursor)  # each cursor before it is followed

Going past a bound raises `ListTooLarge`, which names the list, the bound and its setting
(`Client(limits=Limits(lists=ListLimits(...)))`). The hub applies its own, tighter catalog bounds on
top (hub/catalog_limits.py).
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from mcpkit.client.errors import ClientError
from mcpkit.errors import InvalidArgument
from mcpkit.protocol import errors

MAX_LIST_PAGES = 1000
"""Pages of one list (a server that never ends its cursor chain)."""
MAX_LIST_ITEMS = 100_000
"""Items of one list, all pages together."""
MAX_LIST_BYTES = 64 * 1024 * 1024
"""Bytes of one list's items, as JSON, all pages together."""
MAX_CURSOR_BYTES = 64 * 1024
"""Bytes of one cursor (an opaque token; the client sends it back with the next page)."""


class ListTooLarge(ClientError):
    """A paginated list went past one of `ListLimits`; `str()` says which."""


@dataclass(slots=True, frozen=True)
class ListLimits:
    """Bounds of one automatically paginated list (see the module docstring)."""

    pages: int = MAX_LIST_PAGES
    items: int = MAX_LIST_ITEMS
    bytes: int = MAX_LIST_BYTES
    cursor_bytes: int = MAX_CURSOR_BYTES

    def __post_init__(self) -> None:
        if min(self.pages, self.items, self.bytes, self.cursor_bytes) < 1:
            raise InvalidArgument("ListLimits: every bound must be at least 1")


@dataclass(slots=True)
class ListBudget:
    """What one list fetch has used so far."""

    limits: ListLimits
    method: str
    pages: int = 0
    items: int = 0
    size: int = 0
    _seen: set[builtins.bytes] = field(default_factory=set)
    """Digests of the cursors followed (a repeated cursor is a loop), not the cursors."""

    def page(self, batch: list[Any]) -> None:
        """Count one page's items; `ListTooLarge` once the list passes a bound."""
        self.pages += 1
        self.items += len(batch)
        # Measured as the server sent it, near enough: the items re-encoded (cheap next to
        # decoding them), so a list's total is bounded however it is split into pages.
        self.size += len(msgspec.json.encode(batch))
        if self.items > self.limits.items:
            self._fail(f"more than {self.limits.items} items", "items")
        if self.size > self.limits.bytes:
            self._fail(f"more than {self.limits.bytes} bytes of items", "bytes")

    def cursor(self, cursor: str) -> None:
        """Check the cursor that asks for the next page; `ListTooLarge` if it is too large or
        would be past the page bound, `ProtocolError` if it repeats an earlier one."""
        size = len(cursor.encode("utf-8", "surrogatepass"))
        if size > self.limits.cursor_bytes:
            self._fail(f"a cursor of {size} bytes, over {self.limits.cursor_bytes}",
                       "cursor_bytes")
        digest = hashlib.blake2b(cursor.encode("utf-8", "surrogatepass"),
                                 digest_size=16).digest()
        if digest in self._seen:  # a loop: a broken server, not a large list
            raise errors.ProtocolError(errors.INVALID_REQUEST, f"{self.method}: the server "
                                       f"repeated cursor {cursor[:100]!r}")
        self._seen.add(digest)
        if self.pages >= self.limits.pages:
            self._fail(f"more than {self.limits.pages} pages", "pages")

    def _fail(self, what: str, setting: str) -> None:
        raise ListTooLarge(f"{self.method}: the server's list has {what} "
                           f"(ListLimits.{setting}); stopped")


async def pages(request: Callable[[str, dict[str, Any]], Awaitable[Any]], limits: ListLimits,
                method: str, key: str) -> AsyncGenerator[list[Any], None]:
    """The `key` items of each page of the paginated `method`, as they arrive, following
    `nextCursor` within `limits` (ListTooLarge past them; a repeated cursor is a
    ProtocolError). `request(method, params)` sends one page's request."""
    cursor: str | None = None
    budget = ListBudget(limits, method)
    while True:
        params = {"cursor": cursor} if cursor is not None else {}
        page = await request(method, params)
        batch = page.get(key) if isinstance(page, dict) else None
        if not isinstance(batch, list):
            raise errors.ProtocolError(
                errors.INVALID_REQUEST, f"{method}: the result has no {key!r} list")
        budget.page(batch)
        yield batch
        cursor = page.get("nextCursor")
        if not isinstance(cursor, str) or not cursor:
            return
        budget.cursor(cursor)


async def every_item(pages: AsyncGenerator[list[Any], None]) -> list[Any]:
    """All the items of `pages` (closed however it ends)."""
    items: list[Any] = []
    async with contextlib.aclosing(pages):
        async for batch in pages:
            items.extend(batch)
    return items
