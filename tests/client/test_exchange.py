"""`Client.exchange`: a modern request answered in the calling task (what the hub forwards
calls with), over real Streamable HTTP to an mcpkit server on 127.0.0.1. It must answer
exactly as `request` does, hand the request's log messages to `on_log` in the caller's
origin before it returns, return `input_required` as it is, and enforce the time limit by
closing the POST (the server sees the call cancelled)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import anyio
import pytest
from tests.procs import eventually, serve_in_thread

from mcpkit import Client, Server
from mcpkit.client import Behaviour, Notifications, Responders, ServerError, Timeouts
from mcpkit.client.origin import current_origin, request_origin
from mcpkit.client.session import RequestTimeout
from mcpkit.server.context import Context

pytestmark = pytest.mark.anyio

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


def exchange_server(cancelled: list[str]) -> Server:
    server = Server("exchange-test")

    @server.tool()
    async def echo(text: str) -> str:
        """Say it back."""
        return text

    @server.tool()
    async def chatty(ctx: Context, text: str) -> str:
        """Log twice, then answer."""
        await ctx.info(f"working on {text}")
        await ctx.warning("almost done")
        return text.upper()

    @server.tool()
    async def slow(seconds: float) -> str:
        """Sleep, noting a cancellation."""
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            cancelled.append("slow")
            raise
        return "done"

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Ask the client a question first."""
        answer = await ctx.elicit("Name?", NAME_SCHEMA, key="who")
        return str(answer)

    return server


async def test_exchange_answers_like_request() -> None:
    with serve_in_thread(exchange_server([]).asgi_app()) as base:
        async with Client(f"{base}/mcp", era="modern") as client:
            assert client.can_exchange
            params = {"name": "echo", "arguments": {"text": "hi"}}
            by_request = await client.request("tools/call", params)
            by_exchange = await client.exchange("tools/call", params)
            assert by_exchange == by_request
            assert by_exchange["content"] == [{"type": "text", "text": "hi"}]
            with pytest.raises(ServerError) as raised:
                await client.exchange("tools/call", {"name": "nope", "arguments": {}})
            assert raised.value.code == -32602
            # Concurrent exchanges get their own answers.
            texts = [f"t{i}" for i in range(20)]
            answers: dict[str, Any] = {}

            async def one(text: str) -> None:
                answers[text] = await client.exchange(
                    "tools/call", {"name": "echo", "arguments": {"text": text}})

            async with anyio.create_task_group() as tg:
                for text in texts:
                    tg.start_soon(one, text)
            assert {t: a["content"][0]["text"] for t, a in answers.items()} == {t: t for t in texts}


async def test_log_messages_reach_on_log_in_the_callers_origin() -> None:
    seen: list[tuple[str, Any, object]] = []

    async def on_log(params: Any) -> None:
        seen.append((params.level, params.data, current_origin()))

    with serve_in_thread(exchange_server([]).asgi_app()) as base:
        async with Client(
            f"{base}/mcp",
            era="modern",
            behaviour=Behaviour(log_level="info"),
            notifications=Notifications(on_log=on_log),
        ) as client:
            with request_origin("caller-a"):
                result = await client.exchange(
                    "tools/call", {"name": "chatty", "arguments": {"text": "x"}})
            assert result["content"][0]["text"] == "X"
            # Handled before the answer is returned, as `request` does.
            assert seen == [("info", "working on x", "caller-a"),
                            ("warning", "almost done", "caller-a")]


async def never_asked(params: Any) -> dict[str, Any]:
    raise AssertionError("exchange must return the question, not answer it")


async def test_input_required_is_returned_as_it_is() -> None:
    with serve_in_thread(exchange_server([]).asgi_app()) as base:
        async with Client(
            f"{base}/mcp",
            era="modern",
            responders=Responders(elicitation=never_asked),
        ) as client:
            result = await client.exchange("tools/call", {"name": "ask", "arguments": {}})
            assert result["resultType"] == "input_required"
            assert result["inputRequests"]["who"]["method"] == "elicitation/create"


async def test_the_time_limit_closes_the_post_and_the_server_cancels() -> None:
    cancelled: list[str] = []
    with serve_in_thread(exchange_server(cancelled).asgi_app()) as base:
        async with Client(f"{base}/mcp", era="modern", timeouts=Timeouts(timeout=0.5)) as client:
            started = anyio.current_time()
            with pytest.raises(RequestTimeout):
                await client.exchange("tools/call", {"name": "slow",
                                                     "arguments": {"seconds": 30}})
            assert anyio.current_time() - started < 5
            await eventually(lambda: cancelled == ["slow"])
            # The connection is still good afterwards.
            again = await client.exchange("tools/call", {"name": "echo",
                                                         "arguments": {"text": "ok"}})
            assert again["content"][0]["text"] == "ok"


