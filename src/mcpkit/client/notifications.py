"""What a `Client` does with the notifications a server sends: the user's handlers.

    Client(url, notifications=Notifications(on_log=print, on_list_changed=refresh))

Each handler may be a plain function or a coroutine function. The client keeps its own
bookkeeping (a changed tool list drops its cached catalog; a listen stream's
acknowledgement) before it calls them.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from mcpkit.protocol import errors, types

LogHandler = Callable[[types.LoggingMessageNotificationParams], Awaitable[None] | None]
ListChangedHandler = Callable[[str], Awaitable[None] | None]
"""Called with "tools", "prompts" or "resources"."""
ResourceUpdatedHandler = Callable[[str], Awaitable[None] | None]
"""Called with the URI of a subscribed resource that changed."""
NotificationHandler = Callable[[str, dict[str, Any]], Awaitable[None] | None]
"""Called with every notification, `(method, params)`, after the specific handler."""

LISTS = ("tools", "prompts", "resources")


@dataclass(frozen=True, slots=True)
class Notifications:
    on_log: LogHandler | None = None
    """`notifications/message` (a log message the server sends)."""
    on_list_changed: ListChangedHandler | None = None
    """`notifications/{tools,prompts,resources}/list_changed`."""
    on_resource_updated: ResourceUpdatedHandler | None = None
    """`notifications/resources/updated` (after `Client.subscribe(uri)`)."""
    on_notification: NotificationHandler | None = None

    async def deliver(self, method: str, params: dict[str, Any]) -> None:
        """Call the handlers `method` concerns (a log message that does not decode is
        skipped)."""
        if method == "notifications/message" and self.on_log is not None:
            with contextlib.suppress(errors.McpError):
                await _maybe_await(self.on_log(_log_params(params)))
        elif method.endswith("/list_changed"):
            kind = method.split("/")[1]
            if self.on_list_changed is not None and kind in LISTS:
                await _maybe_await(self.on_list_changed(kind))
        elif method == "notifications/resources/updated":
            uri = params.get("uri")
            if self.on_resource_updated is not None and isinstance(uri, str):
                await _maybe_await(self.on_resource_updated(uri))
        if self.on_notification is not None:
            await _maybe_await(self.on_notification(method, params))


def _log_params(params: dict[str, Any]) -> types.LoggingMessageNotificationParams:
    try:
        return msgspec.convert(params, types.LoggingMessageNotificationParams)
    except msgspec.ValidationError as exc:
        raise errors.ProtocolError(
            errors.INVALID_REQUEST,
            f"the server sent an invalid notifications/message: {exc}") from None


async def _maybe_await(outcome: Any) -> None:
    if inspect.isawaitable(outcome):
        await outcome
