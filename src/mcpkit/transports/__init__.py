"""Transports: all the IO. stdio, Streamable HTTP (+ HTTP+SSE, WebSocket) and the client side.

Importing this package imports nothing heavy; each transport module pulls in only what it
needs (a stdio server never imports the HTTP stack).
"""
