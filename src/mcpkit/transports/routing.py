"""Routing the messages of a connection-oriented stream (a stdio line, a WebSocket frame, an
HTTP+SSE POST) to the engine.

Requests and batches run in tasks the transport spawns, and their answers go to the
transport's `reply`; notifications run in spawned tasks too; responses resolve the
server→client request they answer at once. A message that does not decode is handed back,
since each transport answers it its own way (an error message, or HTTP 400);
`error_reply` is the error message a streaming transport sends for it (none for a
notification). A task that fails is logged and ends alone: a bug met by one message never
takes down the transport's task group, and with it the connection and its other requests.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from mcpkit.protocol import jsonrpc
from mcpkit.server.connection import Channel, Connection
from mcpkit.server.engine import Engine
from mcpkit.transports.batch import answer_batch

Spawn = Callable[..., object]
"""Start `fn(*args)` in a task the transport owns (like `TaskGroup.start_soon`)."""
Reply = Callable[[bytes], Awaitable[None]]

log = logging.getLogger(__name__)


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
        spawn(_isolated(_answer_batch), engine, data, connection, channel, reply)
        return None
    try:
        message = jsonrpc.decode_message(data)
    except jsonrpc.DecodeFailure as failure:
        engine.handle_undecodable(failure, connection)
        return failure
    if isinstance(message, jsonrpc.Request):
        spawn(_isolated(_answer_request), engine, message, connection, channel, reply)
    elif isinstance(message, jsonrpc.Notification):
        spawn(_isolated(engine.handle_notification), message, connection)
    else:
        engine.handle_response(message, connection)
    return None


def error_reply(failure: jsonrpc.DecodeFailure) -> bytes | None:
    """The JSON-RPC error message answering a message that did not decode; None for a
    notification (JSON-RPC answers none: it is logged and dropped)."""
    if not failure.answerable:
        log.warning("dropping an undecodable notification: %s", failure.error.message)
        return None
    return jsonrpc.encode_error(failure.id, failure.error)


def _isolated(
    fn: Callable[..., Coroutine[Any, Any, None]],
) -> Callable[..., Coroutine[Any, Any, None]]:
    """`fn` in a task of its own whose failure is logged instead of raised: the engine
    answers every request with a result or an error, so an exception here is a bug, and it
    must cost its own message only."""

    @functools.wraps(fn)
    async def run(*args: Any) -> None:
        try:
            await fn(*args)
        except Exception:
            log.exception("internal error handling a message")

    return run


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
