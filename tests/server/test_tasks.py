"""The tasks extension (io.modelcontextprotocol/tasks), driven straight through the engine."""

from __future__ import annotations

import itertools
import json
from typing import Any

import anyio
import pytest

from mcpkit.protocol import errors, jsonrpc
from mcpkit.server import tasks
from mcpkit.server.connection import Connection
from mcpkit.server.context import Context
from mcpkit.server.server import Server

pytestmark = pytest.mark.anyio

EXT_CAPS: dict[str, Any] = {"elicitation": {}, "extensions": {tasks.EXTENSION: {}}}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Channel:
    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: bytes) -> None:
        self.messages.append(json.loads(message))


class Client:
    def __init__(self, server: Server) -> None:
        self.server = server
        self.channel = Channel()
        self.connection = Connection(self.channel)
        self.ids = itertools.count(1)

    async def request(
        self, method: str, params: dict[str, Any], caps: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        params = dict(params)
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": EXT_CAPS if caps is None else caps,
            "io.modelcontextprotocol/clientInfo": {"name": "tests", "version": "0"},
        }
        message = jsonrpc.decode_message(jsonrpc.encode_request(next(self.ids), method, params))
        assert isinstance(message, jsonrpc.Request)
        body = await self.server.engine.handle_request(message, self.connection, self.channel)
        assert body is not None
        decoded: dict[str, Any] = json.loads(body)
        return decoded

    async def result(self, method: str, params: dict[str, Any], **kw: Any) -> dict[str, Any]:
        response = await self.request(method, params, **kw)
        assert "result" in response, response
        result: dict[str, Any] = response["result"]
        return result

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.result("tools/call", {"name": name, "arguments": arguments or {}})

    async def get(self, task_id: str) -> dict[str, Any]:
        return await self.result("tasks/get", {"taskId": task_id})

    async def wait_status(self, task_id: str, *statuses: str) -> dict[str, Any]:
        with anyio.fail_after(5):
            while True:
                task = await self.get(task_id)
                if task["status"] in statuses:
                    return task
                await anyio.sleep(0.01)


