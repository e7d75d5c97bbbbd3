"""A hostile Streamable HTTP (and WebSocket) server for the client's tests, as a process:

    python hostile_http_server.py MODE PORT OTHER_PORT LOG

MODE:
- `storm`: every request's response stream ends at once with a new event id and `retry: 0`,
  and so does every resumption (GET + Last-Event-ID): a reconnect loop, if the client obeys.
- `flood`: `tools/call` is answered by an SSE stream that carries N_NOTES log notifications
  and N_REQUESTS sampling requests before the result.
- `big`: `tools/call` with `{"size": N}` is answered by one SSE event of N bytes of text
  (a large, honest result), sent as a single `data:` line; `{"size": N, "end": false}`
  sends the line and never ends it.
- `redirect`: every request on PORT (POST, GET, the WebSocket handshake) is redirected to
  `localhost:OTHER_PORT` - another origin, which this process also serves and where it
  records every request it gets.

Every request the server gets is logged as a JSON line to LOG (method, path, headers)."""

from __future__ import annotations

import asyncio
import json
import sys

from aiohttp import web

MODE, PORT, OTHER_PORT, LOG = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
N_NOTES = 20_000
N_REQUESTS = 2_000


def log(entry: dict[str, object]) -> None:
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def record(request: web.Request, where: str, body: object = None) -> None:
    log({"where": where, "method": request.method, "path": request.path,
         "headers": dict(request.headers), "body": body})


def answer(message: dict[str, object], result: object) -> web.Response:
    return web.json_response({"jsonrpc": "2.0", "id": message["id"], "result": result},
                             headers={"Mcp-Session-Id": "hostile"})


def initialize(message: dict[str, object]) -> web.Response:
    params = message.get("params")
    version = params.get("protocolVersion") if isinstance(params, dict) else None
    return answer(message, {"protocolVersion": version or "2025-11-25",
                            "capabilities": {"tools": {}},
                            "serverInfo": {"name": "hostile", "version": "1"}})


class Storm:
    def __init__(self) -> None:
        self.event = 0

    def stream(self) -> web.Response:
        self.event += 1
        body = f"id: e{self.event}\nretry: 0\ndata: \n\n".encode()
        return web.Response(body=body, content_type="text/event-stream")


STORM = Storm()


def flood_stream(message: dict[str, object]) -> bytes:
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                       "params": {"level": "info", "data": "x" * 200}})
    parts = [f"data: {note}\n\n"] * N_NOTES
    for i in range(N_REQUESTS):
        ask = json.dumps({"jsonrpc": "2.0", "id": f"s{i}", "method": "sampling/createMessage",
                          "params": {"messages": [{"role": "user", "content": {
                              "type": "text", "text": "y" * 200}}], "maxTokens": 5}})
        parts.append(f"data: {ask}\n\n")
    done = json.dumps({"jsonrpc": "2.0", "id": message["id"],
                       "result": {"content": [{"type": "text", "text": "done"}]}})
    parts.append(f"data: {done}\n\n")
    return "".join(parts).encode()


async def big_stream(request: web.Request, message: dict[str, object]) -> web.StreamResponse:
    params = message["params"]
    arguments = params.get("arguments", {}) if isinstance(params, dict) else {}
    size, end = arguments.get("size", 0), arguments.get("end", True)
    text = "z" * size
    body = json.dumps({"jsonrpc": "2.0", "id": message["id"],
                       "result": {"content": [{"type": "text", "text": text}]}})
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    data = ("data: " + body + ("\n\n" if end else "")).encode()
    try:
        for start in range(0, len(data), 1 << 20):
            await response.write(data[start:start + (1 << 20)])
        if not end:
            await asyncio.sleep(30)  # the line never ends
    except ConnectionError:
        pass
    return response


async def post(request: web.Request) -> web.StreamResponse:
    message = json.loads(await request.read())
    record(request, "main", message if "error" in message else message.get("method"))
    if MODE == "redirect":
        raise web.HTTPTemporaryRedirect(f"http://localhost:{OTHER_PORT}{request.path}")
    if "id" not in message or "method" not in message:
        return web.Response(status=202)
    method = message["method"]
    if method == "initialize":
        return initialize(message)
    if method == "ping":
        return answer(message, {})
    if method == "tools/call" and MODE == "storm":
        return STORM.stream()
    if method == "tools/call" and MODE == "big":
        return await big_stream(request, message)
    if method == "tools/call" and MODE == "flood":
        return web.Response(body=flood_stream(message), content_type="text/event-stream",
                            headers={"Mcp-Session-Id": "hostile"})
    return web.json_response({"jsonrpc": "2.0", "id": message["id"],
                              "error": {"code": -32601, "message": "Method not found"}})


async def get(request: web.Request) -> web.StreamResponse:
    record(request, "main")
    if MODE == "redirect":
        raise web.HTTPTemporaryRedirect(f"http://localhost:{OTHER_PORT}{request.path}")
    if MODE == "storm" and "Last-Event-ID" in request.headers:
        return STORM.stream()
    return web.Response(status=405)


async def delete(request: web.Request) -> web.Response:
    return web.Response()


async def other_origin(request: web.Request) -> web.Response:
    record(request, "other")
    return web.Response(status=403, text="the other origin")


async def main() -> None:
    app = web.Application()
    app.router.add_post("/mcp", post)
    app.router.add_get("/mcp", get)
    app.router.add_delete("/mcp", delete)
    other = web.Application()
    other.router.add_route("*", "/{tail:.*}", other_origin)
    runners = [web.AppRunner(app, access_log=None), web.AppRunner(other, access_log=None)]
    for runner in runners:
        await runner.setup()
    await web.TCPSite(runners[0], "127.0.0.1", PORT).start()
    await web.TCPSite(runners[1], "127.0.0.1", OTHER_PORT).start()
    log({"ready": True})
    await asyncio.Event().wait()


asyncio.run(main())
