"""A hostile upstream for the hub's catalog bounds, run as a real process: a bare ASGI app
speaking just enough legacy Streamable HTTP (JSON answers) to be registered, whose lists are
built to hurt whoever fetches them.

    python tests/hub/router/hostile_server.py MODE [--size N] [--pages N] PORT

Modes (what `tools/list` answers; `--size` and `--pages` scale them):
- `flood`: `--pages` pages (default: an endless cursor chain) of `--size` tools, each with a
  4 KiB description;
- `giant`: one tool whose description is `--size` bytes;
- `long-name`: one tool whose name is `--size` characters;
- `deep`: one tool whose inputSchema nests `--size` objects deep;
- `drip`: answers tools/list one byte every 0.2 s, never finishing.

Every other request gets a minimal answer (initialize, ping, empty lists); anything unknown
is -32601, so a client probing the modern era falls back to the legacy one.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio

PROTOCOL = "2025-11-25"
DESCRIPTION = "d" * 4096
DRIP_INTERVAL_S = 0.2
DRIP_LIMIT_S = 600.0
"""The drip stops by itself after this long (the process never outlives its test anyway)."""

Send = Any


def tools_page(mode: str, size: int, page: int, pages: int | None) -> bytes:
    """The `tools/list` result for page `page` (JSON text of the result object)."""
    if mode == "flood":
        tools = [{"name": f"t{page}_{i}", "description": DESCRIPTION,
                  "inputSchema": {"type": "object"}} for i in range(size)]
        result: dict[str, Any] = {"tools": tools}
        if pages is None or page + 1 < pages:
            result["nextCursor"] = f"p{page + 1}"
        return json.dumps(result).encode()
    if mode == "giant":
        return json.dumps({"tools": [{"name": "giant", "description": "x" * size,
                                      "inputSchema": {"type": "object"}}]}).encode()
    if mode == "long-name":
        return json.dumps({"tools": [{"name": "n" * size,
                                      "inputSchema": {"type": "object"}}]}).encode()
    if mode == "deep":
        schema = '{"type":"object","properties":{"a":' * size + '{"type":"string"}' + "}}" * size
        return ('{"tools":[{"name":"deep","inputSchema":' + schema + "}]}").encode()
    raise ValueError(mode)


def build(mode: str, size: int, pages: int | None) -> Any:
    async def app(scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if scope["method"] != "POST":
            await _answer(send, 405, b"")
            return
        request = json.loads(body)
        if "id" not in request:
            await _answer(send, 202, b"")
            return
        method, rid = request.get("method"), json.dumps(request["id"])
        if method == "tools/list" and mode == "drip":
            await _drip(send, rid)
            return
        if method == "tools/list":
            cursor = (request.get("params") or {}).get("cursor") or "p0"
            result = tools_page(mode, size, int(cursor[1:]), pages)
        else:
            result = json.dumps(_plain_result(method)).encode() if _known(method) else b""
        if not result:
            answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": {
                "code": -32601, "message": f"Method not found: {method}"}}).encode()
        else:
            answer = b'{"jsonrpc":"2.0","id":' + rid.encode() + b',"result":' + result + b"}"
        await _answer(send, 200, answer)

    return app


def _known(method: object) -> bool:
    return method in ("initialize", "ping", "logging/setLevel")


def _plain_result(method: object) -> dict[str, Any]:
    if method == "initialize":
        return {"protocolVersion": PROTOCOL, "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"}}
    return {}


async def _answer(send: Send, status: int, body: bytes) -> None:
    headers = [(b"content-type", b"application/json")] if body else []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _drip(send: Send, rid: str) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    start = b'{"jsonrpc":"2.0","id":' + rid.encode() + b',"result":{"tools":['
    for index in range(int(DRIP_LIMIT_S / DRIP_INTERVAL_S)):
        chunk = start[index:index + 1] or b" "
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await anyio.sleep(DRIP_INTERVAL_S)
    await send({"type": "http.response.body", "body": b""})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["flood", "giant", "long-name", "deep", "drip"])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--pages", type=int, default=None)
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(build(args.mode, args.size, args.pages), host="127.0.0.1", port=args.port,
                log_level="warning")


if __name__ == "__main__":
    main()
