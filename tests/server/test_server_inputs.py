"""Client input (MRTR and legacy server→client requests), notifications, cancellation and
subscriptions through `server.engine`."""

from __future__ import annotations

import json
from typing import Any

import anyio
import msgspec
import pytest

from mcpkit.protocol import jsonrpc
from mcpkit.server.context import Context
from mcpkit.server.server import Server

pytestmark = pytest.mark.anyio

NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
ELICIT_CAPS = {"elicitation": {}}
ACCEPT = {"action": "accept", "content": {"name": "Ann"}}


def make_server() -> Server:
    server = Server("inputs")

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        answer = await ctx.elicit("Name?", NAME_SCHEMA, key="who")
        return f"Hello {(answer.get('content') or {}).get('name')}"

    @server.tool()
    async def two_rounds(ctx: Context) -> str:
        ctx.state = (ctx.state or 0) + 1
        first = await ctx.elicit("First?", NAME_SCHEMA, key="first")
        second = await ctx.elicit("Second?", NAME_SCHEMA, key="second")
        return f"{first['content']['name']}+{second['content']['name']} rounds={ctx.state}"

    @server.tool()
    async def sample_it(ctx: Context) -> str:
        answer = await ctx.sample(["hi"], max_tokens=5, key="s")
        return answer["content"]["text"]

    @server.tool()
    async def progress(ctx: Context) -> str:
        for step in (1, 2, 3):
            await ctx.report_progress(step, 3, f"step {step}")
        return "done"

    @server.tool()
    async def chatty(ctx: Context) -> str:
        for level in ("debug", "info", "warning", "error"):
            await ctx.log(level, f"at {level}", logger="t")
        return "logged"

    @server.tool()
    async def slow() -> str:
        await anyio.sleep(30)
        return "never"

    return server


def tool_call(name: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "arguments": {}, **extra}


# --- modern: multi round-trip requests ------------------------------------------------------


async def test_mrtr_elicitation_round_trip(make_rig: Any) -> None:
    rig = make_rig(make_server())
    first = await rig.modern("tools/call", tool_call("ask_name"), capabilities=ELICIT_CAPS)
    result = first["result"]
    assert result["resultType"] == "input_required"
    request = result["inputRequests"]["who"]
    assert request["method"] == "elicitation/create"
    assert request["params"]["requestedSchema"] == NAME_SCHEMA
    assert request["params"]["mode"] == "form"
    state = result["requestState"]
    assert isinstance(state, str)
    assert rig.channel.messages == []  # nothing goes to the client out of band
    retry = tool_call("ask_name", inputResponses={"who": ACCEPT}, requestState=state)
    done = (await rig.modern("tools/call", retry, capabilities=ELICIT_CAPS))["result"]
    assert done["resultType"] == "complete"
    assert done["content"][0]["text"] == "Hello Ann"


async def test_mrtr_multi_round_carries_answers_and_state(make_rig: Any) -> None:
    rig = make_rig(make_server())
    r1 = (await rig.modern("tools/call", tool_call("two_rounds"), capabilities=ELICIT_CAPS))[
        "result"
    ]
    assert list(r1["inputRequests"]) == ["first"]
    r2 = (
        await rig.modern(
            "tools/call",
            tool_call(
                "two_rounds",
                inputResponses={"first": {"action": "accept", "content": {"name": "A"}}},
                requestState=r1["requestState"],
            ),
            capabilities=ELICIT_CAPS,
        )
    )["result"]
    assert r2["resultType"] == "input_required" and list(r2["inputRequests"]) == ["second"]
    # the first answer travels in the state: the client only sends the new one
    r3 = (
        await rig.modern(
            "tools/call",
            tool_call(
                "two_rounds",
                inputResponses={"second": {"action": "accept", "content": {"name": "B"}}},
                requestState=r2["requestState"],
            ),
            capabilities=ELICIT_CAPS,
        )
    )["result"]
    assert r3["resultType"] == "complete"
    assert r3["content"][0]["text"] == "A+B rounds=3"


async def test_mrtr_malformed_answer_is_asked_again(make_rig: Any) -> None:
    rig = make_rig(make_server())
    retry = tool_call("ask_name", inputResponses={"who": {"action": "maybe"}})
    result = (await rig.modern("tools/call", retry, capabilities=ELICIT_CAPS))["result"]
    assert result["resultType"] == "input_required" and "who" in result["inputRequests"]


