"""How much work one peer connection, and one caller, may have running at once (issue 20
§2: a caller's counts are bounded, and one caller cannot starve the others).

Every request a connection sends runs in a task of its own (stdio, WebSocket, HTTP+SSE,
legacy Streamable HTTP sessions, batch members; a modern HTTP request is a connection of
its own). Without a bound, 20,000 `tools/call` written at once are 20,000 tasks, and every
other request of the process waits behind them. A connection may have at most
`max_per_connection` requests running (and notifications whose handling awaits, such as
`roots/list_changed`); a request past it is not started but answered at once with -32000
("Server busy", `data.limit`), which a client can retry (over HTTP: 429, Retry-After). A
caller (the principal, else the client address) may have at most `max_per_caller` running
over all its connections, so opening more WebSockets, sessions or HTTP requests does not
multiply its share, nor let it hold every HTTP connection with slow calls.

Why an error rather than backpressure (not reading the connection until a slot frees): the
messages that free slots arrive on the same connection - `notifications/cancelled`, and
the client's answers to the elicitation, sampling and roots requests the running tools
wait on. A reader that stops would deadlock a client that filled its slots with tools
awaiting such answers. So reading goes on: responses and the cheap notifications
(`cancelled`, `initialized`) are always handled at once, and only new work is refused.

Counts alone do not bound memory: a running request holds its decoded params, up to
`jsonrpc.MAX_PARAMS_FOOTPRINT` each. So each request is also charged its params' estimated
footprint (`jsonrpc.params_footprint`) against `max_bytes_per_caller` (a stdio connection,
which has no caller, against the same number on its own) and `max_bytes` over the whole
server; past either it is refused like a request past the counts. A request always fits
when its caller has nothing running (the per-message cap is below the per-caller budget).

A JSON-RPC batch holds at most `max_batch_members` members (-32600 naming the limit); its
requests take one slot each, and members past the limit get -32000.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mcpkit.protocol import errors, jsonrpc

DEFAULT_MAX_REQUESTS_IN_FLIGHT = 256
"""Requests one connection may have running at once (a legit client rarely has ten)."""

DEFAULT_MAX_REQUESTS_PER_CALLER = 512
"""Requests one caller may have running at once over all its connections (HTTP requests,
WebSockets, sessions): well below the HTTP connection cap, so one caller cannot hold every
connection with slow calls."""

DEFAULT_MAX_BYTES_PER_CALLER = 128 * 1024 * 1024
"""Bytes of decoded params one caller's (or one stdio connection's) running requests may
hold at once."""

DEFAULT_MAX_BYTES = 512 * 1024 * 1024
"""Bytes of decoded params all running requests of the server may hold at once."""

DEFAULT_MAX_BATCH_MEMBERS = 128
"""Members one JSON-RPC batch may hold (below the slots, so a full batch runs whole)."""

if TYPE_CHECKING:
    from mcpkit.server.connection import Connection


def batch_too_large(members: int, limit: int) -> errors.ProtocolError:
    return errors.ProtocolError(
        errors.INVALID_REQUEST,
        f"Invalid request: a batch of {members} members exceeds the limit of {limit}",
        {"limit": limit},
    )


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request that was not started (its connection or caller is at its limit): the
    transport answers it at once with `error`, as it answers a message that did not decode."""

    error: errors.McpError
    id: jsonrpc.RequestId | None = None
    answerable: bool = True


class Admission:
    """The server's limits on concurrent work, and the count of each caller's running
    requests. Limits are read at each admission, so changing one applies to connections
    already open.

    A connection's `caller` names whose quota it draws on: the authenticated principal,
    else the client's address (`peers.py`); None (stdio: one client per process) counts the
    connection alone. Every `admit` that returns None is matched by one `release`."""

    def __init__(
        self,
        *,
        max_per_connection: int = DEFAULT_MAX_REQUESTS_IN_FLIGHT,
        max_per_caller: int = DEFAULT_MAX_REQUESTS_PER_CALLER,
        max_batch_members: int = DEFAULT_MAX_BATCH_MEMBERS,
        max_bytes_per_caller: int = DEFAULT_MAX_BYTES_PER_CALLER,
        max_bytes: int = DEFAULT_MAX_BYTES,
    ) -> None:
        self.max_per_connection = max_per_connection
        self.max_per_caller = max_per_caller
        self.max_batch_members = max_batch_members
        self.max_bytes_per_caller = max_bytes_per_caller
        self.max_bytes = max_bytes
        self._by_caller: dict[str, int] = {}  # only callers with something running
        self._bytes_by_caller: dict[str, int] = {}  # likewise
        self.bytes_running = 0
        """Footprint of every admitted, unanswered request's params (all callers)."""

    def admit(self, connection: Connection, footprint: int = 0) -> errors.McpError | None:
        """Take a slot for one request of `connection` whose params hold `footprint` bytes;
        the error to answer it with when its connection or its caller has no slot or no
        bytes left (nothing is taken then)."""
        refused = self._check_bytes(connection, footprint)
        if refused is not None:
            return refused
        if connection.running >= self.max_per_connection:
            return errors.server_busy(
                f"this connection already has {self.max_per_connection} requests in flight "
                "(the limit); send it again once one has been answered",
                self.max_per_connection)
        caller = connection.caller
        if caller is not None and self._by_caller.get(caller, 0) >= self.max_per_caller:
            return errors.server_busy(
                f"this client already has {self.max_per_caller} requests in flight over all "
                "its connections (the limit); send it again once one has been answered",
                self.max_per_caller)
        connection.running += 1
        if caller is not None:
            self._by_caller[caller] = self._by_caller.get(caller, 0) + 1
        self._charge(connection, footprint)
        return None

    def release(self, connection: Connection, footprint: int = 0) -> None:
        """Give back the slot (and the `footprint` bytes) of one admitted request."""
        connection.running = max(0, connection.running - 1)
        caller = connection.caller
        if caller is not None:
            left = self._by_caller.get(caller, 0) - 1
            if left > 0:
                self._by_caller[caller] = left
            else:
                self._by_caller.pop(caller, None)
        self._charge(connection, -footprint)

    def _held_bytes(self, connection: Connection) -> int:
        caller = connection.caller
        if caller is None:
            return connection.running_bytes
        return self._bytes_by_caller.get(caller, 0)

    def _check_bytes(self, connection: Connection, footprint: int) -> errors.McpError | None:
        held = self._held_bytes(connection)
        if held and held + footprint > self.max_bytes_per_caller:
            return errors.server_busy(
                f"this client's running requests already hold {held} bytes of params; "
                f"{footprint} more would pass the limit of {self.max_bytes_per_caller}",
                self.max_bytes_per_caller)
        if self.bytes_running and self.bytes_running + footprint > self.max_bytes:
            return errors.server_busy(
                f"the server's running requests hold {self.bytes_running} bytes of params; "
                f"{footprint} more would pass its limit of {self.max_bytes}", self.max_bytes)
        return None

    def _charge(self, connection: Connection, footprint: int) -> None:
        if not footprint:
            return
        self.bytes_running = max(0, self.bytes_running + footprint)
        connection.running_bytes = max(0, connection.running_bytes + footprint)
        caller = connection.caller
        if caller is not None:
            held = self._bytes_by_caller.get(caller, 0) + footprint
            if held > 0:
                self._bytes_by_caller[caller] = held
            else:
                self._bytes_by_caller.pop(caller, None)

    def running(self, caller: str) -> int:
        """How many requests `caller` has running now."""
        return self._by_caller.get(caller, 0)
