"""Turning what a handler returns into MCP results.

Handlers may return plain Python values; these functions give them their wire shape:
text for strings, content blocks as they are, structured content for structured values.
Content blocks may be msgspec structs (from `mcpkit.protocol.types`) or dicts.
"""

from __future__ import annotations

import base64
from typing import Any

import msgspec

from mcpkit.protocol.jsonrpc import encode

CONTENT_TYPES = frozenset({"text", "image", "audio", "resource", "resource_link"})


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def to_plain(value: Any) -> Any:
    """A JSON-compatible builtin form of `value` (structs, dataclasses, enums…)."""
    return msgspec.to_builtins(value)


def is_content_block(value: Any) -> bool:
    if isinstance(value, dict):
        return value.get("type") in CONTENT_TYPES
    if isinstance(value, msgspec.Struct):
        tag = getattr(type(value), "__struct_config__", None)
        return tag is not None and tag.tag in CONTENT_TYPES
    return False


def content_list(value: Any) -> list[Any] | None:
    """`value` as a list of content blocks, or None if it is not content."""
    if value is None:
        return []
    if isinstance(value, str):
        return [text_block(value)]
    if is_content_block(value):
        return [value]
    if isinstance(value, list | tuple) and value and all(is_content_block(v) for v in value):
        return list(value)
    return None


def json_text(value: Any) -> str:
    return encode(value).decode()


def resource_contents(uri: str, value: Any, mime_type: str | None) -> list[Any]:
    """The `contents` of a `resources/read` result from what a reader returned."""
    if isinstance(value, str):
        item: dict[str, Any] = {"uri": uri, "text": value}
    elif isinstance(value, bytes | bytearray | memoryview):
        item = {"uri": uri, "blob": base64.b64encode(bytes(value)).decode("ascii")}
    elif isinstance(value, list | tuple):
        return list(value)
    elif isinstance(value, dict | msgspec.Struct):
        return [value]
    else:
        item = {"uri": uri, "text": json_text(to_plain(value))}
        mime_type = mime_type or "application/json"
    if mime_type:
        item["mimeType"] = mime_type
    return [item]
