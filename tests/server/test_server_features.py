"""Tools, resources, prompts, completion and pagination through `server.engine`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import pytest

from mcpkit.protocol.pagination import encode_cursor
from mcpkit.server.server import Server

pytestmark = pytest.mark.anyio


@dataclass
class Sum:
    total: int
    note: str


def make_server() -> Server:
    server = Server("features")

    @server.tool()
    def add(a: int, b: int = 2, mode: Literal["fast", "slow"] = "fast") -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    def summed(values: list[int]) -> Sum:
        return Sum(sum(values), "ok")

    @server.tool()
    def text(name: str, tags: list[str] | None = None) -> str:
        return f"{name}:{','.join(tags or [])}"

    @server.tool()
    def fails() -> str:
        raise ValueError("it broke")

    def lying() -> Sum:
        return {"total": "not a number"}  # type: ignore[return-value]

    server.add_tool(lying)
    server.add_tool(
        lambda **kw: f"raw {sorted(kw)}",
        name="raw",
        input_schema={"type": "object", "properties": {"x": {"type": "string"}}},
    )

    server.add_resource("static body", "memo://static", name="static", mime_type="text/plain")
    server.add_resource(b"\x00\x01", "memo://bin", name="bin", mime_type="application/octet-stream")

    def item(id: str) -> str:
        return f"item {id}"

    server.add_resource_template(item, "memo://items/{id}", name="item", mime_type="text/plain")

    def greet(name: str, style: str = "plain") -> str:
        """Greet someone."""
        return f"Hello {name} ({style})"

    server.add_prompt(greet)

    def complete(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [c for c in ("alice", "albert", "bob") if c.startswith(value)]

    server.add_completion(complete, prompt="greet")
    server.add_completion(
        lambda argument, value, context: [str(i) for i in range(150)],
        resource_template="memo://items/{id}",
    )
    return server


@pytest.fixture(params=["modern", "legacy"])
async def rig(request: Any, make_rig: Any) -> Any:
    r = make_rig(make_server())
    if request.param == "legacy":
        await r.initialize()
        r.send = r.call
    else:
        r.send = r.modern
    return r


async def test_tool_schema_from_type_hints(rig: Any) -> None:
    tools = {t["name"]: t for t in (await rig.send("tools/list"))["result"]["tools"]}
    add = tools["add"]
    assert add["description"] == "Add two numbers."
    schema = add["inputSchema"]
    assert schema["type"] == "object" and schema["required"] == ["a"]
    assert schema["properties"]["a"] == {"type": "integer"}
    assert schema["properties"]["b"]["default"] == 2
    assert schema["properties"]["mode"]["enum"] == ["fast", "slow"]
    assert add["outputSchema"] == {
        "type": "object",
        "properties": {"result": {"type": "integer"}},
        "required": ["result"],
    }
    summed = tools["summed"]
    assert summed["inputSchema"]["properties"]["values"] == {
        "type": "array",
        "items": {"type": "integer"},
    }
    assert summed["outputSchema"]["properties"]["total"] == {"type": "integer"}
    assert set(summed["outputSchema"]["required"]) == {"total", "note"}
    assert "outputSchema" not in tools["text"]
    assert tools["raw"]["inputSchema"] == {
        "type": "object",
        "properties": {"x": {"type": "string"}},
    }


async def test_structured_content(rig: Any) -> None:
    result = (await rig.send("tools/call", {"name": "add", "arguments": {"a": 1, "b": 4}}))[
        "result"
    ]
    assert result["structuredContent"] == {"result": 5}
    assert result["content"][0]["type"] == "text"
    assert not result.get("isError")
    summed = await rig.send("tools/call", {"name": "summed", "arguments": {"values": [1, 2]}})
    assert summed["result"]["structuredContent"] == {"total": 3, "note": "ok"}


@pytest.mark.parametrize(
    "arguments",
    [{}, {"a": "one"}, {"a": 1, "mode": "medium"}, {"a": 1.5}, {"a": True}],
)
async def test_invalid_arguments_are_an_error_result(rig: Any, arguments: dict) -> None:
    response = await rig.send("tools/call", {"name": "add", "arguments": arguments})
    result = response["result"]
    assert result["isError"] is True
    assert "Invalid arguments" in result["content"][0]["text"]


async def test_arguments_must_be_an_object(rig: Any) -> None:
    response = await rig.send("tools/call", {"name": "add", "arguments": [1]})
    assert response["error"]["code"] == -32602


async def test_unknown_tool_and_missing_name(rig: Any) -> None:
    response = await rig.send("tools/call", {"name": "nope", "arguments": {}})
    assert response["error"]["code"] == -32602 and response["error"]["data"] == {"name": "nope"}
    assert (await rig.send("tools/call", {"arguments": {}}))["error"]["code"] == -32602
    assert (await rig.send("tools/call", {"name": 7}))["error"]["code"] == -32602


async def test_tool_exception_and_bad_output(rig: Any) -> None:
    failed = (await rig.send("tools/call", {"name": "fails"}))["result"]
    assert failed["isError"] is True and "it broke" in failed["content"][0]["text"]
    lying = (await rig.send("tools/call", {"name": "lying"}))["result"]
    assert lying["isError"] is True and "outputSchema" in lying["content"][0]["text"]


async def test_optional_list_argument(rig: Any) -> None:
    result = await rig.send(
        "tools/call", {"name": "text", "arguments": {"name": "n", "tags": ["a", "b"]}}
    )
    assert result["result"]["content"][0]["text"] == "n:a,b"


async def test_resources_and_templates(rig: Any) -> None:
    listed = (await rig.send("resources/list"))["result"]["resources"]
    assert {r["uri"] for r in listed} == {"memo://static", "memo://bin"}
    templates = (await rig.send("resources/templates/list"))["result"]["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "memo://items/{id}"
    static = (await rig.send("resources/read", {"uri": "memo://static"}))["result"]["contents"]
    assert static == [{"uri": "memo://static", "mimeType": "text/plain", "text": "static body"}]
    binary = (await rig.send("resources/read", {"uri": "memo://bin"}))["result"]["contents"][0]
    assert binary["blob"] == "AAE="
    item = (await rig.send("resources/read", {"uri": "memo://items/42"}))["result"]["contents"]
    assert item[0]["text"] == "item 42" and item[0]["uri"] == "memo://items/42"


async def test_unknown_resource(rig: Any) -> None:
    response = await rig.send("resources/read", {"uri": "memo://missing"})
    error = response["error"]
    assert error["data"] == {"uri": "memo://missing"}
    modern = rig.connection.legacy is None
    assert error["code"] == (-32602 if modern else -32002)
    assert (await rig.send("resources/read", {}))["error"]["code"] == -32602


async def test_prompts(rig: Any) -> None:
    prompts = (await rig.send("prompts/list"))["result"]["prompts"]
    assert prompts[0]["name"] == "greet"
    args = {a["name"]: a for a in prompts[0]["arguments"]}
    assert args["name"]["required"] is True and not args["style"].get("required")
    got = (await rig.send("prompts/get", {"name": "greet", "arguments": {"name": "Ann"}}))["result"]
    assert got["messages"][0]["content"]["text"] == "Hello Ann (plain)"
    assert got["messages"][0]["role"] == "user"


async def test_prompt_errors(rig: Any) -> None:
    missing = await rig.send("prompts/get", {"name": "greet", "arguments": {}})
    assert missing["error"]["code"] == -32602
    unknown = await rig.send("prompts/get", {"name": "nope"})
    assert unknown["error"]["code"] == -32602
    not_str = await rig.send("prompts/get", {"name": "greet", "arguments": {"name": 5}})
    assert not_str["error"]["code"] == -32602


async def test_completion(rig: Any) -> None:
    response = await rig.send(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "greet"},
            "argument": {"name": "name", "value": "al"},
        },
    )
    assert response["result"]["completion"] == {
        "values": ["alice", "albert"],
        "total": 2,
        "hasMore": False,
    }
    many = await rig.send(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "memo://items/{id}"},
            "argument": {"name": "id", "value": ""},
        },
    )
    completion = many["result"]["completion"]
    assert len(completion["values"]) == 100 and completion["total"] == 150 and completion["hasMore"]


@pytest.mark.parametrize(
    "params",
    [
        {"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/other"}, "argument": {"name": "a", "value": ""}},
        {"ref": {"type": "ref/prompt", "name": "greet"}},
        {"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": 1}},
        {"ref": "greet", "argument": {}},
    ],
)
async def test_completion_errors(rig: Any, params: dict) -> None:
    assert (await rig.send("completion/complete", params))["error"]["code"] == -32602


async def test_pagination(rig: Any) -> None:
    rig.server.page_size = 2
    names: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        result = (await rig.send("tools/list", params))["result"]
        names += [t["name"] for t in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert names == list(rig.server.tools) and pages == 3
    first = (await rig.send("resources/list"))["result"]
    assert len(first["resources"]) == 2 and "nextCursor" not in first


async def test_tampered_cursor(rig: Any) -> None:
    rig.server.page_size = 2
    for cursor in ("garbage!", encode_cursor("prompts", 2), encode_cursor("tools", 99), 5):
        response = await rig.send("tools/list", {"cursor": cursor})
        assert response["error"]["code"] == -32602, cursor
