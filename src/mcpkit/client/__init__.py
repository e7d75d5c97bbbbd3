"""The MCP client: `Client` for one server, in either era, over any transport, and the
value objects its settings are grouped in (`ConnectOptions`, `Timeouts`, `Responders`,
`Notifications`, `Limits`, `Behaviour`), and `OAuth`, its authorization group."""

from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from mcpkit.client.oauth import OAuth


def __getattr__(name: str) -> Any:
    # `OAuth` loads the HTTP stack (aiohttp) and Authlib: only a program that authorizes pays
    # for them, so a stdio client starts as fast as before.
    if name == "OAuth":
        from mcpkit.client.oauth import OAuth

        globals()["OAuth"] = OAuth
        return OAuth
    raise AttributeError(f"module 'mcpkit.client' has no attribute {name!r}")
