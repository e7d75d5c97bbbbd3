"""One incoming request as the handlers see it (era, params, peer, and where to reply)."""

from __future__ import annotations

from typing import Any

import msgspec

from mcpkit.auth.resource import AuthInfo
from mcpkit.protocol import jsonrpc
from mcpkit.server.connection import Channel, Connection


class Call(msgspec.Struct):
    """Built once per request by the engine (`Engine.admit`), with keyword arguments. A
    msgspec Struct rather than a dataclass: it takes keyword arguments in C, at under a
    third of a slotted dataclass's cost on this per-request path."""

    request_id: jsonrpc.RequestId
    method: str
    params: dict[str, Any]
    modern: bool
    protocol_version: str
    client_capabilities: dict[str, Any]
    client_info: dict[str, Any] | None
    log_level: str | None
    connection: Connection
    channel: Channel
    principal: str = ""
    auth: AuthInfo | None = None
    """The verified OAuth caller of this request (a server with `ResourceAuth`), else None."""
