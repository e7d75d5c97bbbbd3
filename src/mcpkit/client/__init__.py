"""The MCP client: `Client` for one server, in either era, over any transport, and the
value objects its settings are grouped in (`ConnectOptions`, `Timeouts`, `Responders`,
`Notifications`, `Limits`, `Behaviour`), and its authorization group: `OAuth` (a user logs
in) or `MachineAuth` with a machine grant (`ClientCredentialsGrant`, `WorkloadIdentityGrant`,
`EnterpriseGrant`); either takes `dpop=True` (or a `DPoPKey`); or `TokenHook` for callers
who bring their own tokens."""

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
from mcpkit.client.token_hook import TokenHook
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
    "ClientCredentialsGrant",
    "ClientError",
    "ClientMisuse",
    "ConnectOptions",
    "ConnectionClosed",
    "DPoPKey",
    "EnterpriseGrant",
    "HttpStatusError",
    "InboundLimits",
    "IncompatibleServer",
    "InvalidToolOutput",
    "Limits",
    "ListLimits",
    "ListTooLarge",
    "MachineAuth",
    "Notifications",
    "OAuth",
    "RedirectRefused",
    "RequestTimeout",
    "Responders",
    "ServerError",
    "SessionExpired",
    "Timeouts",
    "TokenHook",
    "TooManyInputRounds",
    "TransportError",
    "WorkloadIdentityGrant",
    "form_defaults",
]

if TYPE_CHECKING:
    from mcpkit.auth.dpop import DPoPKey
    from mcpkit.client.oauth import OAuth
    from mcpkit.client.oauth_machine import MachineAuth
    from mcpkit.client.oauth_machine_grants import (
        ClientCredentialsGrant,
        EnterpriseGrant,
        WorkloadIdentityGrant,
    )

_LAZY = {
    "OAuth": "mcpkit.client.oauth",
    "MachineAuth": "mcpkit.client.oauth_machine",
    "ClientCredentialsGrant": "mcpkit.client.oauth_machine_grants",
    "EnterpriseGrant": "mcpkit.client.oauth_machine_grants",
    "WorkloadIdentityGrant": "mcpkit.client.oauth_machine_grants",
    "DPoPKey": "mcpkit.auth.dpop",
}
"""Loaded on first use: the authorization groups load the HTTP stack (aiohttp), Authlib and
joserfc, which only a program that authorizes pays for (a stdio client starts as fast as
before)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpkit.client' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
