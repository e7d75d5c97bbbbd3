"""The seam between the client session and its transports.

A client transport moves encoded JSON-RPC messages; it knows nothing of eras, ids or
timeouts beyond what its wire needs. The session hands it `Outgoing` messages and receives
through an `Inbound`:

- `Inbound.receive(data)`: one encoded message from the server (any kind). The session
  decodes it; a transport never drops a message because it does not understand it.
- `Inbound.request_failed(id, error)`: the transport could not deliver request `id` or its
  answer (an HTTP status, a stream that could not be resumed). Only transports with
  per-request exchanges (Streamable HTTP) use it.
- `Inbound.closed(error)`: the connection is gone for good (the child exited, the
  WebSocket closed); every request still pending fails with `error`.

Invariants every transport keeps:
- `send` of a request returns once the request is on its way (for HTTP: the POST is
  started); the answer arrives later through `Inbound`. `send` of a notification or a
  response returns once it is delivered and raises `TransportError` if it was refused.
- Every wait is bounded by the transport's own limits (connect, read) or by the session's
  cancellation of the task that waits.
- `close()` is idempotent and bounded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import msgspec
from anyio.abc import TaskGroup

from mcpkit.errors import TransportError as TransportError
from mcpkit.protocol.jsonrpc import RequestId


@dataclass(slots=True)
class Outgoing:
    """One message to send, with what an HTTP transport needs for its headers."""

    data: bytes
    """The encoded JSON-RPC message."""
    method: str | None = None
    """The method of a request or notification; None for a response."""
    request_id: RequestId | None = None
    """Set for requests."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra HTTP headers for this message (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`);
    transports without headers ignore them."""


class Inbound(Protocol):
    """Where a transport delivers what it receives (implemented by the client session)."""

    def receive(self, data: bytes, related: RequestId | None = None) -> None:
        """`related`: the request whose own stream carried `data`, when known."""

    def request_failed(self, request_id: RequestId, error: Exception) -> None: ...

    def closed(self, error: Exception | None) -> None: ...


@runtime_checkable
class ClientTransport(Protocol):
    """A connection to one MCP server, as the client session drives it (a `Client` given
    an object with all of these members uses it as its transport)."""

    kind: str
    """"stdio", "http", "sse", "websocket" or "memory" (for messages and era rules)."""
    per_request_streams: bool
    """True when each request has its own response stream (Streamable HTTP): closing it
    is the modern era's cancellation, and no `notifications/cancelled` is sent."""
    protocol_version: str | None
    """Set by the session once known; HTTP sends it as `MCP-Protocol-Version`."""

    async def open(self, inbound: Inbound, task_group: TaskGroup) -> None:
        """Connect; background readers run in `task_group` and report to `inbound`."""
        ...

    async def send(self, message: Outgoing) -> None: ...

    async def abandon(self, request_id: RequestId) -> None:
        """Stop receiving the answer to `request_id` (close its stream, if it has one)."""
        ...

    async def close(self) -> None: ...

    def describe(self) -> str:
        """A short human description of the peer, for error messages."""
        ...


@runtime_checkable
class ExchangeTransport(Protocol):
    """An optional ability: a request sent and answered in the calling task (Streamable
    HTTP). The session's `exchange` uses it for a caller that waits for one answer anyway
    (the hub forwarding a call): no task, no pending entry.

    A transport that has it names this Protocol among its bases, so membership is declared
    where the ability is written; the session checks it once, when it is built.
    """

    async def exchange(self, message: Outgoing) -> bytes:
        """POST `message` (a request) and return the encoded response to it. Other messages
        on the request's stream still go to `Inbound`; failures raise what `send` would
        report; cancelling the caller closes the request's stream."""
        ...


@runtime_checkable
class SessionTransport(Protocol):
    """What a transport with legacy HTTP sessions adds (Streamable HTTP)."""

    def reset_session(self) -> None:
        """Forget the session id (the server forgot it: a new `initialize` follows)."""
        ...

    async def open_standalone_stream(self) -> bool:
        """Open the GET stream for server-initiated messages; False if refused."""
        ...


class MessageTooLarge(TransportError):
    """A message from the server (a stdio line, a JSON body, one SSE event) exceeds the
    transport's limit."""


class ConnectionClosed(TransportError):
    """The connection to the server ended.

    For a stdio child: `returncode` and the tail of its stderr are kept.
    """

    def __init__(
        self, message: str, *, returncode: int | None = None, stderr_tail: str = ""
    ) -> None:
        detail = message
        if returncode is not None:
            detail += f" (exit code {returncode})"
        if stderr_tail.strip():
            detail += f"; last stderr:\n{stderr_tail[-2000:].rstrip()}"
        super().__init__(detail)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class HttpStatusError(TransportError):
    """The server answered an HTTP request with a status that carries no JSON-RPC answer
    the session could use directly (or one the era detection must look at)."""

    def __init__(
        self, status: int, body: bytes, headers: Mapping[str, str] | None = None,
        *, url: str = "",
    ) -> None:
        snippet = body[:300].decode("utf-8", "replace").strip()
        where = f" from {url}" if url else ""
        super().__init__(
            f"HTTP {status}{where}" + (f": {snippet}" if snippet else "")
        )
        self.status = status
        self.body = body
        self.headers = dict(headers or {})

    def jsonrpc_error(self) -> dict[str, Any] | None:
        """The JSON-RPC `error` object in the body, if the body is one."""
        try:
            doc = msgspec.json.decode(self.body)
        except (msgspec.DecodeError, UnicodeDecodeError):
            return None
        if isinstance(doc, dict) and isinstance(doc.get("error"), dict):
            err: dict[str, Any] = doc["error"]
            if isinstance(err.get("code"), int):
                return err
        return None


class RedirectRefused(HttpStatusError):
    """The server answered with a redirect, which the client does not follow (the user's
    headers and token must not go where a server points)."""

    def __init__(self, status: int, location: str, *, url: str = "") -> None:
        super().__init__(status, b"", {"Location": location}, url=url)
        where = f" from {url}" if url else ""
        self.args = (f"HTTP {status}{where}: a redirect to {location or '(no Location)'}, "
                     "which the client does not follow",)
        self.location = location

    def __str__(self) -> str:
        return str(self.args[0])


class SessionExpired(HttpStatusError):
    """A legacy Streamable HTTP session id was answered with 404: the server forgot it."""
