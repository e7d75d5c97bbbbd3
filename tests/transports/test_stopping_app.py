"""The HTTP app once its server began to stop (`McpAsgiApp.shutdown()`): no new long-lived
stream is admitted. In-process, beside the real-process tests of the same race
(tests/stream_after_stop.py, used by tests/hub/test_hub_serve.py and
tests/test_cli_lifecycle.py), for the refusals those cannot time exactly: a GET stream on a
kept-alive connection may be closed by the server before it is read at all."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest

from mcpkit import Server
from mcpkit.server.notifier import Listener, Notifier
from mcpkit.transports.server.http.app import STOPPING_RETRY_AFTER_S, McpAsgiApp

pytestmark = pytest.mark.anyio


def _scope(method: str, path: str, headers: dict[str, str], kind: str = "http") -> dict[str, Any]:
    head = [(b"host", b"127.0.0.1:8000")]
    head += [(name.encode(), value.encode()) for name, value in headers.items()]
    return {"type": kind, "method": method, "path": path, "root_path": "", "scheme": "http",
            "headers": head, "client": ("127.0.0.1", 5000), "server": ("127.0.0.1", 8000),
            "query_string": b""}


async def _call(app: McpAsgiApp, scope: dict[str, Any], first: dict[str, Any]
                ) -> list[dict[str, Any]]:
    """What the app sent for one request (bounded: a held stream fails the test)."""
    sent: list[dict[str, Any]] = []
    incoming = [first]

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with anyio.fail_after(5):
        await app(scope, receive, send)
    return sent


def _initialize() -> tuple[dict[str, Any], dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "tests", "version": "0"}}}
    return _scope("POST", "/mcp", {"content-type": "application/json",
                                   "accept": "application/json, text/event-stream",
                                   "content-length": str(len(json.dumps(body)))}), body


async def test_a_get_stream_asked_for_while_stopping_is_refused_503() -> None:
    app = McpAsgiApp(Server("stopping"))
    scope, body = _initialize()
    sent = await _call(app, scope, {"type": "http.request", "body": json.dumps(body).encode()})
    start = dict(sent[0]["headers"])
    session_id = start[b"mcp-session-id"].decode()
    app.shutdown()
    for path, headers in [("/mcp", {"accept": "text/event-stream", "mcp-session-id": session_id,
                                    "mcp-protocol-version": "2025-11-25"}),
                          ("/sse", {"accept": "text/event-stream"})]:
        sent = await _call(app, _scope("GET", path, headers), {"type": "http.disconnect"})
        assert sent[0]["status"] == 503, (path, sent)
        head = dict(sent[0]["headers"])
        assert head[b"retry-after"] == str(STOPPING_RETRY_AFTER_S).encode()
        assert head[b"connection"] == b"close"
        error = json.loads(sent[1]["body"])["error"]
        assert "shutting down" in error["message"]


async def test_a_websocket_asked_for_while_stopping_is_closed_going_away() -> None:
    app = McpAsgiApp(Server("stopping"))
    app.shutdown()
    sent = await _call(app, _scope("GET", "/mcp", {}, kind="websocket"),
                       {"type": "websocket.connect"})
    assert sent == [{"type": "websocket.close", "code": 1001}]


class _Discard:
    async def send(self, message: bytes) -> None:
        del message


@pytest.mark.parametrize("added_first", [True, False])
async def test_a_listener_added_around_end_all_is_ended(added_first: bool) -> None:
    """Whichever comes first - the listener's registration or the shutdown's `end_all` -
    the listener ends: nothing registered during a shutdown waits for the grace."""
    notifier = Notifier()
    listener = Listener(1, {"toolsListChanged": True}, _Discard())
    if added_first:
        notifier.add_listener(listener)
        notifier.end_all()
    else:
        notifier.end_all()
        notifier.add_listener(listener)
    assert listener.ended.is_set()
    fresh = Notifier()
    untouched = Listener(2, {}, _Discard())
    fresh.add_listener(untouched)
    assert not untouched.ended.is_set()  # a running server's listener stays open
