"""`ClientSession` dispatch as `Client` lives it, against a scripted server: answers matched by
exact id, server→client requests answered or cancelled, and what a server may not do."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from mcpkit.client import Behaviour, Client, Responders, ServerError
from mcpkit.protocol import errors, types

from .support import ScriptedTransport, error, eventually, legacy_server, result

pytestmark = pytest.mark.anyio


def silent_on(method: str) -> Any:
    """A legacy server that does not answer `method` (the test answers it by hand)."""

    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == method:
            return None
        return legacy_server(message)

    return script


@pytest.mark.parametrize("wrong_id", [True, 1.0, "1", [1], {"id": 1}, None])
async def test_an_answer_resolves_only_its_exact_id(wrong_id: Any) -> None:
    """Request 1 is pending; answers with ids that merely compare or hash equal to 1 (true,
    1.0, "1") or that are not ids at all must not resolve it."""
    from mcpkit.client.session import ClientSession, Timeouts

    transport = ScriptedTransport(lambda m: None)

    async def no_requests(method: str, params: dict[str, Any]) -> Any:
        raise errors.method_not_found(method)

    async def no_notifications(method: str, params: dict[str, Any]) -> None:
        return None

    session = ClientSession(transport, on_request=no_requests, on_notification=no_notifications)
    outcome: list[Any] = []
    async with anyio.create_task_group() as tg:
        await session.open(tg)

        async def call() -> None:
            outcome.append(await session.request("tools/call", {}, timeouts=Timeouts(5, 5)))

        tg.start_soon(call)
        request = (await eventually(lambda: transport.requests("tools/call")))[0]
        assert request["id"] == 1
        transport.deliver({"jsonrpc": "2.0", "id": wrong_id, "result": {"wrong": True}})
        await anyio.sleep(0.05)
        assert outcome == []
        transport.deliver({"jsonrpc": "2.0", "id": 1, "result": {"right": True}})
        await eventually(lambda: outcome)
        assert outcome == [{"right": True}]


async def test_server_requests_are_answered_in_a_session() -> None:
    seen: list[types.ElicitRequestParams] = []

    async def elicit(params: types.ElicitRequestParams) -> dict[str, Any]:
        seen.append(params)
        return {"action": "accept", "content": {"name": "Ann"}}

    transport = ScriptedTransport(legacy_server)
    async with Client(
        transport,
        era="legacy",
        responders=Responders(elicitation=elicit, roots=["file:///r"]),
    ):
        transport.deliver({"jsonrpc": "2.0", "id": "s-1", "method": "ping"})
        transport.deliver({"jsonrpc": "2.0", "id": 7, "method": "roots/list"})
        transport.deliver({"jsonrpc": "2.0", "id": "s-2", "method": "elicitation/create",
                           "params": {"mode": "form", "message": "Name?",
                                      "requestedSchema": {"type": "object"}}})
        transport.deliver({"jsonrpc": "2.0", "id": "s-3", "method": "sampling/createMessage",
                           "params": {"messages": [], "maxTokens": 1}})
        transport.deliver({"jsonrpc": "2.0", "id": "s-4", "method": "elicitation/create",
                           "params": {"message": 42}})  # invalid params
        answers = await eventually(
            lambda: (a := {m["id"]: m for m in transport.sent if "method" not in m})
            and len(a) == 5 and a)
    assert answers["s-1"]["result"] == {}
    assert answers[7]["result"] == {"roots": [{"uri": "file:///r"}]}
    assert answers["s-2"]["result"] == {"action": "accept", "content": {"name": "Ann"}}
    assert answers["s-3"]["error"]["code"] == errors.METHOD_NOT_FOUND  # no sampling handler
    assert answers["s-4"]["error"]["code"] == errors.INVALID_PARAMS
    assert seen[0].message == "Name?"


async def test_a_server_request_cancelled_by_the_server_is_not_answered() -> None:
    events: list[str] = []

    async def slow_elicit(params: types.ElicitRequestParams) -> dict[str, Any]:
        events.append("asked")
        try:
            await anyio.sleep(10)
        except BaseException:
            events.append("cancelled")
            raise
        return {"action": "cancel"}

    transport = ScriptedTransport(legacy_server)
    async with Client(
        transport,
        era="legacy",
        responders=Responders(elicitation=slow_elicit),
    ) as client:
        transport.deliver({"jsonrpc": "2.0", "id": "s-9", "method": "elicitation/create",
                           "params": {"message": "?", "requestedSchema": {"type": "object"}}})
        await eventually(lambda: events == ["asked"])
        transport.deliver({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": "s-9", "reason": "user left"}})
        await eventually(lambda: "cancelled" in events)
        await client.ping()
        await anyio.sleep(0.05)
    assert [m for m in transport.sent if m.get("id") == "s-9"] == []  # spec: no answer


async def test_server_errors_carry_code_message_and_data() -> None:
    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "tools/call":
            return error(message, -32002, "Resource not found", {"uri": "x://y"})
        return legacy_server(message)

    async with Client(
        ScriptedTransport(script),
        era="legacy",
        behaviour=Behaviour(validate_output=False),
    ) as client:
        with pytest.raises(ServerError) as info:
            await client.call_tool("t")
    assert (info.value.code, info.value.message, info.value.data) == (
        -32002, "Resource not found", {"uri": "x://y"})
    assert "code -32002" in str(info.value)


async def test_invalid_results_are_protocol_errors() -> None:
    def script(message: dict[str, Any]) -> Any:
        if message.get("method") == "tools/call":
            return result(message, {"content": "not a list"})
        if message.get("method") == "tools/list":
            return result(message, {"tools": "nope"})
        return legacy_server(message)

    async with Client(
        ScriptedTransport(script),
        era="legacy",
        behaviour=Behaviour(validate_output=False),
    ) as client:
        with pytest.raises(errors.ProtocolError, match="invalid tools/call result"):
            await client.call_tool("t")
        with pytest.raises(errors.ProtocolError, match="no 'tools' list"):
            await client.list_tools()
        await client.ping()
