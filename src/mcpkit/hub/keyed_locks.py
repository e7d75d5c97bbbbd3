"""`KeyedLocks`: one anyio lock per key, kept only while some task holds or waits for it.

    locks = KeyedLocks[tuple[int, str]]()
    async with locks.hold((user_id, upstream_id)):
        ...                                   # one task per key at a time

A plain `dict.setdefault(key, Lock())` keeps an entry for every key ever used: for keys a
caller mints (a login per user and upstream), memory that only grows. Here an entry lives
while its count of holders and waiters is above zero. Taking the entry and counting oneself
in happen with no await between them, so on one event loop no task can find an entry that
is being removed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Hashable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import anyio

K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class _Entry:
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    users: int = 0


class KeyedLocks(Generic[K]):
    def __init__(self) -> None:
        self._entries: dict[K, _Entry] = {}

    def __len__(self) -> int:
        """Keys held or waited for now."""
        return len(self._entries)

    @asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = _Entry()
        entry.users += 1
        try:
            async with entry.lock:
                yield
        finally:
            entry.users -= 1
            if entry.users == 0:
                del self._entries[key]


__all__ = ["KeyedLocks"]
