"""The official Python SDK client (`mcp`) against mcpkit servers, over stdio, Streamable HTTP
and the legacy HTTP+SSE transport (2024-11-05)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client, types
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from .conftest import ROOT

pytestmark = pytest.mark.interop

SCENARIO_TIMEOUT = 20.0


async def _sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="four"),
        model="interop-model",
    )


async def _elicitation(context: Any, params: types.ElicitRequestParams) -> Any:
    return types.ElicitResult(
        action="accept", content={"username": "alice", "email": "alice@example.com"}
    )


@asynccontextmanager
async def _session(transport: str, url: str | None) -> AsyncIterator[ClientSession]:
    if transport == "stdio":
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "mcpkit.testing.conformance_server", "--transport", "stdio"],
            cwd=ROOT,
        )
        streams = stdio_client(params)
    elif transport == "sse":
        assert url is not None
        streams = sse_client(url.removesuffix("/mcp") + "/sse")
    else:
        assert url is not None
        streams = streamable_http_client(url)
    async with streams as (read, write), ClientSession(
        read, write, sampling_callback=_sampling, elicitation_callback=_elicitation
    ) as session:
        yield session


def _text(result: Any) -> str:
    assert not getattr(result, "is_error", False), result
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def _scenario(transport: str, url: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with anyio.fail_after(SCENARIO_TIMEOUT):
        async with _session(transport, url) as session:
            init = await session.initialize()
            out["protocol_version"] = init.protocol_version
            out["server_name"] = init.server_info.name
            out["tools"] = {t.name for t in (await session.list_tools()).tools}
            out["simple_text"] = _text(await session.call_tool("test_simple_text", {}))

            progress: list[tuple[float, float | None, str | None]] = []

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                progress.append((value, total, message))

            out["progress_result"] = _text(
                await session.call_tool(
                    "test_tool_with_progress", {}, progress_callback=on_progress
                )
            )
            out["progress"] = progress
            out["sampling"] = _text(
                await session.call_tool("test_sampling", {"prompt": "What is 2+2?"})
            )
            out["elicitation"] = _text(
                await session.call_tool("test_elicitation", {"message": "Who are you?"})
            )
            static = await session.read_resource("test://static-text")
            out["static"] = [(c.uri, getattr(c, "text", None)) for c in static.contents]
            templ = await session.read_resource("test://template/42/data")
            out["template"] = [(c.uri, getattr(c, "text", None)) for c in templ.contents]
            simple = await session.get_prompt("test_simple_prompt")
            out["simple_prompt"] = [m.content.text for m in simple.messages]  # type: ignore[union-attr]
            args = await session.get_prompt(
                "test_prompt_with_arguments", {"arg1": "one", "arg2": "two"}
            )
            out["args_prompt"] = [m.content.text for m in args.messages]  # type: ignore[union-attr]
    return out


def _check(out: dict[str, Any]) -> None:
    assert out["server_name"] == "mcpkit-conformance-server"
    assert {"test_simple_text", "test_tool_with_progress", "test_sampling",
            "test_elicitation"} <= out["tools"]
    assert out["simple_text"] == "This is a simple text response for testing."
    assert out["progress_result"] == "Progress test completed"
    assert [p[0] for p in out["progress"]] == [0, 50, 100]
    assert all(p[1] == 100 for p in out["progress"])
    assert out["sampling"] == "LLM response: four"
    assert out["elicitation"].startswith("User response: action=accept")
    assert "alice@example.com" in out["elicitation"]
    assert out["static"] == [
        ("test://static-text", "This is the content of the static text resource.")
    ]
    assert out["template"][0][0] == "test://template/42/data"
    assert '"id": "42"' in out["template"][0][1]
    assert out["simple_prompt"] == ["This is a simple prompt for testing."]
    assert out["args_prompt"] == ["Prompt with arguments: arg1='one', arg2='two'"]


def test_python_sdk_stdio() -> None:
    _check(anyio.run(_scenario, "stdio", None))


def test_python_sdk_streamable_http(conformance_http_url: str) -> None:
    _check(anyio.run(_scenario, "http", conformance_http_url))


def test_python_sdk_legacy_http_sse(conformance_http_url: str) -> None:
    _check(anyio.run(_scenario, "sse", conformance_http_url))


async def _modern(url: str) -> dict[str, Any]:
    with anyio.fail_after(SCENARIO_TIMEOUT):
        async with _session("http", url) as session:
            discovered = await session.discover()
            tools = await session.list_tools()
            text = _text(await session.call_tool("test_simple_text", {}))
            static = await session.read_resource("test://static-text")
            return {"version": session.protocol_version, "discovered": discovered,
                    "tools": {t.name for t in tools.tools}, "text": text,
                    "static": [getattr(c, "text", None) for c in static.contents]}


def test_python_sdk_modern_era_http(conformance_http_url: str) -> None:
    """The 2026-07-28 era: server/discover instead of initialize."""
    out = anyio.run(_modern, conformance_http_url)
    assert out["version"] == "2026-07-28"
    assert "test_simple_text" in out["tools"]
    assert out["text"] == "This is a simple text response for testing."
    assert out["static"] == ["This is the content of the static text resource."]
