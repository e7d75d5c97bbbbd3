"""Server transports: they sit ABOVE the server, as uvicorn sits above an ASGI app, and
reach it only through the Engine's seam (`mcpkit.server.engine`).

    stdio.py     the stdio server loop (one connection: stdin/stdout)
    routing.py   one decoded message of a streaming connection → the engine
    batch.py     a JSON-RPC batch of a legacy connection → one reply
    http/        Streamable HTTP as an ASGI app (sessions, replay, limits), HTTP+SSE of
                 2024-11-05, WebSocket, and serving it all with uvicorn

Importing this package imports nothing heavy: a stdio server never loads the HTTP stack.
"""
