"""JSON-RPC batches: answered only in sessions negotiated at 2025-03-26, on stdio and HTTP."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import pytest

pytestmark = pytest.mark.anyio

INIT = {"protocolVersion": "", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
BATCH = [
    {"jsonrpc": "2.0", "id": "a", "method": "tools/list"},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": "b", "method": "tools/call",
     "params": {"name": "test_simple_text", "arguments": {}}},
    {"jsonrpc": "2.0", "id": "c", "method": "no/such/method"},
]


def _init(version: str) -> dict[str, Any]:
    return {**INIT, "protocolVersion": version}


def _check_batch_reply(reply: list[dict[str, Any]]) -> None:
    by_id = {r["id"]: r for r in reply}
    assert set(by_id) == {"a", "b", "c"}  # the notification gets no answer
    assert any(t["name"] == "test_simple_text" for t in by_id["a"]["result"]["tools"])
    assert by_id["b"]["result"]["content"][0]["type"] == "text"
    assert by_id["c"]["error"]["code"] == -32601


def test_stdio_batch_in_a_2025_03_26_session(stdio_peer: Any) -> None:
    peer = stdio_peer()
    assert peer.request("initialize", _init("2025-03-26"))["result"]["protocolVersion"] == (
        "2025-03-26"
    )
    peer.send(json.dumps(BATCH).encode())
    line = peer.read_line()
    assert line is not None
    reply = json.loads(line)
    assert isinstance(reply, list)
    _check_batch_reply(reply)


@pytest.mark.parametrize("version", ["2025-11-25", "2025-06-18", None])
def test_stdio_batch_refused_elsewhere(stdio_peer: Any, version: str | None) -> None:
    peer = stdio_peer()
    if version is not None:
        peer.request("initialize", _init(version))
    peer.send(json.dumps(BATCH).encode())
    reply = peer.read()
    assert reply["id"] is None and reply["error"]["code"] == -32600
    assert peer.request("ping")["result"] == {}  # still serving


def test_stdio_empty_batch_is_invalid(stdio_peer: Any) -> None:
    peer = stdio_peer()
    peer.request("initialize", _init("2025-03-26"))
    peer.send(b"[]")
    assert peer.read()["error"]["code"] == -32600


async def _http_session(http: aiohttp.ClientSession, url: str, version: str) -> str:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": _init(version)}
    headers = {"Accept": "application/json, text/event-stream"}
    async with http.post(url, json=body, headers=headers) as response:
        assert response.status == 200
        return response.headers["mcp-session-id"]


async def test_http_batch(http_server: Any) -> None:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=20)) as http:
        headers = {"Accept": "application/json, text/event-stream"}
        sid = await _http_session(http, http_server.url, "2025-03-26")
        async with http.post(
            http_server.url, json=BATCH, headers={**headers, "Mcp-Session-Id": sid}
        ) as response:
            assert response.status == 200
            _check_batch_reply(await response.json())
        sid = await _http_session(http, http_server.url, "2025-11-25")
        async with http.post(
            http_server.url, json=BATCH, headers={**headers, "Mcp-Session-Id": sid}
        ) as response:
            assert response.status == 400
            assert (await response.json())["error"]["code"] == -32600