async def test_mrtr_tampered_state_is_refused(make_rig: Any) -> None:
    rig = make_rig(make_server())
    first = await rig.modern("tools/call", tool_call("two_rounds"), capabilities=ELICIT_CAPS)
    state = first["result"]["requestState"]
    body, tag = state.split(".")
    tampered = body[:-1] + ("A" if body[-1] != "A" else "B") + "." + tag
    for bad in (tampered, "garbage", 42):
        response = await rig.modern(
            "tools/call",
            tool_call("two_rounds", inputResponses={"first": ACCEPT}, requestState=bad),
            capabilities=ELICIT_CAPS,
        )
        assert response["error"]["code"] == -32602, bad


async def test_mrtr_state_is_bound_to_its_request(make_rig: Any) -> None:
    rig = make_rig(make_server())
    first = await rig.modern("tools/call", tool_call("ask_name"), capabilities=ELICIT_CAPS)
    other = {
        "name": "ask_name",
        "arguments": {"x": 1},
        "inputResponses": {"who": ACCEPT},
        "requestState": first["result"]["requestState"],
    }
    response = await rig.modern("tools/call", other, capabilities=ELICIT_CAPS)
    assert response["error"]["code"] == -32602


async def test_mrtr_missing_capability(make_rig: Any) -> None:
    rig = make_rig(make_server())
    response = await rig.modern("tools/call", tool_call("ask_name"))
    assert response["error"]["code"] == -32021
    assert response["error"]["data"] == {"requiredCapabilities": {"elicitation": {}}}
    sampling = await rig.modern("tools/call", tool_call("sample_it"), capabilities=ELICIT_CAPS)
    assert sampling["error"]["code"] == -32021


# --- legacy: server→client requests -------------------------------------------------------


