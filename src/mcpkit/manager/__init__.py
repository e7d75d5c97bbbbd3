"""Many MCP servers at once: config files, `ServerManager`, the `mcpkit mcp` command."""
