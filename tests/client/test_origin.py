"""Request origins (mcpkit.client.origin): a server request is answered in the context of
the client request it belongs to. Over real HTTP, where the server sends it on the request's
own stream, and over a real stdio pipe, where only the one request in flight can own it."""

from __future__ import annotations

import sys
from typing import Any

import anyio
import pytest
from tests.procs import serve_in_thread

from mcpkit import Client, Server
from mcpkit.client import ConnectOptions, Responders
from mcpkit.client.origin import current_origin, request_origin
from mcpkit.server.context import Context

pytestmark = pytest.mark.anyio


def sampling_server() -> Server:
    server = Server("origin-test")

    @server.tool()
    async def ask_model(ctx: Context, delay: float = 0.0) -> str:
        """Sample once and return the model's text."""
        await anyio.sleep(delay)
        result = await ctx.sample([{"role": "user", "content": {"type": "text", "text": "?"}}],
                                  max_tokens=5)
        return str(result["content"]["text"])

    return server


async def answer_with_origin(params: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "model": "m",
            "content": {"type": "text", "text": f"origin={current_origin()}"}}


def text_of(result: Any) -> str:
    return str(result.content[0].text)


async def test_each_server_request_answers_in_its_own_requests_origin_over_http() -> None:
    with serve_in_thread(sampling_server().asgi_app()) as base:
        async with Client(
            f"{base}/mcp",
            era="legacy",
            responders=Responders(sampling=answer_with_origin),
        ) as client:
            results: dict[str, str] = {}

            async def call(name: str, delay: float) -> None:
                with request_origin(name):
                    results[name] = text_of(await client.call_tool(
                        "ask_model", {"delay": delay}))

            async with anyio.create_task_group() as tg:
                for index, name in enumerate(("alpha", "beta", "gamma")):
                    tg.start_soon(call, name, 0.05 * (3 - index))
    assert results == {name: f"origin={name}" for name in ("alpha", "beta", "gamma")}


async def test_the_only_request_in_flight_owns_a_server_request_over_stdio(tmp_path: Any) -> None:
    script = tmp_path / "server.py"
    script.write_text(
        "from tests.client.test_origin import sampling_server\n"
        "sampling_server().run_stdio()\n")
    command = [sys.executable, str(script)]
    env = {"PYTHONPATH": ":".join(sys.path)}
    async with Client(
        command,
        era="legacy",
        connect=ConnectOptions(env=env),
        responders=Responders(sampling=answer_with_origin),
    ) as client:
        with request_origin("solo"):
            result = await client.call_tool("ask_model", {})
        assert text_of(result) == "origin=solo"
        # Without an origin set, the handler sees none rather than a guess.
        assert text_of(await client.call_tool("ask_model", {})) == "origin=None"


async def test_answer_inputs_false_returns_the_input_required_result_as_is() -> None:
    with serve_in_thread(sampling_server().asgi_app()) as base:
        async with Client(
            f"{base}/mcp",
            era="modern",
            responders=Responders(sampling=answer_with_origin),
        ) as client:
            raw = await client.request("tools/call", {"name": "ask_model", "arguments": {}},
                                       answer_inputs=False)
            assert raw["resultType"] == "input_required"
            assert isinstance(raw.get("requestState"), str)
            (request,) = raw["inputRequests"].values()
            assert request["method"] == "sampling/createMessage"
            # Answered by hand, the retry completes.
            (key,) = raw["inputRequests"]
            answer = await answer_with_origin(request["params"])
            done = await client.request(
                "tools/call", {"name": "ask_model", "arguments": {},
                               "inputResponses": {key: answer},
                               "requestState": raw["requestState"]},
                answer_inputs=False)
            assert done["content"][0]["text"] == "origin=None"
