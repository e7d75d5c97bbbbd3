"""mcpkit: the complete Model Context Protocol stack.

The public API is imported lazily, so `import mcpkit` stays cheap and a stdio server never
loads the HTTP stack:

    from mcpkit import Server, Context, content
    from mcpkit import Client, ServerManager
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
    "McpError": "mcpkit.protocol.errors",
    "ProtocolError": "mcpkit.protocol.errors",
    "content": "mcpkit.server",
    "types": "mcpkit.protocol",
}

__all__ = ["Client", "Context", "McpError", "ProtocolError", "Server", "ServerManager",
           "ToolResult", "__version__", "content", "types"]

if TYPE_CHECKING:
    from mcpkit.client.client import Client
    from mcpkit.manager.manager import ServerManager
    from mcpkit.protocol import types
    from mcpkit.protocol.errors import McpError, ProtocolError
    from mcpkit.server import content
    from mcpkit.server.context import Context
    from mcpkit.server.server import Server
    from mcpkit.server.tools import ToolResult


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
