"""Example servers built with mcpkit."""
