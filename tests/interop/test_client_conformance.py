"""mcpkit's `Client` drives mcpkit's own conformance fixture server as a separate process, over
every transport it serves — stdio, Streamable HTTP, HTTP+SSE (2024-11-05) and WebSocket —
in both eras (pinned, and detected with `auto`): sampling, elicitation, progress, logging, the
MRTR tools, resources and templates, prompts, completion, list-changed notifications
(subscriptions/listen in the modern era) and resource subscriptions (legacy)."""

from __future__ import annotations

import base64
import sys
import time
from typing import Any

import anyio
import pytest

from mcpkit.client import (
    Behaviour,
    Client,
    ConnectOptions,
    Notifications,
    Responders,
    ServerError,
)
from mcpkit.client import era as era_cache
from mcpkit.protocol import types
from mcpkit.protocol.versions import Era

from .client_peers import LEGACY_VERSION, MODERN_VERSION, text_of, until

pytestmark = [pytest.mark.interop, pytest.mark.anyio]

LIMIT_S = 15.0
STDIO = [sys.executable, "-m", "mcpkit.testing.conformance_server", "--transport", "stdio"]
ROOT_URI = "file:///tmp/interop-root"
MRTR = "test_input_required_result"


@pytest.fixture(autouse=True)
def _fresh_era_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(era_cache, "_CACHE", {})


class Answers:
    """Sampling and elicitation handlers that fill forms from their schema."""

    def __init__(self) -> None:
        self.sampled: list[str] = []
        self.elicited: list[str] = []
        self.logs: list[types.LoggingMessageNotificationParams] = []
        self.changed: list[str] = []

    async def sampling(self, params: types.CreateMessageRequestParams) -> dict[str, Any]:
        self.sampled.append(getattr(params.messages[0].content, "text", ""))
        return {"role": "assistant", "model": "interop-model",
                "content": {"type": "text", "text": "Paris"}}

    async def elicitation(self, params: types.ElicitRequestParams) -> dict[str, Any]:
        self.elicited.append(params.message)
        schema = params.requested_schema if isinstance(params.requested_schema, dict) else {}
        values = {"name": "Ada", "username": "ada", "email": "ada@example.com",
                  "ok": True, "confirm": True}
        content = {key: values[key] for key in schema.get("properties", {}) if key in values}
        return {"action": "accept", "content": content}

    def handlers(self) -> dict[str, Any]:
        return {"responders": Responders(sampling=self.sampling, elicitation=self.elicitation,
                                         roots=[ROOT_URI]),
                "notifications": Notifications(on_log=self.logs.append,
                                               on_list_changed=self.changed.append)}


def _expected_era(era: str) -> Era:
    return Era.LEGACY if era == "legacy" else Era.MODERN


