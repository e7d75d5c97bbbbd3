"""A task group hosted by a task of its own.

A task group normally lives in one `async with` block, so whoever opens it must close it
from the same task. The client and the server manager run background work (readers,
watchers, restarts) that must outlive the call that started it and may be stopped from
another task: they open a `HostedTaskGroup`, whose group is entered and exited by a
dedicated asyncio task. (asyncio only, like the HTTP transports.)
"""

from __future__ import annotations

import asyncio
import contextlib

import anyio
from anyio.abc import TaskGroup

from mcpkit.errors import InvalidState

EXIT_GRACE_S = 5.0
"""How long `close()` waits for the hosted tasks to finish after cancelling them."""


class HostedTaskGroup:
    def __init__(self) -> None:
        self._host: asyncio.Task[None] | None = None
        self._group: TaskGroup | None = None
        self._stop = anyio.Event()

    @property
    def running(self) -> bool:
        return self._host is not None

    @property
    def group(self) -> TaskGroup:
        if self._group is None:
            raise InvalidState("the hosted task group is not running")
        return self._group

    async def open(self) -> TaskGroup:
        """Start the host task; returns once its task group accepts tasks."""
        if self._host is not None:
            raise InvalidState("the hosted task group is already running")
        ready = anyio.Event()
        self._stop = anyio.Event()
        self._host = asyncio.get_running_loop().create_task(self._run(ready))
        await ready.wait()
        return self.group

    async def _run(self, ready: anyio.Event) -> None:
        async with anyio.create_task_group() as tg:
            self._group = tg
            ready.set()
            await self._stop.wait()
            tg.cancel_scope.cancel()

    async def close(self) -> None:
        """Cancel the hosted tasks and wait (bounded) for them to end; safe to repeat."""
        host, self._host = self._host, None
        if host is None:
            return
        with anyio.CancelScope(shield=True):
            self._stop.set()
            with anyio.move_on_after(EXIT_GRACE_S), contextlib.suppress(Exception):
                await host
        self._group = None
