"""Streamable HTTP server transport (both eras), as an ASGI application."""
