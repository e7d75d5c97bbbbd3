"""A hostile stdio server for the CLI tests: its `tools/list` never ends (each page names a
new cursor), the rest of its catalog is empty. Plain JSON-RPC lines, handshake era.

    python tests/manager/endless_server.py
"""

from __future__ import annotations

import json
import sys


def answer(message: dict[str, object]) -> dict[str, object] | None:
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        return None  # a notification
    if method == "initialize":
        result: dict[str, object] = {
            "protocolVersion": "2025-06-18", "serverInfo": {"name": "endless", "version": "0"},
            "capabilities": {"tools": {}}}
    elif method == "tools/list":
        params = message.get("params")
        cursor = params.get("cursor") if isinstance(params, dict) else None
        page = int(str(cursor or "0")) + 1
        result = {"tools": [{"name": f"tool_{page}", "inputSchema": {"type": "object"}}],
                  "nextCursor": str(page)}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident,
                "error": {"code": -32601, "message": f"method not found: {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    for line in sys.stdin:
        reply = answer(json.loads(line))
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
