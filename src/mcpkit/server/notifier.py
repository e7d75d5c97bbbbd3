"""Change notifications: list changes and resource updates, fanned out to whoever listens.

Legacy sessions get them on their standalone stream (stdout, or the session's GET stream),
resource updates only for URIs they subscribed to. Modern clients get them on the stream of
their `subscriptions/listen` request, only the kinds their filter asked for, each tagged
with the subscription id.

A notification may be meant for one principal only (`principal=`): an aggregating server
such as the hub tells each user about their own lists, never anyone else's.
"""

from __future__ import annotations

import logging
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


@dataclass(eq=False)
class Listener:
    """One open `subscriptions/listen` request."""

    subscription_id: jsonrpc.RequestId
    filter: dict[str, Any]
    channel: Channel
    ended: anyio.Event = field(default_factory=anyio.Event)
    principal: str = ""

    def wants(self, method: str, uri: str | None) -> bool:
        if uri is not None:
            return uri in (self.filter.get("resourceSubscriptions") or ())
        return any(
            note == method and self.filter.get(key) is True for note, key in LIST_CHANGED.values()
        )

    async def send(self, method: str, params: dict[str, Any]) -> None:
        tagged = {**params, "_meta": {meta.SUBSCRIPTION_ID: self.subscription_id}}
        await self.channel.send(jsonrpc.encode_notification(method, tagged))


class Notifier:
    def __init__(self) -> None:
        self.connections: set[Connection] = set()
        self.listeners: set[Listener] = set()

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
            await self._deliver(conn.outbound.send(message), conn)
        for listener in list(self.listeners):
            if principal is not None and listener.principal != principal:
                continue
            if listener.wants(method, uri):
                await self._deliver(listener.send(method, params), listener)

    async def _deliver(self, sending: Any, owner: Connection | Listener) -> None:
        try:
            await sending
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            log.debug("dropping a closed notification stream")
            if isinstance(owner, Listener):
                self.listeners.discard(owner)
                owner.ended.set()
            else:
                self.connections.discard(owner)

    def end_on(self, channel: Channel) -> None:
        """The peer behind `channel` is gone (stdio EOF): end its subscriptions now, so
        they do not wait out the shutdown grace like ordinary requests."""
        for listener in list(self.listeners):
            if listener.channel is channel:
                listener.ended.set()

    def end_all(self) -> None:
        """Server shutdown: end every subscription gracefully."""
        for listener in self.listeners:
            listener.ended.set()
