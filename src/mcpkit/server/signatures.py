"""JSON Schemas and argument validators from Python signatures.

A handler's parameters (minus its `Context` parameter) become a msgspec struct, built once
at registration. Its JSON Schema (2020-12) is the tool's `inputSchema`, and converting the
call's arguments into it is the validation: fast, precise messages, and the values arrive
as the annotated types (nested structs, dataclasses, enums, Literals…).

`Annotated[T, "text"]` (or `msgspec.Meta(description=…)`) documents a parameter.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin, get_type_hints

import msgspec

from mcpkit.errors import InvalidArgumentType


@dataclass(slots=True)
class Signature:
    """What a handler takes: its argument struct, schema, and where the context goes."""

    struct: type[msgspec.Struct]
    schema: dict[str, Any]
    param_names: tuple[str, ...]
    context_param: str | None

    def convert(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Validate and convert call arguments; raises `msgspec.ValidationError`."""
        value = msgspec.convert(arguments, self.struct, strict=False)
        return {name: getattr(value, name) for name in self.param_names}


def _is_context(annotation: Any, context_type: type | None) -> bool:
    if context_type is None:
        return False
    return inspect.isclass(annotation) and issubclass(annotation, context_type)


def _with_description(annotation: Any) -> Any:
    """Turn `Annotated[T, "text"]` into `Annotated[T, msgspec.Meta(description="text")]`."""
    if get_origin(annotation) is not Annotated:
        return annotation
    base, *extras = get_args(annotation)
    metas = [msgspec.Meta(description=x) if isinstance(x, str) else x for x in extras]
    kept = [m for m in metas if isinstance(m, msgspec.Meta)]
    return Annotated[(base, *kept)] if kept else base


def type_hints(fn: Callable[..., Any]) -> dict[str, Any]:
    """`fn`'s resolved annotations; one that names what does not exist where `fn` was
    defined (a typo, an import under TYPE_CHECKING) is the caller's InvalidArgumentType,
    with Python's NameError as its cause."""
    try:
        return get_type_hints(fn, include_extras=True)
    except NameError as exc:
        name = getattr(fn, "__qualname__", repr(fn))
        raise InvalidArgumentType(f"{name}: an annotation cannot be resolved: {exc}") from exc


def context_param_of(fn: Callable[..., Any], context_type: type | None) -> str | None:
    """The name of `fn`'s context parameter, if it has one."""
    hints = type_hints(fn)
    for param in inspect.signature(fn).parameters.values():
        if _is_context(hints.get(param.name), context_type):
            return param.name
    return None


def signature_of(
    fn: Callable[..., Any], name: str, *, context_type: type | None = None
) -> Signature:
    """Build the argument struct and schema of `fn`'s parameters."""
    sig = inspect.signature(fn)
    hints = type_hints(fn)
    fields: list[tuple[str, Any] | tuple[str, Any, Any]] = []
    names: list[str] = []
    context_param = None
    for param in sig.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise InvalidArgumentType(
                f"{name}: *args/**kwargs parameters cannot be described as a schema")
        annotation = hints.get(param.name, Any)
        if _is_context(annotation, context_type):
            context_param = param.name
            continue
        annotation = _with_description(annotation)
        if param.default is inspect.Parameter.empty:
            fields.append((param.name, annotation))
        else:
            fields.append((param.name, annotation, param.default))
        names.append(param.name)
    struct = msgspec.defstruct(
        _struct_name(name), fields, kw_only=True, forbid_unknown_fields=False
    )
    try:
        schema = object_schema(struct)
    except TypeError as exc:  # msgspec: a parameter's type it cannot describe
        raise InvalidArgumentType(f"{name}: {exc}") from exc
    return Signature(struct, schema, tuple(names), context_param)


def _struct_name(name: str) -> str:
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in name).strip("_") or "Tool"
    return cleaned[:1].upper() + cleaned[1:] + "Arguments"


def object_schema(tp: Any) -> dict[str, Any]:
    """The JSON Schema of a type, with the top level inlined and other types in `$defs`."""
    (top,), components = msgspec.json.schema_components([tp], ref_template="#/$defs/{name}")
    ref = top.get("$ref", "")
    if ref.startswith("#/$defs/"):
        top = dict(components.pop(ref.removeprefix("#/$defs/")))
    top.pop("title", None)
    if components:
        top["$defs"] = components
    return top


def return_type_of(fn: Callable[..., Any]) -> Any:
    """The declared return annotation of `fn` (unwrapping Awaitable/coroutines), or None."""
    hints = type_hints(fn)
    ret = hints.get("return", inspect.Signature.empty)
    if ret is inspect.Signature.empty:
        return None
    origin = get_origin(ret)
    if origin in (typing.Awaitable, typing.Coroutine):
        return get_args(ret)[-1]
    return ret
