"""Routing the messages of a connection-oriented stream (a stdio line, a WebSocket frame, an
HTTP+SSE POST) to the engine.

Requests and batches run in tasks the transport spawns, and their answers go to the
transport's `reply`; notifications run in spawned tasks too; responses resolve the
server→client request they answer at once. A message that does not decode is handed back,
since each transport answers it its own way (an error message, or HTTP 400);
`error_reply` is the error message a streaming transport sends for it (none for a
notification).

Admission (server/admission.py): a request or batch takes a slot of its connection (and of
its caller) for as long as its task runs; when none is left it is not
started but handed back as a `Refusal`, which the transport answers like a message that did
not decode (-32000). `cancelled` and `initialized` notifications are handled at once, with
no task; a notification whose handling awaits takes a slot too, and is dropped (logged)
when none is left. A task that fails is logged and ends alone: a bug met by one message never
takes down the transport's task group, and with it the connection and its other requests.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from mcpkit.auth.resource import AuthInfo
from mcpkit.protocol import jsonrpc
from mcpkit.server.admission import Admission, Refusal
from mcpkit.server.connection import Channel, Connection
from mcpkit.server.engine import Engine
from mcpkit.transports.server.batch import answer_batch

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
    auth: AuthInfo | None = None,
) -> jsonrpc.DecodeFailure | Refusal | None:
    """Route one message; returns what the transport must answer itself at once: the
    decode failure of a message that is not valid, or the refusal of a request its
    connection has no slot for. `auth`: the verified caller of the message (an HTTP+SSE
    POST's token), else the connection's."""
    if jsonrpc.is_batch(data):
        return _start(engine, connection, None, spawn, _answer_batch,
                      engine, data, connection, channel, reply, auth)
    try:
        message = jsonrpc.decode_message(data)
    except jsonrpc.DecodeFailure as failure:
        engine.handle_undecodable(failure, connection)
        return failure
    if isinstance(message, jsonrpc.Request):
        refused = _start(engine, connection, message.id, spawn, _answer_request,
                         engine, message, connection, channel, reply, auth,
                         footprint=message.footprint)
        if refused is None:
            connection.reserve(message.id)
        return refused
    if isinstance(message, jsonrpc.Notification):
        if not engine.settle_notification(message, connection) and engine.needs_task(message):
            refused = _start(engine, connection, None, spawn, engine.handle_notification,
                             message, connection)
            if refused is not None:
                log.warning("dropping %s: the connection has no slot left", message.method)
    else:
        engine.handle_response(message, connection)
    return None


def _start(
    engine: Engine,
    connection: Connection,
    request_id: jsonrpc.RequestId | None,
    spawn: Spawn,
    fn: Callable[..., Coroutine[Any, Any, None]],
    *args: Any,
    footprint: int = 0,
) -> Refusal | None:
    """Spawn `fn(*args)` in a slot of `connection` (charged the `footprint` bytes of its
    params); the refusal when it has no slot or no bytes left."""
    admission = engine.admission
    refused = admission.admit(connection, footprint)
    if refused is not None:
        return Refusal(refused, request_id)
    spawn(_isolated(fn, admission, connection, footprint), *args)
    return None


def error_reply(failure: jsonrpc.DecodeFailure | Refusal) -> bytes | None:
    """The JSON-RPC error message answering a message that did not decode, or a refused
    request; None for a notification (JSON-RPC answers none: it is logged and dropped)."""
    if not failure.answerable:
        log.warning("dropping an undecodable notification: %s", failure.error.message)
        return None
    return jsonrpc.encode_error(failure.id, failure.error)


def _isolated(
    fn: Callable[..., Coroutine[Any, Any, None]], admission: Admission, connection: Connection,
    footprint: int,
) -> Callable[..., Coroutine[Any, Any, None]]:
    """`fn` in a task of its own whose failure is logged instead of raised: the engine
    answers every request with a result or an error, so an exception here is a bug, and it
    must cost its own message only. The task gives back its connection slot as it ends."""

    @functools.wraps(fn)
    async def run(*args: Any) -> None:
        try:
            await fn(*args)
        except Exception:
            log.exception("internal error handling a message")
        finally:
            admission.release(connection, footprint)

    return run


async def _answer_request(
    engine: Engine,
    request: jsonrpc.Request,
    connection: Connection,
    channel: Channel,
    reply: Reply,
    auth: AuthInfo | None,
) -> None:
    try:
        response = await engine.handle_request(request, connection, channel, auth=auth)
    finally:
        connection.unreserve(request.id)
    if response is not None:
        await reply(response)


async def _answer_batch(
    engine: Engine, data: bytes, connection: Connection, channel: Channel, reply: Reply,
    auth: AuthInfo | None,
) -> None:
    response: Any = await answer_batch(engine, data, connection, channel, auth=auth)
    if response is not None:
        await reply(response)
