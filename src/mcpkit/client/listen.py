"""The modern era's `subscriptions/listen` stream: one long request whose stream carries
list-changed notifications and updates of subscribed resources.

The Client keeps one `ListenStream`. What it listens for (the filter of `Client.listen()`
and the URIs of `Client.subscribe()`) is sent with the request, so any change restarts
it. The stream runs in the client's background task group; `restart` returns once the
server acknowledged it (`notifications/subscriptions/acknowledged`) or gave up.

Invariants:
- At most one listen request is in flight per client.
- A stream that fails is retried `LISTEN_RETRIES` times with a growing pause; a server
  error or a closed connection ends the attempts at once.
- Closing the client cancels the stream and waits up to `LISTEN_CANCEL_S` for the
  cancellation to be sent (on stdio the server would otherwise hold it open).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from mcpkit.client.session import ServerError
from mcpkit.transports.client.base import ConnectionClosed

log = logging.getLogger(__name__)

LISTEN_RETRIES = 5
"""Attempts at a listen stream that keeps failing before the client stops listening."""
LISTEN_CANCEL_S = 2.0
"""How long `close()` lets a listen stream send its cancellation."""
MAX_RETRY_PAUSE_S = 30.0
"""The longest pause between two attempts (the pause doubles from 0.5 s)."""

Request = Callable[..., Awaitable[Any]]
"""`Client.request`: the listen request is sent with no time limit."""


class ListenStream:
    def __init__(self, request: Request, describe: Callable[[], str]) -> None:
        self._request = request
        self._describe = describe
        self.filter: dict[str, Any] | None = None
        """The `Client.listen()` flags, once called."""
        self.subscriptions: set[str] = set()
        """Resource URIs whose updates are wanted (both eras)."""
        self._scope: anyio.CancelScope | None = None
        self._done = anyio.Event()
        self._done.set()  # no stream yet
        self._acknowledged: anyio.Event | None = None

    def wanted(self) -> dict[str, Any]:
        wanted = dict(self.filter or {})
        if self.subscriptions:
            wanted["resourceSubscriptions"] = sorted(self.subscriptions)
        return wanted

    async def restart(self, group: TaskGroup, ack_timeout: float) -> None:
        """Replace the stream by one for what is wanted now (none if nothing is); wait up
        to `ack_timeout` for the server's acknowledgement."""
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None
        wanted = self.wanted()
        if not any(wanted.values()):
            return
        acknowledged = anyio.Event()
        self._scope = anyio.CancelScope()
        self._done = anyio.Event()
        group.start_soon(self._run, wanted, self._scope, acknowledged, self._done)
        self._acknowledged = acknowledged
        with anyio.move_on_after(ack_timeout):
            await acknowledged.wait()

    def acknowledge(self) -> None:
        """The server sent `notifications/subscriptions/acknowledged`."""
        if self._acknowledged is not None:
            self._acknowledged.set()

    async def stop(self) -> None:
        """Cancel the stream and give it `LISTEN_CANCEL_S` to tell the server."""
        if self._scope is None:
            return
        self._scope.cancel()
        with anyio.move_on_after(LISTEN_CANCEL_S):
            await self._done.wait()

    async def _run(self, wanted: dict[str, Any], scope: anyio.CancelScope,
                   acknowledged: anyio.Event, done: anyio.Event) -> None:
        try:
            with scope:
                await self._attempts(wanted, acknowledged)
        finally:
            done.set()

    async def _attempts(self, wanted: dict[str, Any], acknowledged: anyio.Event) -> None:
        for attempt in range(LISTEN_RETRIES):
            try:
                await self._request("subscriptions/listen", {"notifications": wanted},
                                    timeout=None, max_timeout=None)
                log.info("%s ended the listen stream", self._describe())
            except Exception as exc:  # a background task must not take the client down
                log.warning("listen stream to %s failed: %s", self._describe(), exc)
                if isinstance(exc, ServerError | ConnectionClosed):
                    acknowledged.set()
                    return
            await anyio.sleep(min(MAX_RETRY_PAUSE_S, 0.5 * 2**attempt))
        acknowledged.set()
