"""`EventBus`: what one replica must tell the others, and itself.

    bus = EventBus(redis)                  # redis None: this process only
    bus.subscribe(handler)                 # handler(event: dict) for every event, own too
    await bus.publish({"type": "catalog", "user": 7, "kinds": ["tools"]})

Events are small JSON objects: a user's catalog changed (drop cached views, tell the user's
sessions `list_changed`), a resource updated, a session closed, an answer to a
server→client request or a cancellation that reached a replica other than the one holding
the request. With Redis they go through one pub/sub channel, so every replica - including
the publisher - handles each event once; without it, handlers are called directly.

Pub/sub is fire-and-forget: a replica that is restarting misses events. Nothing depends on
them for correctness - cached views expire after a few seconds anyway - only for promptness.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger(__name__)

CHANNEL = "mcpkit-hub:events"
Event = dict[str, Any]
Handler = Callable[[Event], Awaitable[None]]


class EventBus:
    def __init__(self, redis: Redis | None = None, channel: str = CHANNEL) -> None:
        self._redis = redis
        self._channel = channel
        self._handlers: list[Handler] = []

    @property
    def shared(self) -> bool:
        """Whether events reach other replicas."""
        return self._redis is not None

    def subscribe(self, handler: Handler) -> None:
        self._handlers.append(handler)

    async def publish(self, event: Event) -> None:
        if self._redis is None:
            await self._deliver(event)
            return
        try:
            await self._redis.publish(self._channel, json.dumps(event, separators=(",", ":")))
        except Exception as error:  # Redis down: this replica at least
            log.warning("publishing a hub event failed (%s); handling it here only", error)
            await self._deliver(event)

    async def run(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        """Follow the Redis channel until cancelled (reconnecting after failures)."""
        if self._redis is None:
            task_status.started()
            return
        started = False
        while True:
            try:
                pubsub: Any = self._redis.pubsub()
                await pubsub.subscribe(self._channel)
                if not started:
                    started = True
                    task_status.started()
                try:
                    await self._follow(pubsub)
                finally:
                    with anyio.CancelScope(shield=True):
                        await pubsub.aclose()
            except Exception as error:
                log.warning("the hub event channel failed (%s); resubscribing", error)
                if not started:
                    started = True
                    task_status.started()
                await anyio.sleep(1.0)

    async def _follow(self, pubsub: Any) -> None:
        while True:
            message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=5.0)
            if message is None:
                continue
            try:
                event = json.loads(message["data"])
            except (ValueError, TypeError, KeyError):
                log.warning("ignoring a malformed hub event")
                continue
            if isinstance(event, dict):
                await self._deliver(event)

    async def _deliver(self, event: Event) -> None:
        for handler in self._handlers:
            try:
                await handler(event)
            except Exception:  # one handler's bug must not stop the others or the loop
                log.exception("handling hub event %s failed", event.get("type"))
