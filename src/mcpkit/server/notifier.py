"""Change notifications: list changes and resource updates, fanned out to whoever listens.

Legacy sessions get them on their standalone stream (stdout, or the session's GET stream),
resource updates only for URIs they subscribed to. Modern clients get them on the stream of
their `subscriptions/listen` request, only the kinds their filter asked for, each tagged
with the subscription id.

A notification may be meant for one principal only (`principal=`): an aggregating server
such as the hub tells each user about their own lists, never anyone else's.

One slow peer does not hold up the others (issue 20 §2). Each peer's notifications go out
in a sender task of its own, in order; the notifying code waits for the deliveries it
started at most `delivery_wait_s`, then goes on. While a delivery to a peer is under way,
further notifications for it wait in its outbox, where identical ones coalesce (each is a
signal to re-read a list or a resource: one pending copy says all of them) and the bytes
waiting are capped (`max_pending_bytes`; past it the new one is dropped, logged). Before,
the fan-out awaited each peer in turn: a listener that stopped reading froze every other
peer's notifications, and the tool that notified, for good.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from mcpkit.protocol import jsonrpc, meta
from mcpkit.server.connection import Channel, Connection

log = logging.getLogger(__name__)

LIST_CHANGED = {
    "tools": ("notifications/tools/list_changed", "toolsListChanged"),
    "prompts": ("notifications/prompts/list_changed", "promptsListChanged"),
    "resources": ("notifications/resources/list_changed", "resourcesListChanged"),
}
RESOURCE_UPDATED = "notifications/resources/updated"

DEFAULT_MAX_PENDING_BYTES = 1024 * 1024
"""The bytes of notifications one peer may have waiting while a delivery to it is under way
(identical ones coalesce, so this is only reached by many distinct resource updates)."""
DEFAULT_DELIVERY_WAIT_S = 1.0
"""How long a notifying call waits for the deliveries it started before going on (they go on
in the background; a peer that keeps up has its notification before the call returns)."""


@dataclass(eq=False)
class Listener:
    """One open `subscriptions/listen` request."""

    subscription_id: jsonrpc.RequestId
    filter: dict[str, Any]
    channel: Channel
    ended: anyio.Event = field(default_factory=anyio.Event)
    principal: str = ""
    resource_uris: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        self.resource_uris = frozenset(self.filter.get("resourceSubscriptions") or ())

    def wants(self, method: str, uri: str | None) -> bool:
        if uri is not None:
            return uri in self.resource_uris
        return any(
            note == method and self.filter.get(key) is True for note, key in LIST_CHANGED.values()
        )

    def encode(self, method: str, params: dict[str, Any]) -> bytes:
        """The notification as this listener gets it, tagged with its subscription id."""
        tagged = {**params, "_meta": {meta.SUBSCRIPTION_ID: self.subscription_id}}
        return jsonrpc.encode_notification(method, tagged)


Peer = Connection | Listener


@dataclass(eq=False)
class _Outbox:
    """One peer's notifications waiting for the delivery under way (by its sender task)."""

    channel: Channel
    pending: dict[bytes, None] = field(default_factory=dict)  # oldest first, no duplicates
    size: int = 0
    sender: asyncio.Task[None] | None = None
    dropped: int = 0  # notifications past the cap (logged once per outbox)

    def add(self, message: bytes, limit: int) -> bool:
        """Queue `message` (True); False when it would pass `limit` bytes (not queued).
        A message already waiting is not queued twice."""
        if message in self.pending:
            return True
        if self.size + len(message) > limit:
            return False
        self.pending[message] = None
        self.size += len(message)
        return True

    def take(self) -> bytes:
        message = next(iter(self.pending))
        del self.pending[message]
        self.size -= len(message)
        return message


