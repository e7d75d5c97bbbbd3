"""The hub's `/mcp` endpoint: a user's upstreams as one MCP server (see router.py)."""

from mcpkit.hub.router.router import HubRouter, HubServer, McpEndpoint

__all__ = ["HubRouter", "HubServer", "McpEndpoint"]