def make_server() -> Server:
    server = Server("tasks-test", "1.0.0")
    server.extensions[tasks.EXTENSION] = {}

    def greet(name: str) -> str:
        return f"Hello, {name}!"

    async def slow(seconds: float) -> str:
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    async def broken() -> str:
        raise RuntimeError("boom")

    async def protocol_broken() -> str:
        raise errors.internal_error("deliberate")

    async def confirm(ctx: Context) -> str:
        answers = await ctx.ask_many(
            {
                "a": ("elicitation/create", {"message": "A?", "requestedSchema": NAME_SCHEMA}),
                "b": ("elicitation/create", {"message": "B?", "requestedSchema": NAME_SCHEMA}),
            }
        )
        return "+".join(str((v.get("content") or {}).get("name")) for v in answers.values())

    @tasks.escalates
    async def gather_then_task(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", NAME_SCHEMA, key="user_name")
        await tasks.escalate(ctx)
        return f"Hi {(answer.get('content') or {}).get('name')}"

    server.add_tool(greet)
    server.add_tool(slow, task_support="optional")
    server.add_tool(broken, task_support="required")
    server.add_tool(protocol_broken, task_support="required")
    server.add_tool(confirm, task_support="optional")
    server.add_tool(gather_then_task, task_support="required")
    return server


async def test_create_then_complete_with_inlined_result() -> None:
    client = Client(make_server())
    created = await client.call_tool("slow", {"seconds": 0.2})
    assert created["resultType"] == "task"
    assert {"taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs", "pollIntervalMs"} <= set(
        created
    )
    assert not {"ttl", "pollInterval", "requestState", "result", "task"} & set(created)
    assert isinstance(created["ttlMs"], int) and isinstance(created["pollIntervalMs"], int)
    working = await client.get(created["taskId"])
    assert working["status"] == "working" and "result" not in working
    assert working["resultType"] == "complete"
    done = await client.wait_status(created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "slept 0.2"


async def test_sync_tool_stays_sync() -> None:
    client = Client(make_server())
    result = await client.call_tool("greet", {"name": "World"})
    assert result["resultType"] == "complete" and "taskId" not in result


async def test_tool_error_is_completed_with_is_error() -> None:
    client = Client(make_server())
    created = await client.call_tool("broken")
    done = await client.wait_status(created["taskId"], "completed", "failed")
    assert done["status"] == "completed" and done["result"]["isError"] is True


async def test_protocol_error_is_failed_with_error() -> None:
    client = Client(make_server())
    created = await client.call_tool("protocol_broken")
    done = await client.wait_status(created["taskId"], "completed", "failed")
    assert done["status"] == "failed" and "result" not in done
    assert done["error"]["code"] == errors.INTERNAL_ERROR


async def test_cancel_settles_cancelled_and_is_idempotent() -> None:
    client = Client(make_server())
    created = await client.call_tool("slow", {"seconds": 30})
    ack = await client.result("tasks/cancel", {"taskId": created["taskId"]})
    assert set(ack) <= {"resultType", "_meta"} and ack["resultType"] == "complete"
    assert (await client.wait_status(created["taskId"], "cancelled"))["status"] == "cancelled"
    again = await client.result("tasks/cancel", {"taskId": created["taskId"]})
    assert again["resultType"] == "complete"


async def test_unknown_task_id() -> None:
    client = Client(make_server())
    response = await client.request("tasks/get", {"taskId": "nope"})
    assert response["error"]["code"] == -32602


async def test_removed_methods_are_not_found() -> None:
    client = Client(make_server())
    for method in ("tasks/result", "tasks/list"):
        response = await client.request(method, {"taskId": "x"})
        assert response["error"]["code"] == -32601


async def test_without_extension() -> None:
    client = Client(make_server())
    for method in ("tasks/get", "tasks/cancel", "tasks/update"):
        response = await client.request(method, {"taskId": "x", "inputResponses": {}}, caps={})
        assert response["error"]["code"] == -32021
    required = await client.request("tools/call", {"name": "broken", "arguments": {}}, caps={})
    assert required["error"]["code"] == -32021
    assert tasks.EXTENSION in required["error"]["data"]["requiredCapabilities"]["extensions"]
    optional = await client.result(
        "tools/call", {"name": "slow", "arguments": {"seconds": 0}}, caps={}
    )
    assert optional["resultType"] == "complete" and optional["content"][0]["text"].startswith(
        "slept 0"
    )


async def test_input_required_then_update_completes() -> None:
    client = Client(make_server())
    created = await client.call_tool("confirm")
    parked = await client.wait_status(created["taskId"], "input_required")
    assert set(parked["inputRequests"]) == {"a", "b"}
    assert parked["inputRequests"]["a"]["method"] == "elicitation/create"
    answer = {"action": "accept", "content": {"name": "one"}}
    ack = await client.result(
        "tasks/update", {"taskId": created["taskId"], "inputResponses": {"a": answer}}
    )
    assert ack["resultType"] == "complete" and "status" not in ack
    partial = await client.get(created["taskId"])
    assert partial["status"] == "input_required" and set(partial["inputRequests"]) == {"b"}
    second = {"action": "accept", "content": {"name": "two"}}
    await client.result(
        "tasks/update", {"taskId": created["taskId"], "inputResponses": {"b": second}}
    )
    done = await client.wait_status(created["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "one+two"


async def test_input_rounds_before_escalation() -> None:
    client = Client(make_server())
    first = await client.call_tool("gather_then_task")
    assert first["resultType"] == "input_required" and "taskId" not in first
    second = await client.result(
        "tools/call",
        {
            "name": "gather_then_task",
            "arguments": {},
            "requestState": first["requestState"],
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        },
    )
    assert second["resultType"] == "task" and "requestState" not in second
    done = await client.wait_status(second["taskId"], "completed")
    assert done["result"]["content"][0]["text"] == "Hi Alice"


async def test_store_shutdown_cancels_running_tasks() -> None:
    server = make_server()
    client = Client(server)
    created = await client.call_tool("slow", {"seconds": 30})
    with anyio.fail_after(2):
        await server.tasks.aclose()
    assert (await client.get(created["taskId"]))["status"] == "cancelled"
