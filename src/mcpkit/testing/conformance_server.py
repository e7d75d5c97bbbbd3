"""The conformance fixture server: everything the official MCP conformance suite calls.

    python -m mcpkit.testing.conformance_server --port 3001            # http://localhost:3001/mcp
    python -m mcpkit.testing.conformance_server --transport stdio

Built with mcpkit's public server API only; the contract it follows is the harness's
(tools, resources, prompts and behaviours named in shared/conformance/FIXTURE.md).
"""

from __future__ import annotations

import argparse
import base64
from typing import Any

import anyio

from mcpkit.protocol import errors
from mcpkit.serve_arguments import add_transport_arguments, serve
from mcpkit.server import tasks
from mcpkit.server.context import Context
from mcpkit.server.server import Server

# A 1x1 PNG and a 44-byte silent WAV: real, decodable media.
PNG_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9a"
    "wAAAABJRU5ErkJggg=="
)
WAV_B64 = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00\x40\x1f\x00\x00\x80>\x00\x00"
    b"\x02\x00\x10\x00data\x00\x00\x00\x00"
).decode()

JSON_SCHEMA_2020_12: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

USER_SCHEMA = {
    "type": "object",
    "properties": {"username": {"type": "string"}, "email": {"type": "string"}},
    "required": ["username", "email"],
}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


def _text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def _image() -> dict[str, Any]:
    return {"type": "image", "data": PNG_B64, "mimeType": "image/png"}


def _embedded(uri: str = "test://embedded-resource") -> dict[str, Any]:
    return {
        "type": "resource",
        "resource": {"uri": uri, "mimeType": "text/plain", "text": "This is an embedded resource."},
    }


def add_content_tools(server: Server) -> None:
    def test_simple_text() -> str:
        """Returns a simple text response."""
        return "This is a simple text response for testing."

    def test_image_content() -> list[dict[str, Any]]:
        """Returns an image (PNG)."""
        return [_image()]

    def test_audio_content() -> list[dict[str, Any]]:
        """Returns audio (WAV)."""
        return [{"type": "audio", "data": WAV_B64, "mimeType": "audio/wav"}]

    def test_embedded_resource() -> list[dict[str, Any]]:
        """Returns an embedded text resource."""
        return [_embedded()]

    def test_multiple_content_types() -> list[dict[str, Any]]:
        """Returns text, an image and an embedded resource."""
        return [_text("Multiple content types test:"), _image(), _embedded()]

    def test_error_handling() -> str:
        """Always fails, to test error results."""
        # builtin: a tool's own failure (any exception), which the server makes an error result
        raise RuntimeError("This tool intentionally returns an error for testing")

    for fn in (
        test_simple_text,
        test_image_content,
        test_audio_content,
        test_embedded_resource,
        test_multiple_content_types,
        test_error_handling,
    ):
        server.add_tool(fn)
    server.add_tool(
        lambda **_: "ok",
        name="json_schema_2020_12_tool",
        description="A tool whose input schema uses JSON Schema 2020-12 features.",
        input_schema=JSON_SCHEMA_2020_12,
    )


def add_streaming_tools(server: Server) -> None:
    async def test_tool_with_logging(ctx: Context) -> str:
        """Sends three log messages while it runs."""
        for step in ("Tool execution started", "Tool processing data", "Tool execution completed"):
            await ctx.info(step, logger="conformance")
            await anyio.sleep(0.05)
        return "Logging test completed"

    async def test_tool_with_progress(ctx: Context) -> str:
        """Reports progress 0, 50 and 100 of 100."""
        for value in (0, 50, 100):
            await ctx.report_progress(value, 100, f"step {value}")
            await anyio.sleep(0.05)
        return "Progress test completed"

    async def test_reconnection(ctx: Context) -> str:
        """Closes its SSE connection mid-call; the result arrives on the resumed stream."""
        await anyio.sleep(0.1)
        await ctx.close_stream(retry_ms=500)
        await anyio.sleep(0.5)
        return "Reconnection test completed"

    async def test_logging_tool(ctx: Context) -> str:
        """Logs only if the request asked for a log level."""
        await ctx.info("logging tool invoked", logger="conformance")
        return "Logging tool completed"

    def test_streaming_elicitation() -> str:
        """Returns a plain result; sends no requests on the stream."""
        return "Streaming elicitation diagnostic completed"

    for fn in (
        test_tool_with_logging,
        test_tool_with_progress,
        test_reconnection,
        test_logging_tool,
        test_streaming_elicitation,
    ):
        server.add_tool(fn)


