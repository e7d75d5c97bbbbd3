"""Errors the client raises itself (the server's JSON-RPC errors are `ServerError`)."""

from __future__ import annotations

from mcpkit.errors import UsageError
from mcpkit.protocol import errors


class ClientError(errors.McpError):
    """The client cannot do what was asked: mostly a server it cannot work with (a
    `PeerError`); calling the Client wrongly is `ClientMisuse`, also a `UsageError`. An
    `McpError` (-32603), so a handler that uses a Client answers its own caller with it."""

    def __init__(self, message: str, data: object = None) -> None:
        super().__init__(errors.INTERNAL_ERROR, message, data)

    def __str__(self) -> str:
        return self.message


class ClientMisuse(ClientError, UsageError):
    """This program called the Client wrongly (e.g. before connecting it)."""


class IncompatibleServer(ClientError):
    """No protocol version both sides speak, or the server broke the handshake."""


class TooManyInputRounds(ClientError):
    """A modern server kept answering `input_required` past the client's bound."""


class InvalidToolOutput(ClientError):
    """A tool's `structuredContent` does not match its `outputSchema`."""