async def _exercise(client: Client, answers: Answers) -> None:
    assert client.server_info is not None
    assert client.server_info.name == "mcpkit-conformance-server"
    assert client.instructions == "The mcpkit conformance fixture server."
    tools = {tool.name for tool in await client.list_tools()}
    assert {"test_simple_text", "test_sampling", "test_elicitation", "test_tool_with_progress",
            "test_tool_with_logging", f"{MRTR}_elicitation", "test_trigger_tool_change"} <= tools

    # content
    assert text_of(await client.call_tool("test_simple_text")) == (
        "This is a simple text response for testing.")
    image = (await client.call_tool("test_image_content")).content[0]
    assert isinstance(image, types.ImageContent)
    assert base64.b64decode(image.data).startswith(b"\x89PNG")
    audio = (await client.call_tool("test_audio_content")).content[0]
    assert isinstance(audio, types.AudioContent) and audio.mime_type == "audio/wav"
    mixed = await client.call_tool("test_multiple_content_types")
    assert [type(c).__name__ for c in mixed.content] == [
        "TextContent", "ImageContent", "EmbeddedResource"]
    failed = await client.call_tool("test_error_handling")
    assert failed.is_error is True
    assert "intentionally returns an error" in getattr(failed.content[0], "text", "")
    schema_tool = await client.call_tool(
        "json_schema_2020_12_tool", {"name": "Ada", "contactMethod": "email", "email": "a@b"})
    assert text_of(schema_tool) == "ok"
    assert text_of(await client.call_tool("test_x_mcp_header", {"region": "eu-west"})) == (
        "region=eu-west")

    # asking the client: legacy server→client requests, modern input_required rounds
    assert text_of(await client.call_tool("test_sampling", {"prompt": "Capital?"})) == (
        "LLM response: Paris")
    assert text_of(await client.call_tool("test_missing_capability")) == "sampling is available"
    elicited = text_of(await client.call_tool("test_elicitation", {"message": "Who are you?"}))
    assert elicited == ("User response: action=accept, "
                        "content={'username': 'ada', 'email': 'ada@example.com'}")
    mrtr = {
        "elicitation": "Hello, Ada",
        "sampling": "Model said: Paris",
        "list_roots": f"Roots: {ROOT_URI}",
        "request_state": "Confirmed: True (state state-ok)",
        "tampered_state": "Confirmed: True (state state-ok)",
        "multiple_inputs": "Got 3 answers",
        "multi_round": "Done: accept, accept",
        "capabilities": "Capabilities respected",
    }
    for suffix, expected in mrtr.items():
        assert text_of(await client.call_tool(f"{MRTR}_{suffix}")) == expected, suffix
    assert text_of(await client.get_prompt(f"{MRTR}_prompt")) == "Write a greeting for Ada."
    assert "Who are you?" in answers.elicited
    assert "Capital?" in answers.sampled

    # progress and logging
    progress: list[tuple[float, float | None, str | None]] = []
    done = await client.call_tool("test_tool_with_progress",
                                  on_progress=lambda *p: progress.append(p))
    assert text_of(done) == "Progress test completed"
    await until(lambda: len(progress) == 3, "3 progress notifications")
    assert progress == [(0.0, 100.0, "step 0"), (50.0, 100.0, "step 50"),
                        (100.0, 100.0, "step 100")]
    await client.set_logging_level("info")
    assert text_of(await client.call_tool("test_tool_with_logging")) == "Logging test completed"
    await until(lambda: len(answers.logs) >= 3, "3 log messages")
    assert [(log.level, log.logger, log.data) for log in answers.logs[:3]] == [
        ("info", "conformance", step) for step in
        ("Tool execution started", "Tool processing data", "Tool execution completed")]

    # resources
    resources = {r.uri: r for r in await client.list_resources()}
    assert {"test://static-text", "test://static-binary", "test://watched-resource"} <= set(
        resources)
    assert resources["test://static-binary"].mime_type == "image/png"
    text = await client.read_resource("test://static-text")
    assert text.contents[0].text == "This is the content of the static text resource."
    binary = await client.read_resource("test://static-binary")
    assert base64.b64decode(binary.contents[0].blob or "").startswith(b"\x89PNG")
    templates = {t.uri_template for t in await client.list_resource_templates()}
    assert "test://template/{id}/data" in templates
    templated = await client.read_resource("test://template/42/data")
    assert templated.contents[0].uri == "test://template/42/data"
    assert '"id": "42"' in (templated.contents[0].text or "")

    # prompts and completion
    prompts = {p.name for p in await client.list_prompts()}
    assert {"test_simple_prompt", "test_prompt_with_arguments",
            "test_prompt_with_embedded_resource", "test_prompt_with_image"} <= prompts
    assert text_of(await client.get_prompt("test_simple_prompt")) == (
        "This is a simple prompt for testing.")
    with_args = await client.get_prompt("test_prompt_with_arguments",
                                        {"arg1": "one", "arg2": "two"})
    assert text_of(with_args) == "Prompt with arguments: arg1='one', arg2='two'"
    embedded = await client.get_prompt("test_prompt_with_embedded_resource",
                                       {"resourceUri": "test://x"})
    first = embedded.messages[0].content
    assert isinstance(first, types.EmbeddedResource) and first.resource.uri == "test://x"
    with_image = await client.get_prompt("test_prompt_with_image")
    assert isinstance(with_image.messages[0].content, types.ImageContent)
    ref = {"type": "ref/prompt", "name": "test_prompt_with_arguments"}
    assert (await client.complete(ref, "arg1", "te")).values == ["test", "testing", "tested"]
    assert (await client.complete(ref, "arg1", "testi")).values == ["testing"]

    await client.ping()
    discovered = await client.discover()
    assert client.protocol_version in discovered.supported_versions