def add_client_feature_tools(server: Server) -> None:
    async def test_sampling(prompt: str, ctx: Context) -> str:
        """Asks the client's model to answer `prompt`."""
        result = await ctx.sample([prompt], max_tokens=100)
        content = result.get("content", {})
        return f"LLM response: {content.get('text', '') if isinstance(content, dict) else ''}"

    async def test_elicitation(message: str, ctx: Context) -> str:
        """Asks the user for a username and an email."""
        result = await ctx.elicit(message, USER_SCHEMA)
        return f"User response: action={result.get('action')}, content={result.get('content')}"

    async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
        """Elicits fields that all carry defaults (SEP-1034)."""
        schema = {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number", "default": 95.5},
                "status": {
                    "type": "string",
                    "enum": ["active", "inactive", "pending"],
                    "default": "active",
                },
                "verified": {"type": "boolean", "default": True},
            },
        }
        result = await ctx.elicit("Please review your profile", schema)
        return f"Elicitation completed: action={result.get('action')}"

    async def test_elicitation_sep1330_enums(ctx: Context) -> str:
        """Elicits every enum form (SEP-1330)."""
        options = ["option1", "option2", "option3"]
        titled = [{"const": v, "title": v.title()} for v in options]
        schema = {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": options},
                "titledSingle": {"type": "string", "oneOf": titled},
                "legacyEnum": {
                    "type": "string",
                    "enum": options,
                    "enumNames": ["Option One", "Option Two", "Option Three"],
                },
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": options}},
                "titledMulti": {"type": "array", "items": {"anyOf": titled}},
            },
        }
        result = await ctx.elicit("Choose options", schema)
        return f"Elicitation completed: action={result.get('action')}"

    def test_missing_capability() -> str:
        """Needs the client's sampling capability."""
        return "sampling is available"

    for fn in (
        test_sampling,
        test_elicitation,
        test_elicitation_sep1034_defaults,
        test_elicitation_sep1330_enums,
    ):
        server.add_tool(fn)
    server.add_tool(test_missing_capability, required_capabilities={"sampling": {}})

    def test_x_mcp_header(region: str) -> str:
        return f"region={region}"

    server.add_tool(
        test_x_mcp_header,
        description="Mirrors its region argument into Mcp-Param-Region.",
        input_schema={
            "type": "object",
            "properties": {"region": {"type": "string", "x-mcp-header": "Region"}},
            "required": ["region"],
        },
    )


MRTR_PREFIX = "test_input_required_result"


def add_mrtr_tools(server: Server) -> None:
    """MRTR tools with one input each (elicitation, sampling, roots, request state)."""

    async def elicitation(ctx: Context) -> str:
        """Asks for the user's name with an input-required round."""
        answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        return f"Hello, {(answer.get('content') or {}).get('name', 'unknown')}"

    async def sampling(ctx: Context) -> str:
        """Asks the client's model with an input-required round."""
        answer = await ctx.sample(
            ["What is the capital of France?"], max_tokens=100, key="capital_question"
        )
        content = answer.get("content") or {}
        return f"Model said: {content.get('text', '') if isinstance(content, dict) else ''}"

    async def list_roots(ctx: Context) -> str:
        """Asks for the client's roots with an input-required round."""
        roots = await ctx.list_roots(key="client_roots")
        return "Roots: " + ", ".join(r.get("uri", "") for r in roots)

    async def request_state(ctx: Context) -> str:
        """Asks for confirmation and carries state across the round."""
        ctx.state = "state-ok"
        answer = await ctx.elicit(
            "Confirm?",
            {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]},
            key="confirm",
        )
        return f"Confirmed: {(answer.get('content') or {}).get('ok')} (state {ctx.state})"

    handlers = {
        "elicitation": elicitation,
        "sampling": sampling,
        "list_roots": list_roots,
        "request_state": request_state,
        "tampered_state": request_state,
    }
    for suffix, fn in handlers.items():
        server.add_tool(fn, name=f"{MRTR_PREFIX}_{suffix}")


