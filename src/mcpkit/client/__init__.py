"""The MCP client: `Client` for one server, in either era, over any transport, and the
value objects its settings are grouped in (`ConnectOptions`, `Timeouts`, `Responders`,
`Notifications`, `Limits`, `Behaviour`), and `OAuth`, its authorization group."""

from mcpkit.auth.errors import AuthorizationFailed
from mcpkit.client.client import Client
from mcpkit.client.errors import (
    ClientError,
    ClientMisuse,
    IncompatibleServer,
    InvalidToolOutput,
    TooManyInputRounds,
)
from mcpkit.client.listing import ListLimits, ListTooLarge
from mcpkit.client.notifications import Notifications
from mcpkit.client.oauth import OAuth
from mcpkit.client.options import Behaviour, Limits
from mcpkit.client.responders import Responders, form_defaults
from mcpkit.client.session import InboundLimits, RequestTimeout, ServerError, Timeouts
from mcpkit.client.targets import ConnectOptions
from mcpkit.transports.client.base import (
    ConnectionClosed,
    HttpStatusError,
    RedirectRefused,
    SessionExpired,
    TransportError,
)

__all__ = [
    "AuthorizationFailed",
    "Behaviour",
    "Client",
    "ClientError",
    "ClientMisuse",
    "ConnectOptions",
    "ConnectionClosed",
    "HttpStatusError",
    "InboundLimits",
    "IncompatibleServer",
    "InvalidToolOutput",
    "Limits",
    "ListLimits",
    "ListTooLarge",
    "Notifications",
    "OAuth",
    "RedirectRefused",
    "RequestTimeout",
    "Responders",
    "ServerError",
    "SessionExpired",
    "Timeouts",
    "TooManyInputRounds",
    "TransportError",
    "form_defaults",
]