async def _notifications(client: Client, answers: Answers) -> None:
    """List changes reach the client (modern: on the subscriptions/listen stream)."""
    await client.listen()
    before = "test_dynamic_tool" in {tool.name for tool in await client.list_tools()}
    answers.changed.clear()
    assert text_of(await client.call_tool("test_trigger_tool_change")) == "Tool list changed"
    await until(lambda: "tools" in answers.changed, "tools list_changed")
    after = "test_dynamic_tool" in {tool.name for tool in await client.list_tools()}
    assert after is not before
    assert text_of(await client.call_tool("test_trigger_prompt_change")) == "Prompt list changed"
    await until(lambda: "prompts" in answers.changed, "prompts list_changed")
    if client.era is Era.LEGACY:
        assert client.server_capabilities["resources"].get("subscribe") is True
        await client.subscribe("test://watched-resource")
        await client.unsubscribe("test://watched-resource")


async def _run(target: Any, era: str, **options: Any) -> None:
    answers = Answers()
    with anyio.fail_after(LIMIT_S):
        async with Client(target, era=era, **answers.handlers(), **options) as client:
            assert client.era is _expected_era(era)
            assert client.protocol_version == (
                LEGACY_VERSION if era == "legacy" else MODERN_VERSION)
            await _exercise(client, answers)
            await _notifications(client, answers)


ERAS = ["auto", "modern", "legacy"]


@pytest.mark.parametrize("era", ERAS)
async def test_stdio(era: str) -> None:
    await _run(STDIO, era)


@pytest.mark.parametrize("era", ERAS)
async def test_streamable_http(http_server: Any, era: str) -> None:
    await _run(http_server.url, era)


@pytest.mark.parametrize("era", ERAS)
async def test_http_sse(http_server: Any, era: str) -> None:
    await _run(f"http://127.0.0.1:{http_server.port}/sse", era,
               connect=ConnectOptions(kind="sse"))


@pytest.mark.parametrize("path", ["/ws", "/mcp"])
@pytest.mark.parametrize("era", ERAS)
async def test_websocket(http_server: Any, era: str, path: str) -> None:
    await _run(f"ws://127.0.0.1:{http_server.port}{path}", era)


@pytest.mark.parametrize("era", ["modern", "legacy"])
async def test_only_declared_capabilities_are_used(http_server: Any, era: str) -> None:
    """With only a sampling handler the client declares only sampling: the server's
    capability-aware tool must sample rather than elicit."""
    sampled: list[Any] = []

    async def sampling(params: types.CreateMessageRequestParams) -> dict[str, Any]:
        sampled.append(params)
        return {"role": "assistant", "model": "m", "content": {"type": "text", "text": "hi"}}

    with anyio.fail_after(LIMIT_S):
        async with Client(
            http_server.url,
            era=era,
            responders=Responders(sampling=sampling),
        ) as client:
            result = await client.call_tool(f"{MRTR}_capabilities")
            assert text_of(result) == "Capabilities respected"
    assert [getattr(p.messages[0].content, "text", "") for p in sampled] == ["Say hello"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_modern_tasks_extension(request: pytest.FixtureRequest, transport: str) -> None:
    """`tasks=True`: a tool the server runs as a task is followed to its end, input it asks
    for on the way is answered (tasks/update), failures surface like plain calls."""
    answers = Answers()
    target = STDIO if transport == "stdio" else request.getfixturevalue("http_server").url
    with anyio.fail_after(LIMIT_S):
        async with Client(target, behaviour=Behaviour(tasks=True), **answers.handlers()) as client:
            assert client.era is Era.MODERN
            assert text_of(await client.call_tool("greet", {"name": "Ada"})) == "Hello, Ada!"
            computed = await client.call_tool("slow_compute", {"seconds": 0.2, "label": "L"})
            assert text_of(computed) == "Computed 'L' after 0.2 seconds"
            deleted = await client.call_tool("confirm_delete", {"filename": "a.txt"})
            assert text_of(deleted) == "Deleted a.txt"
            assert text_of(await client.call_tool("multi_input")) == "Got Ada and Ada"
            assert text_of(await client.call_tool("test_tool_with_task")) == "Hello, Ada"
            failed = await client.call_tool("failing_job")
            assert failed.is_error is True
            assert "the job failed" in getattr(failed.content[0], "text", "")
            with pytest.raises(ServerError, match="deliberate protocol error"):
                await client.call_tool("protocol_error_job")
    assert sorted(answers.elicited) == [
        "Delete a.txt?", "First name?", "Second name?", "What is your name?"]


async def test_closing_a_modern_stdio_client_with_a_listen_stream_is_quick() -> None:
    with anyio.fail_after(LIMIT_S):
        async with Client(STDIO, era="modern") as client:
            await client.listen()
            started = time.monotonic()
    assert time.monotonic() - started < 1.0