def add_mrtr_compound_tools(server: Server) -> None:
    """MRTR tools with several inputs: one round of many, several rounds, capability-aware."""

    async def multiple_inputs(ctx: Context) -> str:
        """Asks for elicitation, sampling and roots in one round."""
        answers = await ctx.ask_many(
            {
                "user_name": (
                    "elicitation/create",
                    {"mode": "form", "message": "Name?", "requestedSchema": NAME_SCHEMA},
                ),
                "capital_question": (
                    "sampling/createMessage",
                    {
                        "messages": [
                            {"role": "user", "content": _text("What is the capital of France?")}
                        ],
                        "maxTokens": 100,
                    },
                ),
                "client_roots": ("roots/list", {}),
            }
        )
        return f"Got {len(answers)} answers"

    async def multi_round(ctx: Context) -> str:
        """Two rounds of input, one after the other."""
        first = await ctx.elicit("Step 1: your name?", NAME_SCHEMA, key="step1")
        ctx.state = {"step": 2}
        second = await ctx.elicit("Step 2: confirm?", NAME_SCHEMA, key="step2")
        return f"Done: {first.get('action')}, {second.get('action')}"

    async def capabilities(ctx: Context) -> str:
        """Asks only for what the client declared it supports."""
        if ctx.client_supports("elicitation"):
            await ctx.elicit("Name?", NAME_SCHEMA, key="user_name")
        else:
            await ctx.sample(["Say hello"], max_tokens=50, key="greeting")
        return "Capabilities respected"

    handlers = {
        "multiple_inputs": multiple_inputs,
        "multi_round": multi_round,
        "capabilities": capabilities,
    }
    for suffix, fn in handlers.items():
        server.add_tool(fn, name=f"{MRTR_PREFIX}_{suffix}")

    async def mrtr_prompt(ctx: Context) -> str:
        """A prompt that needs the user's name first."""
        answer = await ctx.elicit("Your name?", NAME_SCHEMA, key="user_name")
        return f"Write a greeting for {(answer.get('content') or {}).get('name', 'someone')}."

    server.add_prompt(mrtr_prompt, name=f"{MRTR_PREFIX}_prompt")


def add_change_tools(server: Server) -> None:
    async def test_trigger_tool_change(ctx: Context) -> str:
        """Adds or removes a tool and notifies listeners."""
        if "test_dynamic_tool" in ctx.server.tools:
            ctx.server.remove_tool("test_dynamic_tool")
        else:
            ctx.server.add_tool(
                lambda: "dynamic",
                name="test_dynamic_tool",
                description="A tool that comes and goes.",
            )
        await ctx.server.notify_list_changed("tools")
        return "Tool list changed"

    async def test_trigger_prompt_change(ctx: Context) -> str:
        """Adds or removes a prompt and notifies listeners."""
        if "test_dynamic_prompt" in ctx.server.prompts:
            ctx.server.remove_prompt("test_dynamic_prompt")
        else:
            ctx.server.add_prompt(
                lambda: "dynamic",
                name="test_dynamic_prompt",
                description="A prompt that comes and goes.",
            )
        await ctx.server.notify_list_changed("prompts")
        return "Prompt list changed"

    server.add_tool(test_trigger_tool_change)
    server.add_tool(test_trigger_prompt_change)


def add_resources_and_prompts(server: Server) -> None:
    server.add_resource(
        "This is the content of the static text resource.",
        "test://static-text",
        name="static-text",
        mime_type="text/plain",
        description="A static text resource",
    )
    server.add_resource(
        base64.b64decode(PNG_B64),
        "test://static-binary",
        name="static-binary",
        mime_type="image/png",
        description="A static binary resource",
    )
    server.add_resource(
        "Watched resource content.",
        "test://watched-resource",
        name="watched-resource",
        mime_type="text/plain",
        description="A resource that can be subscribed to",
    )

    def template_data(id: str) -> str:
        """Data for an item, by id."""
        return f'{{"id": "{id}", "templateTest": true, "data": "Data for ID: {id}"}}'

    server.add_resource_template(
        template_data,
        "test://template/{id}/data",
        name="template-data",
        mime_type="application/json",
    )

    def test_simple_prompt() -> str:
        """A simple prompt without arguments."""
        return "This is a simple prompt for testing."

    def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
        """A prompt with two required arguments."""
        return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"

    def test_prompt_with_embedded_resource(resourceUri: str) -> list[Any]:
        """A prompt that embeds a resource."""
        return [
            {
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {
                        "uri": resourceUri,
                        "mimeType": "text/plain",
                        "text": "Embedded resource content for testing.",
                    },
                },
            },
            {"role": "user", "content": _text("Please process the embedded resource above.")},
        ]

    def test_prompt_with_image() -> list[Any]:
        """A prompt that contains an image."""
        return [
            {"role": "user", "content": _image()},
            {"role": "user", "content": _text("Please analyze the image above.")},
        ]

    for fn in (
        test_simple_prompt,
        test_prompt_with_arguments,
        test_prompt_with_embedded_resource,
        test_prompt_with_image,
    ):
        server.add_prompt(fn)

    def complete(argument: str, value: str, context: dict[str, str]) -> list[str]:
        return [v for v in ("test", "testing", "tested") if v.startswith(value)]

    server.add_completion(complete, prompt="test_prompt_with_arguments")


