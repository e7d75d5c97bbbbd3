"""Routing the messages of a connection-oriented stream (a stdio line, a WebSocket frame, an
HTTP+SSE POST) to the engine.

Requests and batches run in tasks the transport spawns, and their answers go to the
transport's `reply`; notifications run in spawned tasks too; responses resolve the
server→client request they answer at once. A message that does not decode is handed back,
since each transport answers it its own way (an error message, or HTTP 400).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcpkit.protocol import jsonrpc
from mcpkit.server.connection import Channel, Connection
from mcpkit.server.engine import Engine
from mcpkit.transports.batch import answer_batch

Spawn = Callable[..., object]
"""Start `fn(*args)` in a task the transport owns (like `TaskGroup.start_soon`)."""
Reply = Callable[[bytes], Awaitable[None]]


def route(
    engine: Engine,
    data: bytes,
    connection: Connection,
    channel: Channel,
    spawn: Spawn,
    reply: Reply,
) -> jsonrpc.DecodeFailure | None:
    """Route one message; returns the decode failure if it is not a valid message."""
    if jsonrpc.is_batch(data):
        spawn(_answer_batch, engine, data, connection, channel, reply)
        return None
    try:
        message = jsonrpc.decode_message(data)
    except jsonrpc.DecodeFailure as failure:
        return failure
    if isinstance(message, jsonrpc.Request):
        spawn(_answer_request, engine, message, connection, channel, reply)
    elif isinstance(message, jsonrpc.Notification):
        spawn(engine.handle_notification, message, connection)
    else:
        engine.handle_response(message, connection)
    return None


async def _answer_request(
    engine: Engine,
    request: jsonrpc.Request,
    connection: Connection,
    channel: Channel,
    reply: Reply,
) -> None:
    response = await engine.handle_request(request, connection, channel)
    if response is not None:
        await reply(response)


async def _answer_batch(
    engine: Engine, data: bytes, connection: Connection, channel: Channel, reply: Reply
) -> None:
    response: Any = await answer_batch(engine, data, connection, channel)
    if response is not None:
        await reply(response)
