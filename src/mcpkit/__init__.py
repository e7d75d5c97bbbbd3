"""mcpkit: the complete Model Context Protocol stack.

The public API is imported lazily, so `import mcpkit` stays cheap and a stdio server never
loads the HTTP stack:

    from mcpkit import Server, Context, content
    from mcpkit import Client, ServerManager
    from mcpkit import McpkitError          # the root of every exception mcpkit raises
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Client": "mcpkit.client.client",
    "ServerManager": "mcpkit.manager.manager",
    "Server": "mcpkit.server.server",
    "Context": "mcpkit.server.context",
    "ToolResult": "mcpkit.server.tools",
    "content": "mcpkit.server",
    "types": "mcpkit.protocol",
    # The exception tree (drawn in mcpkit/errors.py): its root and branches, and what a
    # Client user catches.
    "McpkitError": "mcpkit.errors",
    "UsageError": "mcpkit.errors",
    "InvalidArgument": "mcpkit.errors",
    "InvalidArgumentType": "mcpkit.errors",
    "InvalidState": "mcpkit.errors",
    "PeerError": "mcpkit.errors",
    "TransportError": "mcpkit.errors",
    "Timeout": "mcpkit.errors",
    "McpError": "mcpkit.protocol.errors",
    "ProtocolError": "mcpkit.protocol.errors",
    "ServerError": "mcpkit.client.session",
    "RequestTimeout": "mcpkit.client.session",
    "ClientError": "mcpkit.client.errors",
    "ConnectionClosed": "mcpkit.transports.client.base",
}

__all__ = ["Client", "ClientError", "ConnectionClosed", "Context", "InvalidArgument",
           "InvalidArgumentType", "InvalidState", "McpError", "McpkitError", "PeerError",
           "ProtocolError", "RequestTimeout", "Server", "ServerError", "ServerManager",
           "Timeout", "ToolResult", "TransportError", "UsageError", "__version__", "content",
           "types"]

if TYPE_CHECKING:
    from mcpkit.client.client import Client
    from mcpkit.client.errors import ClientError
    from mcpkit.client.session import RequestTimeout, ServerError
    from mcpkit.errors import (
        InvalidArgument,
        InvalidArgumentType,
        InvalidState,
        McpkitError,
        PeerError,
        Timeout,
        TransportError,
        UsageError,
    )
    from mcpkit.manager.manager import ServerManager
    from mcpkit.protocol import types
    from mcpkit.protocol.errors import McpError, ProtocolError
    from mcpkit.server import content
    from mcpkit.server.context import Context
    from mcpkit.server.server import Server
    from mcpkit.server.tools import ToolResult
    from mcpkit.transports.client.base import ConnectionClosed


def __getattr__(name: str) -> Any:
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'mcpkit' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = getattr(module, name) if hasattr(module, name) else importlib.import_module(
        f"{module_name}.{name}"
    )
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
