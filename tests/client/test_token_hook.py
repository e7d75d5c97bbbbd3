"""`TokenHook`: the caller's own token callable, over real HTTP on 127.0.0.1 to an mcpkit
server behind a bearer check whose accepted token the test rotates (as a caller's secret
manager would)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.procs import serve_in_thread

from mcpkit import Client, Server
from mcpkit.client import TokenHook
from mcpkit.errors import InvalidArgument, McpkitError

pytestmark = pytest.mark.anyio


@dataclass
class Gate:
    """The server's side: which token it takes now, and what it was shown."""

    accepted: str = "token-1"
    refused: list[str] = field(default_factory=list)


def guarded(gate: Gate) -> Any:
    server = Server("guarded")

    @server.tool()
    def read() -> str:
        return "read ok"

    inner = server.asgi_app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or [])
        sent = headers.get(b"authorization", b"").decode()
        if scope["type"] == "http" and sent != f"Bearer {gate.accepted}":
            gate.refused.append(sent)
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"www-authenticate", b'Bearer error="invalid_token"')]})
            await send({"type": "http.response.body", "body": b""})
            return
        await inner(scope, receive, send)

    return app


@pytest.fixture
def gate() -> Iterator[tuple[Gate, str]]:
    state = Gate()
    with serve_in_thread(guarded(state), name="token-hook") as base:
        yield state, f"{base}/mcp"


async def read(url: str, hook: TokenHook) -> str:
    async with Client(url, era="2025-11-25", auth=hook) as client:
        result = await client.call_tool("read", {})
    return result.content[0].text  # type: ignore[union-attr,no-any-return]


async def test_the_callable_is_asked_once_and_its_token_sent(gate: tuple[Gate, str]) -> None:
    state, url = gate
    asked: list[str | None] = []

    def source(stale: str | None) -> str:
        asked.append(stale)
        return "token-1"

    assert await read(url, TokenHook(source)) == "read ok"
    assert asked == [None] and state.refused == []


async def test_a_refused_token_is_renewed_by_the_async_callable(gate: tuple[Gate, str],
                                                                caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    state, url = gate
    issued = iter(["token-1", "token-2"])
    asked: list[str | None] = []

    async def source(stale: str | None) -> str:
        asked.append(stale)
        return next(issued)

    hook = TokenHook(source)
    async with Client(url, era="2025-11-25", auth=hook) as client:
        await client.call_tool("read", {})
        state.accepted = "token-2"  # the secret manager rotated it
        result = await client.call_tool("read", {})
    assert result.content[0].text == "read ok"  # type: ignore[union-attr]
    assert asked == [None, "token-1"]  # renewal told which token was refused
    assert "token-" not in repr(hook) and "token-" not in caplog.text


async def test_the_same_token_again_reaches_the_caller_as_refused(
        gate: tuple[Gate, str]) -> None:
    state, url = gate
    state.accepted = "something else"
    asked: list[str | None] = []

    def source(stale: str | None) -> str:
        asked.append(stale)
        return "token-1"

    with pytest.raises(McpkitError, match="401"):
        await read(url, TokenHook(source))
    assert asked == [None, "token-1"]  # asked to renew once; the same answer: no retry
    assert state.refused == ["Bearer token-1"]


@given(st.one_of(st.just(""), st.text(min_size=1).map(lambda t: t + "\n"),
                 st.sampled_from(["a\x00b", "a\rb", "x" * 20_000])))
def test_an_unsendable_token_is_refused_before_it_is_sent(token: str) -> None:
    import anyio

    hook = TokenHook(lambda stale: token)
    with pytest.raises(InvalidArgument, match="token"):
        anyio.run(hook.headers, "http://127.0.0.1:1/mcp")


def test_arguments_are_checked() -> None:
    with pytest.raises(InvalidArgument, match="max_attempts"):
        TokenHook(lambda stale: "t", max_attempts=0)
