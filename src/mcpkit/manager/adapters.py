"""The manager's tools in the formats of the OpenAI and Anthropic APIs, and their calls back.

    tools = to_openai_tools(manager.tools())                 # → the request's `tools`
    ...                                                      # the model answers with calls
    messages += await run_openai_tool_calls(manager, message["tool_calls"])

Formats (as the APIs document them):

- OpenAI Chat Completions: tools `{"type": "function", "function": {name, description,
  parameters}}`; calls in `message.tool_calls` as `{"id", "type": "function", "function":
  {"name", "arguments": "<JSON text>"}}`; results as `{"role": "tool", "tool_call_id",
  "content"}` messages.
- OpenAI Responses: tools `{"type": "function", name, description, parameters, strict}`;
  calls as `{"type": "function_call", "call_id", "name", "arguments"}` output items;
  results as `{"type": "function_call_output", "call_id", "output"}` input items.
- Anthropic Messages: tools `{name, description, input_schema}`; calls as `{"type":
  "tool_use", "id", "name", "input": {...}}` content blocks; results as `{"type":
  "tool_result", "tool_use_id", "content": [...], "is_error"}` blocks of a user message.

Everything here is pure except `run_openai_tool_calls` and `run_anthropic_tool_uses`, which
call a `ToolCaller` (the manager, or anything with its `call_tool`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import anyio
import msgspec

from mcpkit.errors import PeerError
from mcpkit.protocol import types

from .catalog import ManagedTool

OpenAIApi = Literal["chat", "responses"]
ANTHROPIC_IMAGE_TYPES = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The image media types the Anthropic API accepts; other images become a text placeholder."""
NO_OUTPUT = "(no output)"
"""The text of a result with no content: some APIs refuse an empty tool result."""


class AdapterError(PeerError, ValueError):
    """A tool call from a model that cannot be turned into an MCP call."""


class ToolCaller(Protocol):
    """What calls a tool by its exposed name (the manager does)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None
    ) -> types.CallToolResult: ...


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One call a model asked for: the API's call id, the exposed tool name, the arguments."""

    id: str
    name: str
    arguments: dict[str, Any]


# --- the catalog for the APIs ------------------------------------------------------------


