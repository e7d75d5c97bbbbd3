"""The OpenAI and Anthropic adapters: the catalog as API tools, the model's calls back into
`call_tool` on a real mcpkit server in memory, and the results as the APIs want them."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator
from typing import Any

import jsonschema
import pytest

from mcpkit import Client, Server, content
from mcpkit.manager.adapters import (
    AdapterError,
    ToolCall,
    anthropic_tool_result,
    openai_tool_message,
    parse_anthropic_tool_use,
    parse_openai_tool_call,
    result_text,
    run_anthropic_tool_uses,
    run_openai_tool_calls,
    to_anthropic_tools,
    to_openai_tools,
)
from mcpkit.manager.catalog import ManagedTool
from mcpkit.manager.names import NameTable
from mcpkit.protocol import types

pytestmark = pytest.mark.anyio

API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def make_server() -> Server:
    server = Server("demo", "1.0.0")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool(name="notes.read", annotations={"readOnlyHint": True})
    def read_note(title: str) -> str:
        """Read a note."""
        return f"note {title}: buy milk"

    @server.tool()
    def snapshot() -> list[Any]:
        """Take a picture."""
        return [content.text("here it is"), content.image(PNG, "image/png")]

    @server.tool()
    def explode() -> str:
        raise RuntimeError("kaboom")

    return server


class Catalog:
    """A tiny `ToolCaller`: exposed names mapped back through a `NameTable` to one client."""

    def __init__(self, client: Client, server: str = "demo") -> None:
        self.client = client
        self.table = NameTable()
        self.server = server
        self.tools: list[ManagedTool] = []
        self.calls: list[tuple[str, dict[str, Any] | None]] = []

    async def load(self) -> None:
        for tool in await self.client.list_tools():
            name = self.table.add(self.server, tool.name)
            self.tools.append(ManagedTool(name, self.server, tool))

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> types.CallToolResult:
        self.calls.append((name, arguments))
        found = self.table.lookup(name)
        if found is None:
            raise LookupError(f"unknown tool {name}")
        return await self.client.call_tool(found[1], arguments)


@pytest.fixture
async def catalog() -> AsyncIterator[Catalog]:
    async with Client(make_server()) as client:
        catalog = Catalog(client)
        await catalog.load()
        yield catalog


def exposed(catalog: Catalog, tool: str) -> str:
    name = catalog.table.name_of("demo", tool)
    assert name is not None
    return name


# --- the catalog as API tools ----------------------------------------------------------------


def check_schema(schema: dict[str, Any]) -> None:
    assert schema["type"] == "object"
    assert isinstance(schema["properties"], dict)
    jsonschema.Draft202012Validator.check_schema(schema)


async def test_openai_chat_tools(catalog: Catalog) -> None:
    tools = to_openai_tools(catalog.tools)
    assert len(tools) == 4
    by_name = {t["function"]["name"]: t for t in tools}
    assert set(by_name) == {"mcp__demo__add", "mcp__demo__notes_read", "mcp__demo__snapshot",
                            "mcp__demo__explode"}
    for tool in tools:
        assert set(tool) == {"type", "function"} and tool["type"] == "function"
        assert set(tool["function"]) == {"name", "description", "parameters"}
        assert API_NAME.match(tool["function"]["name"])
        check_schema(tool["function"]["parameters"])
    add = by_name["mcp__demo__add"]["function"]
    assert add["description"] == "Add two numbers."
    assert set(add["parameters"]["properties"]) == {"a", "b"}
    assert by_name["mcp__demo__snapshot"]["function"]["parameters"]["properties"] == {}


async def test_openai_responses_tools(catalog: Catalog) -> None:
    tools = to_openai_tools(catalog.tools, api="responses")
    for tool in tools:
        assert set(tool) == {"type", "name", "description", "parameters", "strict"}
        assert tool["type"] == "function" and tool["strict"] is False
        assert API_NAME.match(tool["name"])
        check_schema(tool["parameters"])


async def test_anthropic_tools(catalog: Catalog) -> None:
    tools = to_anthropic_tools(catalog.tools)
    for tool in tools:
        assert set(tool) == {"name", "description", "input_schema"}
        assert API_NAME.match(tool["name"])
        check_schema(tool["input_schema"])
    assert {t["name"] for t in tools} == {t.name for t in catalog.tools}


def test_schema_is_completed_and_never_mutated() -> None:
    schema: dict[str, Any] = {"additionalProperties": False}
    tool = ManagedTool("mcp__s__t", "s", types.Tool(name="t", input_schema=schema))
    [openai] = to_openai_tools([tool])
    [anthropic] = to_anthropic_tools([tool])
    expected = {"additionalProperties": False, "type": "object", "properties": {}}
    assert openai["function"]["parameters"] == expected
    assert anthropic["input_schema"] == expected
    assert anthropic["description"] == ""
    assert schema == {"additionalProperties": False}
    assert "strict" not in openai["function"]


# --- round trips -----------------------------------------------------------------------------


async def test_openai_chat_round_trip(catalog: Catalog) -> None:
    # A Chat Completions assistant message asking for three tools at once.
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": exposed(catalog, "add"), "arguments": '{"a": 2, "b": 40}'}},
            {"id": "call_2", "type": "function",
             "function": {"name": exposed(catalog, "notes.read"),
                          "arguments": '{"title": "shopping"}'}},
            {"id": "call_3", "type": "function",
             "function": {"name": exposed(catalog, "snapshot"), "arguments": "{}"}},
        ],
    }
    replies = await run_openai_tool_calls(catalog, message["tool_calls"])
    assert [r["tool_call_id"] for r in replies] == ["call_1", "call_2", "call_3"]
    assert all(r["role"] == "tool" for r in replies)
    assert json.loads(replies[0]["content"]) == {"result": 42}
    assert replies[1]["content"] == "note shopping: buy milk"
    assert replies[2]["content"].startswith("here it is\n[image: image/png, ")
    assert sorted(catalog.calls) == sorted([
        ("mcp__demo__add", {"a": 2, "b": 40}),
        ("mcp__demo__notes_read", {"title": "shopping"}),
        ("mcp__demo__snapshot", {}),
    ])


async def test_openai_responses_round_trip(catalog: Catalog) -> None:
    # A Responses `output`: reasoning and message items are skipped, function calls run.
    output = [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "id": "fc_1", "call_id": "call_a",
         "name": exposed(catalog, "add"), "arguments": '{"a": 1, "b": 1}', "status": "completed"},
        {"type": "message", "id": "msg_1", "role": "assistant", "content": []},
        {"type": "function_call", "id": "fc_2", "call_id": "call_b",
         "name": exposed(catalog, "explode"), "arguments": "{}", "status": "completed"},
    ]
    items = await run_openai_tool_calls(catalog, output, api="responses")
    assert items[0] == {
        "type": "function_call_output", "call_id": "call_a", "output": '{"result":2}'}
    assert items[1]["call_id"] == "call_b"
    assert items[1]["output"].startswith("Error")
    assert "kaboom" in items[1]["output"]
    assert len(items) == 2


async def test_anthropic_round_trip(catalog: Catalog) -> None:
    # An Anthropic response's content: text, then two tool_use blocks.
    content_blocks = [
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01", "name": exposed(catalog, "snapshot"), "input": {}},
        {"type": "tool_use", "id": "toolu_02", "name": exposed(catalog, "add"),
         "input": {"a": 3, "b": 4}},
        {"type": "tool_use", "id": "toolu_03", "name": exposed(catalog, "explode"), "input": {}},
    ]
    results = await run_anthropic_tool_uses(catalog, content_blocks)
    assert [r["tool_use_id"] for r in results] == ["toolu_01", "toolu_02", "toolu_03"]
    snapshot, add, explode = results
    assert snapshot == {
        "type": "tool_result",
        "tool_use_id": "toolu_01",
        "content": [
            {"type": "text", "text": "here it is"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
        ],
        "is_error": False,
    }
    assert add["content"] == [{"type": "text", "text": '{"result":7}'}]
    assert add["is_error"] is False
    assert explode["is_error"] is True
    assert "kaboom" in explode["content"][0]["text"]


async def test_bad_calls_become_error_results(catalog: Catalog) -> None:
    calls = [
        {"id": "c1", "type": "function", "function": {"name": exposed(catalog, "add"),
                                                      "arguments": "{not json"}},
        {"id": "c2", "type": "function", "function": {"name": exposed(catalog, "add"),
                                                      "arguments": "[1, 2]"}},
        {"id": "c3", "type": "function", "function": {"name": "mcp__demo__nope",
                                                      "arguments": "{}"}},
        {"id": "c4", "type": "function", "function": {"name": exposed(catalog, "add"),
                                                      "arguments": '{"a": "x", "b": 1}'}},
        {"id": "c5", "type": "custom", "custom": {"name": "x", "input": ""}},
    ]
    replies = await run_openai_tool_calls(catalog, calls)
    assert [r["tool_call_id"] for r in replies] == ["c1", "c2", "c3", "c4", "c5"]
    assert "not valid JSON" in replies[0]["content"]
    assert "must be a JSON object" in replies[1]["content"]
    assert "LookupError: unknown tool mcp__demo__nope" in replies[2]["content"]
    assert replies[3]["content"].startswith("Error")  # the server refused the arguments
    assert "not an OpenAI function call" in replies[4]["content"]
    assert all(r["content"].startswith("Error") for r in replies)

    uses = [{"type": "tool_use", "id": "t1", "name": exposed(catalog, "add"), "input": "3"}]
    [result] = await run_anthropic_tool_uses(catalog, uses)
    assert result["is_error"] is True and result["tool_use_id"] == "t1"
    assert "must be a JSON object" in result["content"][0]["text"]


# --- parsing and rendering, unit ---------------------------------------------------------------


def test_parse_openai_variants() -> None:
    chat = {"id": "call_9", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
    assert parse_openai_tool_call(chat) == ToolCall("call_9", "f", {"x": 1})
    responses = {"type": "function_call", "call_id": "c", "name": "f", "arguments": ""}
    assert parse_openai_tool_call(responses) == ToolCall("c", "f", {})
    with pytest.raises(AdapterError, match="without a name"):
        parse_openai_tool_call({"type": "function_call", "call_id": "c", "arguments": "{}"})
    with pytest.raises(AdapterError, match="without a id"):
        parse_openai_tool_call({"type": "function", "function": {"name": "f"}})
    with pytest.raises(AdapterError, match="not valid JSON"):
        parse_openai_tool_call({"id": "c", "function": {"name": "f", "arguments": "{"}})
    with pytest.raises(AdapterError, match="not int"):
        parse_openai_tool_call({"id": "c", "function": {"name": "f", "arguments": "3"}})
    assert issubclass(AdapterError, ValueError)


def test_parse_anthropic() -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"q": [1]}}
    call = parse_anthropic_tool_use(block)
    assert call == ToolCall("toolu_1", "f", {"q": [1]})
    assert call.arguments is not block["input"]
    with pytest.raises(AdapterError, match="not a tool_use"):
        parse_anthropic_tool_use({"type": "text", "text": "hi"})
    with pytest.raises(AdapterError, match="JSON object"):
        parse_anthropic_tool_use({"type": "tool_use", "id": "t", "name": "f", "input": [1]})


def test_result_text_rendering() -> None:
    result = types.CallToolResult(content=[
        types.TextContent(text="done"),
        types.ImageContent(data="A" * 1234, mime_type="image/png"),
        types.AudioContent(data="B" * 10, mime_type="audio/wav"),
        types.ResourceLink(name="log", uri="file:///tmp/log"),
        types.EmbeddedResource(resource=types.TextResourceContents(uri="file:///a", text="inline")),
        types.EmbeddedResource(resource=types.BlobResourceContents(uri="file:///b", blob="QQ==",
                                                                   mime_type="application/zip")),
    ])
    assert result_text(result).splitlines() == [
        "done",
        "[image: image/png, 1,234 bytes base64]",
        "[audio: audio/wav, 10 bytes base64]",
        "[resource: file:///tmp/log]",
        "inline",
        "[resource: file:///b, application/zip, 4 bytes base64]",
    ]


def test_structured_content_and_errors() -> None:
    only_structured = types.CallToolResult(content=[], structured_content={"n": 1})
    assert result_text(only_structured) == '{"n":1}'
    with_text = types.CallToolResult(content=[types.TextContent(text="n is 1")],
                                     structured_content={"n": 1})
    assert result_text(with_text) == "n is 1"
    failed = types.CallToolResult(content=[types.TextContent(text="disk full")], is_error=True)
    assert result_text(failed) == "Error: disk full"
    already = types.CallToolResult(content=[types.TextContent(text="Error executing")],
                                   is_error=True)
    assert result_text(already) == "Error executing"
    assert result_text(types.CallToolResult(content=[])) == "(no output)"

    call = ToolCall("id1", "f", {})
    assert openai_tool_message(call, failed) == {
        "role": "tool", "tool_call_id": "id1", "content": "Error: disk full"}
    assert openai_tool_message(call, failed, api="responses") == {
        "type": "function_call_output", "call_id": "id1", "output": "Error: disk full"}
    anthropic = anthropic_tool_result(call, only_structured)
    assert anthropic["content"] == [{"type": "text", "text": '{"n":1}'}]
    assert anthropic["is_error"] is False
    assert anthropic_tool_result(call, failed)["is_error"] is True


def test_anthropic_unsupported_image_and_empty_text() -> None:
    result = types.CallToolResult(content=[
        types.TextContent(text=""),
        types.ImageContent(data="AAAA", mime_type="image/svg+xml"),
    ])
    block = anthropic_tool_result(ToolCall("t", "f", {}), result)
    assert block["content"] == [{"type": "text", "text": "[image: image/svg+xml, 4 bytes base64]"}]
    empty = anthropic_tool_result(ToolCall("t", "f", {}), types.CallToolResult(content=[]))
    assert empty["content"] == [{"type": "text", "text": "(no output)"}]
    json.dumps(block)  # plain JSON all the way down
