"""How much work one peer connection may have running at once (issue 20 §2: a caller's
counts are bounded, and one caller cannot starve the others).

Every request a connection sends runs in a task of its own (stdio, WebSocket, HTTP+SSE,
legacy Streamable HTTP sessions, batch members). Without a bound, 50,000 `tools/call`
written at once are 50,000 tasks, and every other request of the process waits behind
them. A connection may have at most `Server.max_requests_in_flight` requests (and
notifications whose handling awaits, such as `roots/list_changed`) running; a request past
it is not started but answered at once with -32000 ("Server busy", `data.limit`), which a
client can retry.

Why an error rather than backpressure (not reading the connection until a slot frees): the
messages that free slots arrive on the same connection - `notifications/cancelled`, and
the client's answers to the elicitation, sampling and roots requests the running tools
wait on. A reader that stops would deadlock a client that filled its slots with tools
awaiting such answers. So reading goes on: responses and the cheap notifications
(`cancelled`, `initialized`) are always handled at once, and only new work is refused.

A JSON-RPC batch holds at most `Server.max_batch_members` members (-32600 naming the
limit); its requests take one slot each, and members past the limit get -32000.
"""

from __future__ import annotations

from dataclasses import dataclass

from mcpkit.protocol import errors, jsonrpc

DEFAULT_MAX_REQUESTS_IN_FLIGHT = 256
"""Requests one connection may have running at once (a legit client rarely has ten)."""

DEFAULT_MAX_BATCH_MEMBERS = 128
"""Members one JSON-RPC batch may hold (below the slots, so a full batch runs whole)."""


def busy_error(limit: int) -> errors.McpError:
    return errors.server_busy(
        f"this connection already has {limit} requests in flight (the limit); send it again "
        "once one has been answered", limit)


def batch_too_large(members: int, limit: int) -> errors.ProtocolError:
    return errors.ProtocolError(
        errors.INVALID_REQUEST,
        f"Invalid request: a batch of {members} members exceeds the limit of {limit}",
        {"limit": limit},
    )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request that was not started (its connection is at its limit): the transport
    answers it at once with `error`, as it answers a message that did not decode."""

    error: errors.McpError
    id: jsonrpc.RequestId | None = None
    answerable: bool = True


class InFlight:
    """The count of one connection's running requests, against a limit read at each
    admission (so a change of the server's setting applies to connections already open)."""

    __slots__ = ("running",)

    def __init__(self) -> None:
        self.running = 0

    def admit(self, limit: int) -> bool:
        """Take a slot; False (nothing taken) when `limit` are taken already."""
        if self.running >= limit:
            return False
        self.running += 1
        return True

    def release(self) -> None:
        """Give back a slot `admit` took (exactly once per admission)."""
        if self.running > 0:
            self.running -= 1
