"""Client transports: they sit BELOW the client and move encoded JSON-RPC messages; eras,
ids and retries are the client's business (`mcpkit.client`).

    base.py       the contract (`ClientTransport`), optional abilities declared as Protocols
                  (`ExchangeTransport`: a request answered in the caller's task), the errors
    process.py    a stdio server as a child process: spawn, lines in and out, stop
    stdio.py      the stdio transport over that child process
    http.py       Streamable HTTP on aiohttp (both eras); h1.py: the lean HTTP/1.1 client
                  of its fast `exchange` path
    sse.py        HTTP+SSE of 2024-11-05
    websocket.py  WebSocket (subprotocol `mcp`)
    memory.py     a mcpkit `Server` object in this process: no pipes, no sockets
    _aiohttp.py   what the aiohttp-based transports share

Importing this package imports nothing heavy: each module pulls in only what it needs.
"""