async def test_legacy_elicitation_through_resolve(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize(capabilities=ELICIT_CAPS)
    outcome: dict[str, Any] = {}

    async def run() -> None:
        outcome["response"] = await rig.call("tools/call", tool_call("ask_name"), id=77)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        request = await rig.channel.wait_for(lambda m: m.get("method") == "elicitation/create")
        assert request["params"]["message"] == "Name?"
        assert rig.connection.resolve(
            jsonrpc.Response(request["id"], msgspec.Raw(json.dumps(ACCEPT).encode()))
        )
        assert not rig.connection.resolve(jsonrpc.Response("unknown", msgspec.Raw(b"{}")))
    assert outcome["response"]["id"] == 77
    assert outcome["response"]["result"]["content"][0]["text"] == "Hello Ann"


async def test_legacy_client_error_answer(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize(capabilities={"sampling": {}})
    outcome: dict[str, Any] = {}

    async def run() -> None:
        outcome["response"] = await rig.call("tools/call", tool_call("sample_it"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        request = await rig.channel.wait_for(lambda m: m.get("method") == "sampling/createMessage")
        reply = jsonrpc.decode_message(
            jsonrpc.encode_error(request["id"], jsonrpc.errors.invalid_request("no"))
        )
        rig.engine.handle_response(reply, rig.connection)
    assert outcome["response"]["error"]["code"] == -32600


async def test_legacy_elicitation_without_capability(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize()
    response = await rig.call("tools/call", tool_call("ask_name"))
    assert response["error"]["code"] == -32021
    assert rig.channel.messages == []


# --- progress and logging -------------------------------------------------------------------


async def test_progress_needs_a_token(make_rig: Any, meta_for: Any) -> None:
    rig = make_rig(make_server())
    await rig.modern("tools/call", tool_call("progress"))
    assert rig.channel.notifications() == []
    params = tool_call("progress", _meta={**meta_for(), "progressToken": "tok"})
    assert (await rig.call("tools/call", params))["result"]["content"][0]["text"] == "done"
    notes = rig.channel.notifications("notifications/progress")
    assert [n["params"] for n in notes] == [
        {"progressToken": "tok", "progress": s, "total": 3, "message": f"step {s}"}
        for s in (1, 2, 3)
    ]


async def test_legacy_progress(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize()
    await rig.call("tools/call", tool_call("progress"))
    assert rig.channel.notifications() == []
    await rig.call("tools/call", tool_call("progress", _meta={"progressToken": 5}))
    assert [n["params"]["progressToken"] for n in rig.channel.notifications()] == [5, 5, 5]


async def test_modern_log_level_gates_messages(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.modern("tools/call", tool_call("chatty"))
    assert rig.channel.notifications() == []
    await rig.modern(
        "tools/call", tool_call("chatty"), **{"io.modelcontextprotocol/logLevel": "warning"}
    )
    notes = rig.channel.notifications("notifications/message")
    assert [n["params"]["level"] for n in notes] == ["warning", "error"]
    assert notes[0]["params"] == {"level": "warning", "data": "at warning", "logger": "t"}


async def test_legacy_set_level_gates_messages(make_rig: Any) -> None:
    rig = make_rig(make_server())
    await rig.initialize()
    await rig.call("tools/call", tool_call("chatty"))
    assert [n["params"]["level"] for n in rig.channel.notifications()] == [
        "info",
        "warning",
        "error",
    ]
    rig.channel.messages.clear()
    await rig.call("logging/setLevel", {"level": "error"})
    await rig.call("tools/call", tool_call("chatty"))
    assert [n["params"]["level"] for n in rig.channel.notifications()] == ["error"]


# --- cancellation ------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_cancelled_request_gets_no_response(make_rig: Any, era: str) -> None:
    rig = make_rig(make_server())
    if era == "legacy":
        await rig.initialize()
    send = rig.modern if era == "modern" else rig.call
    outcome: dict[str, Any] = {}

    async def run() -> None:
        outcome["response"] = await send("tools/call", tool_call("slow"), id="slow-1")

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            while "slow-1" not in rig.connection.in_flight:  # noqa: ASYNC110
                await anyio.sleep(0.005)
            await rig.notify("notifications/cancelled", {"requestId": "slow-1", "reason": "bored"})
    assert outcome["response"] is None
    assert rig.connection.in_flight == {}
    # cancelling an unknown request is harmless
    await rig.notify("notifications/cancelled", {"requestId": "nope"})


# --- subscriptions -----------------------------------------------------------------------------


async def test_subscriptions_listen(make_rig: Any) -> None:
    server = make_server()
    server.add_resource("x", "memo://r", name="r")
    rig = make_rig(server)
    outcome: dict[str, Any] = {}

    async def listen() -> None:
        outcome["response"] = await rig.modern(
            "subscriptions/listen",
            {
                "notifications": {
                    "toolsListChanged": True,
                    "promptsListChanged": True,
                    "resourceSubscriptions": ["memo://r"],
                }
            },
            id="sub-1",
        )

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(listen)
            ack = await rig.channel.wait_for(
                lambda m: m.get("method") == "notifications/subscriptions/acknowledged"
            )
            assert ack["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}
            # no prompts on this server: that part of the filter is not honoured
            assert ack["params"]["notifications"] == {
                "toolsListChanged": True,
                "resourceSubscriptions": ["memo://r"],
            }
            await server.notify_list_changed("tools")
            await server.notify_list_changed("resources")  # not asked for
            await server.notify_resource_updated("memo://r")
            await server.notify_resource_updated("memo://other")  # not subscribed
            server.notifier.end_all()
    notes = [m for m in rig.channel.notifications() if m is not ack]
    assert [n["method"] for n in notes] == [
        "notifications/tools/list_changed",
        "notifications/resources/updated",
    ]
    for note in notes:
        assert note["params"]["_meta"] == {"io.modelcontextprotocol/subscriptionId": "sub-1"}
    assert notes[1]["params"]["uri"] == "memo://r"
    result = outcome["response"]["result"]
    assert result["_meta"]["io.modelcontextprotocol/subscriptionId"] == "sub-1"
    assert server.notifier.listeners == set()


async def test_legacy_session_gets_list_changed_and_subscribed_updates(make_rig: Any) -> None:
    server = make_server()
    server.add_resource("x", "memo://r", name="r")
    rig = make_rig(server)
    server.notifier.connections.add(rig.connection)
    await rig.initialize()
    assert (await rig.call("resources/subscribe", {"uri": "memo://r"}))["result"] == {}
    await server.notify_list_changed("tools")
    await server.notify_resource_updated("memo://r")
    await server.notify_resource_updated("memo://other")
    assert (await rig.call("resources/unsubscribe", {"uri": "memo://r"}))["result"] == {}
    await server.notify_resource_updated("memo://r")
    notes = rig.channel.notifications()
    assert [(n["method"], n.get("params")) for n in notes] == [
        ("notifications/tools/list_changed", None),
        ("notifications/resources/updated", {"uri": "memo://r"}),
    ]