def _parameters(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The input schema as the APIs want it: an object schema with a `properties` object.

    A copy: the tool's own schema is never changed.
    """
    parameters = dict(schema)
    parameters["type"] = "object"
    if not isinstance(parameters.get("properties"), Mapping):
        parameters["properties"] = {}
    return parameters


def to_openai_tools(
    tools: Iterable[ManagedTool], *, api: OpenAIApi = "chat"
) -> list[dict[str, Any]]:
    """The tools in OpenAI's function-tool format, for Chat Completions or Responses.

    Responses tools carry `"strict": false`: that API's `strict` defaults to true, which
    demands `additionalProperties: false` and every property required, and MCP schemas
    rarely are like that. (Chat Completions' `strict` already defaults to false.)
    """
    converted: list[dict[str, Any]] = []
    for tool in tools:
        function = {
            "name": tool.name,
            "description": tool.description,
            "parameters": _parameters(tool.input_schema),
        }
        if api == "chat":
            converted.append({"type": "function", "function": function})
        else:
            converted.append({"type": "function", **function, "strict": False})
    return converted


def to_anthropic_tools(tools: Iterable[ManagedTool]) -> list[dict[str, Any]]:
    """The tools in the Anthropic Messages API's format."""
    return [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": _parameters(tool.input_schema),
        }
        for tool in tools
    ]


# --- the model's calls -------------------------------------------------------------------


def _string(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise AdapterError(f"tool call without a {what} (got {value!r})")
    return value


def _arguments(raw: object, call: str) -> dict[str, Any]:
    """The arguments of a call as a dict: from JSON text (OpenAI) or an object (Anthropic)."""
    if raw is None or raw == "":
        return {}  # a call of a tool without parameters may come with no arguments at all
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise AdapterError(f"the arguments of {call} are not valid JSON: {exc}") from None
    if not isinstance(raw, Mapping):
        raise AdapterError(
            f"the arguments of {call} must be a JSON object, not {type(raw).__name__}"
        )
    return dict(raw)


def parse_openai_tool_call(call: Mapping[str, Any]) -> ToolCall:
    """A Chat Completions `tool_calls` entry or a Responses `function_call` item, parsed."""
    if call.get("type") == "function_call":
        call_id = _string(call.get("call_id"), "call_id")
        name = _string(call.get("name"), "name")
        raw = call.get("arguments")
    elif isinstance(call.get("function"), Mapping):
        call_id = _string(call.get("id"), "id")
        function = call["function"]
        name = _string(function.get("name"), "function name")
        raw = function.get("arguments")
    else:
        raise AdapterError(
            f"not an OpenAI function call (type {call.get('type')!r}): expected a tool_calls "
            "entry with a `function` or a `function_call` item"
        )
    return ToolCall(call_id, name, _arguments(raw, f"tool call {call_id} ({name})"))


def parse_anthropic_tool_use(block: Mapping[str, Any]) -> ToolCall:
    """An Anthropic `tool_use` content block, parsed."""
    if block.get("type") != "tool_use":
        raise AdapterError(f"not a tool_use block (type {block.get('type')!r})")
    call_id = _string(block.get("id"), "id")
    name = _string(block.get("name"), "name")
    return ToolCall(call_id, name, _arguments(block.get("input"), f"tool use {call_id} ({name})"))


# --- results for the model ---------------------------------------------------------------


def _placeholder(block: types.ContentBlock) -> str:
    """A short text standing for content the model is not shown as such."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        kind = "image" if isinstance(block, types.ImageContent) else "audio"
        return f"[{kind}: {block.mime_type}, {len(block.data):,} bytes base64]"
    if isinstance(block, types.ResourceLink):
        return f"[resource: {block.uri}]"
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        mime = resource.mime_type if isinstance(resource.mime_type, str) else "unknown type"
        size = len(resource.blob) if isinstance(resource.blob, str) else 0
        return f"[resource: {resource.uri}, {mime}, {size:,} bytes base64]"
    return f"[{type(block).__name__}]"


def _block_text(block: types.ContentBlock) -> str | None:
    """The text a block carries (text blocks, embedded text resources); None for others."""
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.EmbeddedResource) and isinstance(block.resource.text, str):
        return block.resource.text
    return None


def _structured_json(result: types.CallToolResult) -> str | None:
    """The structured content as JSON text, when the result has it and no text of its own."""
    structured = result.structured_content
    if structured is msgspec.UNSET or any(_block_text(b) for b in result.content):
        return None
    return msgspec.json.encode(structured).decode("utf-8")


def result_text(result: types.CallToolResult) -> str:
    """A tool result as one text: its texts, placeholders for the rest, `Error: ` if it failed.

    Images, audio and blobs become `[image: image/png, 1,234 bytes base64]`-like notes and
    resource links `[resource: uri]`; structured content is added as JSON when the result
    has no text. An error result starts with `Error: ` unless its text already says so.
    """
    parts = [
        text if (text := _block_text(block)) is not None else _placeholder(block)
        for block in result.content
    ]
    if (structured := _structured_json(result)) is not None:
        parts.append(structured)
    text = "\n".join(parts) or NO_OUTPUT
    if result.is_error is True and not text.lower().startswith("error"):
        text = f"Error: {text}"
    return text


def openai_tool_message(
    call: ToolCall, result: types.CallToolResult, *, api: OpenAIApi = "chat"
) -> dict[str, Any]:
    """The result of `call` as a Chat Completions tool message or a Responses input item."""
    text = result_text(result)
    if api == "chat":
        return {"role": "tool", "tool_call_id": call.id, "content": text}
    return {"type": "function_call_output", "call_id": call.id, "output": text}


def _anthropic_block(block: types.ContentBlock) -> dict[str, Any] | None:
    if isinstance(block, types.ImageContent) and block.mime_type in ANTHROPIC_IMAGE_TYPES:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": block.mime_type, "data": block.data},
        }
    text = _block_text(block)
    if text is None:
        text = _placeholder(block)
    # The API refuses empty text blocks.
    return {"type": "text", "text": text} if text else None


def anthropic_tool_result(call: ToolCall, result: types.CallToolResult) -> dict[str, Any]:
    """The result of `call` as an Anthropic `tool_result` block (text and image blocks)."""
    blocks = [b for block in result.content if (b := _anthropic_block(block)) is not None]
    if (structured := _structured_json(result)) is not None:
        blocks.append({"type": "text", "text": structured})
    if not blocks:
        blocks.append({"type": "text", "text": NO_OUTPUT})
    return {
        "type": "tool_result",
        "tool_use_id": call.id,
        "content": blocks,
        "is_error": result.is_error is True,
    }


# --- running the calls -------------------------------------------------------------------


def _error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _lenient_call(raw: Mapping[str, Any], key: str) -> ToolCall:
    """What can be read of a call that did not parse, so its error can still answer it."""
    function = raw.get("function")
    name = raw.get("name") or (function.get("name") if isinstance(function, Mapping) else "")
    call_id = raw.get(key)
    return ToolCall(call_id if isinstance(call_id, str) else "", str(name or ""), {})


async def _run(
    caller: ToolCaller,
    raws: list[Mapping[str, Any]],
    parse: Callable[[Mapping[str, Any]], ToolCall],
    id_key: Callable[[Mapping[str, Any]], str],
    answer: Callable[[ToolCall, types.CallToolResult], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Parse and call every raw call concurrently; the answers in the order of the calls."""
    answers: list[dict[str, Any]] = [{} for _ in raws]

    async def one(index: int, raw: Mapping[str, Any]) -> None:
        try:
            call = parse(raw)
        except AdapterError as exc:
            answers[index] = answer(_lenient_call(raw, id_key(raw)), _error_result(str(exc)))
            return
        answers[index] = answer(call, await _call(caller, call))

    async with anyio.create_task_group() as group:
        for index, raw in enumerate(raws):
            group.start_soon(one, index, raw)
    return answers


async def _call(caller: ToolCaller, call: ToolCall) -> types.CallToolResult:
    try:
        return await caller.call_tool(call.name, call.arguments)
    except Exception as exc:  # one failing call must not lose the others' results
        reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return _error_result(f"Error: calling tool {call.name} failed: {reason}")


def _openai_id_key(raw: Mapping[str, Any]) -> str:
    return "call_id" if raw.get("type") == "function_call" else "id"


async def run_openai_tool_calls(
    caller: ToolCaller, calls: Iterable[Mapping[str, Any]], *, api: OpenAIApi = "chat"
) -> list[dict[str, Any]]:
    """Run a model's OpenAI tool calls; one result message/item per call, in their order.

    `calls` is a Chat Completions message's `tool_calls`, or a Responses `output` (items
    other than `function_call`, such as messages and reasoning, are skipped). The calls run
    concurrently; a call that does not parse or whose tool raises gets an error result.
    """
    raws = [raw for raw in calls if api == "chat" or raw.get("type") == "function_call"]

    def answer(call: ToolCall, result: types.CallToolResult) -> dict[str, Any]:
        return openai_tool_message(call, result, api=api)

    return await _run(caller, raws, parse_openai_tool_call, _openai_id_key, answer)


async def run_anthropic_tool_uses(
    caller: ToolCaller, blocks: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Run the `tool_use` blocks of an Anthropic response's content; `tool_result` blocks back.

    Other blocks (text, thinking) are skipped. The calls run concurrently; the results keep
    their order (the content of the next user message).
    """
    raws = [block for block in blocks if block.get("type") == "tool_use"]
    return await _run(
        caller, raws, parse_anthropic_tool_use, lambda _raw: "id", anthropic_tool_result
    )

