"""One incoming request as the handlers see it (era, params, peer, and where to reply)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcpkit.protocol import jsonrpc
from mcpkit.server.connection import Channel, Connection


@dataclass(slots=True)
class Call:
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
