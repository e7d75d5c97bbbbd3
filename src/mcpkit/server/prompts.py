"""Prompts: definitions built from functions, and `prompts/get` results."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args, get_origin

import msgspec

from mcpkit.protocol import errors
from mcpkit.server import results
from mcpkit.server.signatures import context_param_of, type_hints


@dataclass(slots=True)
class PromptArgument:
    name: str
    description: str | None = None
    required: bool = True

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name, "required": self.required}
        if self.description:
            wire["description"] = self.description
        return wire


@dataclass(slots=True)
class PromptDef:
    name: str
    fn: Callable[..., Any]
    description: str | None = None
    title: str | None = None
    arguments: list[PromptArgument] = field(default_factory=list)
    icons: list[Any] | None = None
    meta: dict[str, Any] | None = None
    context_param: str | None = None
    scopes: frozenset[str] = frozenset()
    """OAuth scopes a caller needs to see and get it (resource_auth.py)."""

    def to_wire(self) -> dict[str, Any]:
        wire: dict[str, Any] = {"name": self.name}
        if self.title is not None:
            wire["title"] = self.title
        if self.description is not None:
            wire["description"] = self.description
        if self.arguments:
            wire["arguments"] = [a.to_wire() for a in self.arguments]
        if self.icons is not None:
            wire["icons"] = self.icons
        if self.meta is not None:
            wire["_meta"] = self.meta
        return wire

    def check_arguments(self, given: dict[str, Any]) -> dict[str, Any]:
        """The keyword arguments for the function; -32602 if a required one is missing."""
        missing = [a.name for a in self.arguments if a.required and a.name not in given]
        if missing:
            raise errors.invalid_params(
                f"missing required argument(s) for prompt {self.name}: {', '.join(missing)}"
            )
        bad = [k for k, v in given.items() if not isinstance(v, str)]
        if bad:
            raise errors.invalid_params(f"prompt arguments must be strings: {', '.join(bad)}")
        known = {a.name for a in self.arguments}
        return {k: v for k, v in given.items() if k in known}


def _argument_description(annotation: Any) -> str | None:
    if get_origin(annotation) is Annotated:
        for extra in get_args(annotation)[1:]:
            if isinstance(extra, str):
                return extra
            if isinstance(extra, msgspec.Meta) and extra.description:
                return extra.description
    return None


def build_prompt(
    fn: Callable[..., Any], *, name: str | None, context_type: type, **extra: Any
) -> PromptDef:
    ctx = context_param_of(fn, context_type)
    hints = type_hints(fn)
    arguments = [
        PromptArgument(
            name=p.name,
            description=_argument_description(hints.get(p.name)),
            required=p.default is inspect.Parameter.empty,
        )
        for p in inspect.signature(fn).parameters.values()
        if p.name != ctx
    ]
    extra.setdefault("description", inspect.getdoc(fn))
    return PromptDef(
        name=name or fn.__name__, fn=fn, arguments=arguments, context_param=ctx, **extra
    )


def prompt_result(value: Any, description: str | None) -> dict[str, Any]:
    """The `GetPromptResult` for what a prompt function returned."""
    if isinstance(value, dict) and "messages" in value:
        return value
    if isinstance(value, msgspec.Struct) and type(value).__name__ == "GetPromptResult":
        return dict(msgspec.to_builtins(value))
    items = value if isinstance(value, list | tuple) else [value]
    messages = [_message(item) for item in items]
    result: dict[str, Any] = {"messages": messages}
    if description:
        result["description"] = description
    return result


def _message(item: Any) -> Any:
    if isinstance(item, str):
        return {"role": "user", "content": results.text_block(item)}
    if results.is_content_block(item):
        return {"role": "user", "content": item}
    return item  # a PromptMessage (dict or struct) as it is
