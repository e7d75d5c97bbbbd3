"""Tools: definitions built from functions (or given by hand), and call results."""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from mcpkit.protocol import headers
from mcpkit.server import results
from mcpkit.server.signatures import (
    Signature,
    context_param_of,
    object_schema,
    return_type_of,
    signature_of,
)
from mcpkit.validation import SchemaValidator, check_schema


@dataclass(slots=True)
class ToolDef:
    """A registered tool. `to_wire()` is its `tools/list` entry."""

    name: str
    fn: Callable[..., Any]
    description: str | None = None
    title: str | None = None
    input_schema: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    icons: list[Any] | None = None
    meta: dict[str, Any] | None = None
    required_capabilities: dict[str, Any] | None = None
    task_support: str | None = None  # "forbidden" | "optional" | "required" (tasks extension)
    signature: Signature | None = None  # None for hand-written input schemas
    context_param: str | None = None
    input_validator: SchemaValidator | None = None
    output_validator: SchemaValidator | None = None
    wrap_result: bool = False  # structured output of a non-object return type: {"result": …}
    header_params: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scopes: frozenset[str] = frozenset()
    """OAuth scopes a caller needs to see and call it (resource_auth.py)."""

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "inputSchema": self.input_schema}
        for key, value in (
            ("title", self.title),
            ("description", self.description),
            ("outputSchema", self.output_schema),
            ("annotations", self.annotations),
            ("icons", self.icons),
            ("_meta", self.meta),
        ):
            if value is not None:
                wire[key] = value
        if self.task_support is not None:
            wire["execution"] = {"taskSupport": self.task_support}
        return wire

    def validate_arguments(self, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
        """(keyword arguments for the function, errors); errors non-empty means invalid."""
        if self.signature is not None:
            try:
                return self.signature.convert(arguments), []
            except msgspec.ValidationError as exc:
                return {}, [str(exc)]
        problems = self.input_validator.errors(arguments) if self.input_validator else []
        return dict(arguments), problems

    def make_result(self, value: Any) -> dict[str, Any]:
        """The `CallToolResult` for what the function returned."""
        if isinstance(value, msgspec.Struct) and type(value).__name__ == "CallToolResult":
            return dict(msgspec.to_builtins(value))
        if isinstance(value, ToolResult):
            return value.to_wire()
        if self.output_schema is not None:
            return self._structured(value)
        blocks = results.content_list(value)
        if blocks is not None:
            return {"content": blocks}
        return {"content": [results.text_block(results.json_text(results.to_plain(value)))]}

    def _structured(self, value: Any) -> dict[str, Any]:
        plain = results.to_plain(value)
        structured = {"result": plain} if self.wrap_result else plain
        return {
            "content": [results.text_block(results.json_text(structured))],
            "structuredContent": structured,
        }

    def output_errors(self, result: dict[str, Any]) -> list[str]:
        if self.output_validator is None or result.get("isError"):
            return []
        if "structuredContent" not in result:
            return ["the tool declares an outputSchema but returned no structuredContent"]
        return self.output_validator.errors(result["structuredContent"])


@dataclass(slots=True)
class ToolResult:
    """An explicit tool result: content, structured content, error flag and `_meta`."""

    content: list[Any] = field(default_factory=list)
    structured_content: Any = None
    is_error: bool = False
    meta: dict[str, Any] | None = None

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"content": self.content}
        if self.structured_content is not None:
            wire["structuredContent"] = results.to_plain(self.structured_content)
        if self.is_error:
            wire["isError"] = True
        if self.meta is not None:
            wire["_meta"] = self.meta
        return wire


def error_result(message: str) -> dict[str, Any]:
    return {"content": [results.text_block(message)], "isError": True}


def _is_structured_type(tp: Any) -> bool:
    """Whether a return annotation describes structured output (not text or content).

    Structs, dataclasses, TypedDicts, NamedTuples, numbers and booleans are; so are lists,
    tuples and string-keyed dicts of them. Plain `dict`/`list`/`Any` and content blocks are
    not: their shape says nothing a schema could check.
    """
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in typing.get_args(tp) if a is not type(None)]
        return bool(members) and all(_is_structured_type(a) for a in members)
    if origin is typing.Annotated:
        return _is_structured_type(typing.get_args(tp)[0])
    if origin in (list, tuple, set, frozenset, dict):
        args = [a for a in typing.get_args(tp) if a is not Ellipsis]
        if origin is dict:
            args = args[1:]
        return bool(args) and all(_is_structured_type(a) for a in args)
    if tp in (int, float, bool):
        return True
    if not inspect.isclass(tp) or tp is ToolResult:  # an explicit result, not a shape
        return False
    if issubclass(tp, msgspec.Struct):
        return getattr(tp.__struct_config__, "tag", None) not in results.CONTENT_TYPES
    return (
        dataclasses.is_dataclass(tp)
        or typing.is_typeddict(tp)
        or (issubclass(tp, tuple) and hasattr(tp, "_fields"))
    )


def _output_schema_for(fn: Callable[..., Any]) -> tuple[dict[str, Any] | None, bool]:
    ret = return_type_of(fn)
    if ret is None or not _is_structured_type(ret):
        return None, False
    try:
        schema = object_schema(ret)
    except (TypeError, ValueError):
        return None, False  # content blocks, unions of them, arbitrary classes: unstructured
    if schema.get("type") == "object":
        return schema, False
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
    }
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


def build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None,
    context_type: type,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    output_schema: dict[str, Any] | None = None,
    **extra: Any,
) -> ToolDef:
    """A `ToolDef` for `fn`: schemas from type hints unless given by hand (kept verbatim)."""
    tool_name = name or fn.__name__
    if input_schema is not None:
        check_schema(input_schema)
        sig = None
        context_param = context_param_of(fn, context_type)
    else:
        sig = signature_of(fn, tool_name, context_type=context_type)
        context_param = sig.context_param
    wrap = False
    if output_schema is None:
        output_schema, wrap = _output_schema_for(fn)
    else:
        check_schema(output_schema)
    tool = ToolDef(
        name=tool_name,
        fn=fn,
        description=description if description is not None else inspect.getdoc(fn),
        input_schema=sig.schema if sig is not None else input_schema or {},
        output_schema=output_schema,
        signature=sig,
        context_param=context_param,
        input_validator=SchemaValidator(input_schema) if input_schema is not None else None,
        output_validator=SchemaValidator(output_schema) if output_schema is not None else None,
        wrap_result=wrap,
        **extra,
    )
    tool.header_params = headers.header_params(tool.input_schema)
    return tool
