"""Transports: all the IO, by side. `server/` (stdio, Streamable HTTP + HTTP+SSE, WebSocket)
sits above the server and reaches it only through the Engine's seam; `client/` sits below the
client.

Importing this package imports nothing heavy; each transport module pulls in only what it
needs (a stdio server never imports the HTTP stack).
"""
