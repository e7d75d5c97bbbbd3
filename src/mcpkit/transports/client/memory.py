"""An in-process connection from a client to a `Server` object: no pipes, no sockets.

Messages are still encoded and decoded, so a `Server` behaves exactly as it does behind a
real transport (the same engine, routing and era rules); only the IO is skipped. Meant for
tests and for embedding a server in the same program.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from anyio.abc import TaskGroup

from mcpkit.protocol import jsonrpc
from mcpkit.protocol.jsonrpc import RequestId
from mcpkit.server.connection import Connection
from mcpkit.transports.client.base import ConnectionClosed, Inbound, Outgoing
from mcpkit.transports.server.routing import route

if TYPE_CHECKING:
    from mcpkit.server.server import Server

log = logging.getLogger(__name__)


class _ToClient:
    """The server's outbound channel: every message goes straight to the client session."""

    def __init__(self, inbound: Inbound) -> None:
        self.inbound = inbound

    async def send(self, message: bytes) -> None:
        self.inbound.receive(message)


class MemoryTransport:
    kind = "memory"
    per_request_streams = False

    def __init__(self, server: Server) -> None:
        self.server = server
        self.protocol_version: str | None = None
        self._connection: Connection | None = None
        self._channel: _ToClient | None = None
        self._tg: TaskGroup | None = None

    def describe(self) -> str:
        return f"in-memory server {self.server.name!r}"

    async def open(self, inbound: Inbound, task_group: TaskGroup) -> None:
        self._channel = _ToClient(inbound)
        self._connection = Connection(self._channel)
        self._tg = task_group
        self.server.engine.open_session(self._connection)

    async def send(self, message: Outgoing) -> None:
        if self._connection is None or self._channel is None or self._connection.closed:
            raise ConnectionClosed(f"{self.describe()} is closed")
        failure = route(
            self.server.engine, message.data, self._connection, self._channel, self._spawn,
            self._channel.send,
        )
        if failure is not None:
            await self._channel.send(jsonrpc.encode_error(failure.id, failure.error))

    def _spawn(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        assert self._tg is not None
        self._tg.start_soon(fn, *args)

    async def abandon(self, request_id: RequestId) -> None:
        return None

    async def close(self) -> None:
        if self._connection is not None and not self._connection.closed:
            self._connection.close()
            self.server.engine.close_session(self._connection)
