"""Catalog refreshes in flight, shared fairly between users.

A refresh holds its slot for as long as the upstream takes, and the upstream, its address and
its timeouts (up to an hour) are the user's choice. With one process-wide pool, a user whose
upstreams never answer could hold every slot and make every other user's refreshes, health
checks and first `/mcp` listings wait. So a refresh takes a slot of its user's first (at most
`per_user` at once), then one of the process's (`total`): one user holds at most `per_user` of
the `total`, and everyone else keeps the rest.

The per-user table holds only the users with a refresh waiting or running (an entry goes when
its last holder leaves), so it is bounded by the refreshes in flight, not by the users.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio

from mcpkit.errors import InvalidArgument

DEFAULT_REFRESHES_PER_USER = 2


@dataclass(slots=True)
class _UserSlots:
    limiter: anyio.Semaphore
    holders: int = field(default=0)
    """Refreshes of this user waiting for or holding a slot."""


class RefreshSlots:
    """`async with slots.for_user(user_id):` around each refresh (REST, /mcp, health)."""

    def __init__(self, total: int, per_user: int = DEFAULT_REFRESHES_PER_USER) -> None:
        if total < 1 or per_user < 1:
            raise InvalidArgument("refresh slots: total and per_user must be at least 1")
        self.total = total
        self.per_user = min(per_user, total)
        self._process = anyio.Semaphore(total)
        self._users: dict[int, _UserSlots] = {}

    @asynccontextmanager
    async def for_user(self, user_id: int) -> AsyncIterator[None]:
        user = self._users.get(user_id)
        if user is None:
            user = self._users[user_id] = _UserSlots(anyio.Semaphore(self.per_user))
        user.holders += 1
        try:
            async with user.limiter, self._process:
                yield
        finally:
            user.holders -= 1
            if user.holders == 0:
                del self._users[user_id]

    @property
    def users_in_flight(self) -> int:
        """How many users have a refresh waiting or running (the table's size)."""
        return len(self._users)