class Notifier:
    def __init__(
        self,
        *,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
        delivery_wait_s: float = DEFAULT_DELIVERY_WAIT_S,
    ) -> None:
        self.connections: set[Connection] = set()
        self.listeners: set[Listener] = set()
        self.max_pending_bytes = max_pending_bytes
        self.delivery_wait_s = delivery_wait_s
        self._outboxes: dict[Peer, _Outbox] = {}  # only peers with a delivery under way
        self.ended = False
        """Set for good by `end_all` (server shutdown): a listener added later ends at once."""

    async def list_changed(self, kind: str, *, principal: str | None = None) -> None:
        """Tell everyone listening (or only `principal`'s connections) that the list of
        `kind` (tools/prompts/resources) changed."""
        method, _ = LIST_CHANGED[kind]
        await self._fan_out(method, {}, None, principal)

    async def resource_updated(self, uri: str, *, principal: str | None = None) -> None:
        await self._fan_out(RESOURCE_UPDATED, {"uri": uri}, uri, principal)

    async def _fan_out(
        self, method: str, params: dict[str, Any], uri: str | None, principal: str | None
    ) -> None:
        started = [
            sender
            for peer, channel, message in self._targets(method, params, uri, principal)
            if (sender := self._post(peer, channel, message)) is not None
        ]
        if started:
            await asyncio.wait(started, timeout=self.delivery_wait_s)

    def _targets(
        self, method: str, params: dict[str, Any], uri: str | None, principal: str | None
    ) -> Iterator[tuple[Peer, Channel, bytes]]:
        """Every peer the notification is for, with where it goes and its bytes."""
        message = (
            jsonrpc.encode_notification(method, params)
            if params
            else jsonrpc.encode_notification(method)
        )
        for conn in list(self.connections):
            if principal is not None and conn.principal != principal:
                continue
            legacy = conn.legacy
            if conn.outbound is None or legacy is None or not legacy.initialized:
                continue
            if uri is not None and uri not in legacy.subscriptions:
                continue
            yield conn, conn.outbound, message
        for listener in list(self.listeners):
            if principal is not None and listener.principal != principal:
                continue
            if listener.wants(method, uri):
                yield listener, listener.channel, listener.encode(method, params)

    def _post(self, peer: Peer, channel: Channel, message: bytes) -> asyncio.Task[None] | None:
        """Hand `message` to `peer`'s sender: a new sender task (returned) when none runs,
        else its outbox (None)."""
        box = self._outboxes.get(peer)
        if box is not None:
            if not box.add(message, self.max_pending_bytes):
                box.dropped += 1
                if box.dropped == 1:
                    log.warning("dropping notifications for a peer that is not reading: %d "
                                "bytes wait for it already (the limit is %d)", box.size,
                                self.max_pending_bytes)
            return None
        box = self._outboxes[peer] = _Outbox(channel)
        box.add(message, self.max_pending_bytes)
        box.sender = asyncio.get_running_loop().create_task(
            self._drain(peer, channel, box), name="mcpkit-notify")
        return box.sender

    async def _drain(self, peer: Peer, channel: Channel, box: _Outbox) -> None:
        """Send `peer` everything in its outbox, in order; then forget the outbox."""
        try:
            while box.pending:
                await channel.send(box.take())
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            log.debug("dropping a closed notification stream")
            self._forget(peer)
        except Exception:
            log.exception("internal error sending a notification")
        finally:
            if self._outboxes.get(peer) is box:
                del self._outboxes[peer]

    def _forget(self, peer: Peer) -> None:
        if isinstance(peer, Listener):
            self.listeners.discard(peer)
            peer.ended.set()
        else:
            self.connections.discard(peer)

    def pending_bytes(self) -> int:
        """The bytes of notifications waiting for peers that are slow to read."""
        return sum(box.size for box in self._outboxes.values())

    def end_on(self, channel: Channel) -> None:
        """The peer behind `channel` is gone (stdio EOF): end its subscriptions and stop the
        deliveries to it now, so they do not wait out the shutdown grace like requests."""
        for listener in list(self.listeners):
            if listener.channel is channel:
                listener.ended.set()
        for box in list(self._outboxes.values()):
            if box.channel is channel and box.sender is not None:
                box.sender.cancel()

    def add_listener(self, listener: Listener) -> None:
        """Register an open `subscriptions/listen` request. After `end_all` it is ended at
        once: a listen request that arrives (or was acknowledged) while the server shuts
        down must not hold its stream open until the shutdown's grace runs out."""
        self.listeners.add(listener)
        if self.ended:
            listener.ended.set()

    def end_all(self) -> None:
        """Server shutdown: end every subscription gracefully, stop every delivery, and
        every subscription added from now on (`add_listener`)."""
        self.ended = True
        for listener in self.listeners:
            listener.ended.set()
        for box in list(self._outboxes.values()):
            if box.sender is not None:
                box.sender.cancel()
