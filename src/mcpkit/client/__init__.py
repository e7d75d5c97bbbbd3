"""The MCP client: `Client` for one server, in either era, over any transport."""

from mcpkit.client.client import Client
from mcpkit.client.errors import (
    ClientError,
    ClientMisuse,
    IncompatibleServer,
    InvalidToolOutput,
    TooManyInputRounds,
)
from mcpkit.client.listing import ListLimits, ListTooLarge
from mcpkit.client.responders import form_defaults
from mcpkit.client.session import InboundLimits, RequestTimeout, ServerError, Timeouts
from mcpkit.transports.client.base import (
    ConnectionClosed,
    HttpStatusError,
    RedirectRefused,
    SessionExpired,
    TransportError,
)

__all__ = [
    "Client",
    "ClientError",
    "ClientMisuse",
    "ConnectionClosed",
    "HttpStatusError",
    "InboundLimits",
    "IncompatibleServer",
    "InvalidToolOutput",
    "ListLimits",
    "ListTooLarge",
    "RedirectRefused",
    "RequestTimeout",
    "ServerError",
    "SessionExpired",
    "Timeouts",
    "TooManyInputRounds",
    "TransportError",
    "form_defaults",
]
