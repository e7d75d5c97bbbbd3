"""JSON-RPC batches (2025-03-26 sessions only): answer each member, reply with one array.

`initialize` is never a batch member (2025-03-26 lifecycle: "The initialize request MUST NOT
be part of a JSON-RPC batch, as other requests and notifications are not possible until
initialization is complete"): such a member is answered -32600 and the session it would
have re-negotiated stays as it is. The other members are answered as usual.

Limits (server/admission.py): a batch of more than `max_batch_members` members is
refused whole (-32600 naming the limit), before any member runs; each request member takes
a slot of the connection (and its caller) while it runs, and a member for which
none is left is answered -32000 instead of being started.
"""

from __future__ import annotations

import asyncio
from typing import Any

from mcpkit.auth.resource import AuthInfo
from mcpkit.protocol import errors, jsonrpc, versions
from mcpkit.server import admission
from mcpkit.server.connection import Channel, Connection
from mcpkit.server.engine import Engine


async def answer_batch(
    engine: Engine, data: bytes, connection: Connection, channel: Channel, *, principal: str = "",
    auth: AuthInfo | None = None,
) -> bytes | None:
    """The encoded batch response, or None when the batch held no requests."""
    legacy = connection.legacy
    try:
        members = jsonrpc.decode_batch(data)
    except jsonrpc.DecodeFailure as failure:
        return jsonrpc.encode_error(failure.id, failure.error)
    if not _batch_allowed(legacy.protocol_version if legacy else None, members):
        return jsonrpc.encode_error(
            None, errors.invalid_request("JSON-RPC batches are only allowed in 2025-03-26 sessions")
        )
    limits = engine.admission
    if len(members) > limits.max_batch_members:
        return jsonrpc.encode_error(
            None, admission.batch_too_large(len(members), limits.max_batch_members))
    replies: list[Any] = []
    requests: list[jsonrpc.Request] = []
    for member in members:
        if isinstance(member, jsonrpc.DecodeFailure):
            engine.handle_undecodable(member, connection)
            if member.answerable:
                replies.append(jsonrpc.encode_error(member.id, member.error))
        elif isinstance(member, jsonrpc.Request) and member.method == "initialize":
            replies.append(jsonrpc.encode_error(member.id, _INITIALIZE_IN_BATCH))
        elif isinstance(member, jsonrpc.Request):
            requests.append(member)
        elif isinstance(member, jsonrpc.Notification):
            await engine.handle_notification(member, connection)
        else:
            engine.handle_response(member, connection)
    # Slots are taken right before the members start (nothing is awaited in between), and
    # given back here, by this task, whatever happens: a member cancelled before its first
    # step never runs a `finally` of its own.
    answers = []
    admitted: list[int] = []  # the footprints charged, given back below
    for request in requests:
        refused = limits.admit(connection, request.footprint)
        if refused is None:
            admitted.append(request.footprint)
            answers.append(
                engine.handle_request(request, connection, channel, principal=principal,
                                      auth=auth))
        else:
            replies.append(jsonrpc.encode_error(request.id, refused))
    try:
        replies.extend(r for r in await asyncio.gather(*answers) if r is not None)
    finally:
        for footprint in admitted:
            limits.release(connection, footprint)
    if not replies:
        return None
    return b"[" + b",".join(replies) + b"]"


_INITIALIZE_IN_BATCH = errors.invalid_request("initialize must not be part of a JSON-RPC batch")


def _batch_allowed(version: str | None, members: list[Any]) -> bool:
    # Only sessions negotiated at 2025-03-26 may batch (so a batch can never open one).
    return version is not None and versions.allows_batches(version)