async def test_a_shorter_deadline_is_kept_while_a_longer_one_waits() -> None:
    """The time limit is the session watchdog's: an exchange due before the one the
    watchdog sleeps towards wakes it; the caller's task is left with no cancellation."""
    cancelled: list[str] = []
    with serve_in_thread(exchange_server(cancelled).asgi_app()) as base:
        async with Client(f"{base}/mcp", era="modern", timeouts=Timeouts(timeout=30)) as client:
            async with anyio.create_task_group() as tg:
                long_one = {"name": "slow", "arguments": {"seconds": 1.5}}
                tg.start_soon(client.exchange, "tools/call", long_one)
                await anyio.sleep(0.2)  # the watchdog now sleeps towards 30 s from now
                client.default_timeouts = Timeouts(0.3)
                started = anyio.current_time()
                with pytest.raises(RequestTimeout):
                    await client.exchange("tools/call", {"name": "slow",
                                                         "arguments": {"seconds": 30}})
                assert anyio.current_time() - started < 1.2  # not the first one's 30 s
                assert current_cancellations() == 0
            await eventually(lambda: cancelled == ["slow"])  # only the timed-out one


async def test_the_caller_s_cancellation_is_not_a_timeout() -> None:
    cancelled: list[str] = []
    with serve_in_thread(exchange_server(cancelled).asgi_app()) as base:
        async with Client(f"{base}/mcp", era="modern", timeouts=Timeouts(timeout=30)) as client:
            with anyio.move_on_after(0.3) as scope:
                await client.exchange("tools/call", {"name": "slow",
                                                     "arguments": {"seconds": 30}})
            assert scope.cancelled_caught  # a plain cancellation, not RequestTimeout
            assert current_cancellations() == 0
            await eventually(lambda: cancelled == ["slow"])
            again = await client.exchange("tools/call", {"name": "echo",
                                                         "arguments": {"text": "ok"}})
            assert again["content"][0]["text"] == "ok"


def current_cancellations() -> int:
    task = asyncio.current_task()
    assert task is not None
    return task.cancelling()


async def test_only_modern_http_can_exchange() -> None:
    with serve_in_thread(exchange_server([]).asgi_app()) as base:
        async with Client(f"{base}/mcp", era="legacy") as client:
            assert not client.can_exchange


async def test_a_client_gone_at_once_still_cancels_its_modern_call() -> None:
    """The server watches for a disconnect only once a call has run a moment
    (`WATCH_AFTER_S`); a client that left before that is noticed then."""
    cancelled: list[str] = []
    body = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "slow", "arguments": {"seconds": 30}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}},
    }).encode()
    with serve_in_thread(exchange_server(cancelled).asgi_app()) as base:
        port = int(base.rsplit(":", 1)[1])
        stream = await anyio.connect_tcp("127.0.0.1", port)
        await stream.send(
            b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Accept: application/json, text/event-stream\r\n"
            b"MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: slow\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        await anyio.sleep(0.01)  # the call has started; the watcher has not
        await stream.aclose()
        await eventually(lambda: cancelled == ["slow"])


def test_the_exchange_ability_is_declared_by_the_transports_that_have_it() -> None:
    """`ExchangeTransport` is named among the bases of the transport that has the ability
    (Streamable HTTP); the others neither declare it nor have an `exchange`, so the session
    (which checks once, when built) offers it only over Streamable HTTP."""
    from mcpkit.transports.client.base import ExchangeTransport
    from mcpkit.transports.client.http import StreamableHttpTransport
    from mcpkit.transports.client.memory import MemoryTransport
    from mcpkit.transports.client.sse import LegacySseTransport
    from mcpkit.transports.client.stdio import StdioTransport
    from mcpkit.transports.client.websocket import WebSocketTransport

    assert ExchangeTransport in StreamableHttpTransport.__mro__
    for cls in (StdioTransport, LegacySseTransport, WebSocketTransport, MemoryTransport):
        assert ExchangeTransport not in cls.__mro__
        assert not hasattr(cls, "exchange")


async def test_a_memory_client_cannot_exchange() -> None:
    async with Client(exchange_server([]), era="modern") as client:
        assert not client.can_exchange