def add_task_tools(server: Server) -> None:
    """The tasks extension's fixtures (FIXTURE.md §3 "Tasks")."""
    server.extensions[tasks.EXTENSION] = {}

    def greet(name: str) -> str:
        """Greets someone (never a task)."""
        return f"Hello, {name}!"

    async def slow_compute(seconds: float, label: str = "") -> str:
        """Sleeps `seconds` seconds, then reports; runs as a task when it can."""
        await anyio.sleep(max(0.0, min(seconds, 600.0)))
        return f"Computed {label!r} after {seconds} seconds"

    async def failing_job() -> str:
        """Fails with a tool execution error after about a second."""
        await anyio.sleep(1.0)
        # builtin: a tool's own failure (any exception), which the task reports as failed
        raise RuntimeError("the job failed")

    async def protocol_error_job() -> str:
        """Fails with a protocol-level error."""
        await anyio.sleep(0.1)
        raise errors.internal_error("protocol_error_job: deliberate protocol error")

    async def confirm_delete(filename: str, ctx: Context) -> str:
        """Asks for confirmation, then 'deletes' the file."""
        schema = {
            "type": "object",
            "properties": {"confirm": {"type": "boolean"}},
            "required": ["confirm"],
        }
        answer = await ctx.elicit(f"Delete {filename}?", schema, key="confirm_delete")
        content = answer.get("content") or {}
        if answer.get("action") == "accept" and content.get("confirm"):
            return f"Deleted {filename}"
        return f"Kept {filename}"

    async def multi_input(ctx: Context) -> str:
        """Asks two questions at once."""
        form = {"mode": "form", "requestedSchema": NAME_SCHEMA}
        answers = await ctx.ask_many(
            {
                "first": ("elicitation/create", {**form, "message": "First name?"}),
                "second": ("elicitation/create", {**form, "message": "Second name?"}),
            }
        )
        names = [(a.get("content") or {}).get("name", "?") for a in answers.values()]
        return "Got " + " and ".join(str(n) for n in names)

    @tasks.escalates
    async def test_tool_with_task(ctx: Context) -> str:
        """Asks for a name in an input round, then becomes a task."""
        answer = await ctx.elicit("What is your name?", NAME_SCHEMA, key="user_name")
        await tasks.escalate(ctx)
        await anyio.sleep(0.2)
        return f"Hello, {(answer.get('content') or {}).get('name', 'unknown')}"

    server.add_tool(greet)
    server.add_tool(slow_compute, task_support="optional")
    server.add_tool(failing_job, task_support="required")
    server.add_tool(protocol_error_job, task_support="required")
    server.add_tool(confirm_delete, task_support="optional")
    server.add_tool(multi_input, task_support="optional")
    server.add_tool(test_tool_with_task, task_support="required")


def build_server() -> Server:
    server = Server(
        "mcpkit-conformance-server", "1.0.0", instructions="The mcpkit conformance fixture server."
    )
    add_content_tools(server)
    add_streaming_tools(server)
    add_client_feature_tools(server)
    add_mrtr_tools(server)
    add_mrtr_compound_tools(server)
    add_change_tools(server)
    add_resources_and_prompts(server)
    add_task_tools(server)
    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="mcpkit conformance fixture server")
    add_transport_arguments(parser, default_port=3001)
    serve(build_server(), parser.parse_args(argv))


if __name__ == "__main__":
    main()
