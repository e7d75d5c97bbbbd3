"""A tool's result as the console shows it: each content block as text, an image or JSON,
then the structured content, then the whole result as JSON. The result is what a foreign
server said, so every part is bounded and nothing in it becomes markup (the templates
escape all text; an image is shown only as a data: URL of a raster type whose payload is
valid base64).

    view = result_view(result)      # ResultView(blocks, is_error, raw)
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mcpkit.sizes import decoded_size, for_people

MAX_TEXT_CHARS = 100_000
"""Text shown per block (the rest is cut, and the page says so)."""
MAX_JSON_CHARS = 100_000
"""JSON shown per block and for the whole result."""
MAX_BLOCKS = 100
"""Content blocks shown; the rest are counted."""
MAX_IMAGE_BYTES = 4 * 1024 * 1024
"""An image larger than this (decoded) is described, not shown."""
IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp", "image/avif"})
"""Shown inline; other types (SVG among them: it may carry script and links) are described."""


@dataclass(frozen=True, slots=True)
class Block:
    kind: Literal["text", "image", "json", "note"]
    text: str = ""
    """text and note: the text; json: the pretty-printed JSON; image: its alternative text."""
    src: str = ""
    """image: the data: URL."""
    label: str = ""
    """What the block is ("Text", "Image (image/png, 2.1 KB)", "Structured content")."""
    cut: bool = False
    """The text or JSON was longer than its bound and is cut."""


@dataclass(frozen=True, slots=True)
class ResultView:
    blocks: list[Block] = field(default_factory=list)
    is_error: bool = False
    raw: Block = field(default_factory=lambda: Block("json"))
    left_out: int = 0
    """Content blocks beyond MAX_BLOCKS."""


def result_view(result: dict[str, Any]) -> ResultView:
    content = result.get("content")
    items = content if isinstance(content, list) else []
    blocks = [_block(item) for item in items[:MAX_BLOCKS]]
    structured = result.get("structuredContent")
    if structured is not None:
        blocks.append(_json_block(structured, "Structured content"))
    return ResultView(blocks, result.get("isError") is True, _json_block(result, "The result"),
                      max(0, len(items) - MAX_BLOCKS))


def _block(item: Any) -> Block:
    if not isinstance(item, dict):
        return _json_block(item, "Content")
    kind = item.get("type")
    if kind == "text" and isinstance(item.get("text"), str):
        text, cut = _cut(item["text"], MAX_TEXT_CHARS)
        return Block("text", text, label="Text", cut=cut)
    if kind == "image":
        return _image(item)
    if kind == "audio":
        return Block("note", f"Audio ({_media_type(item)}, {_size(item.get('data'))}): "
                             "not played here; its data is in the result below.", label="Audio")
    if kind == "resource_link":
        return Block("note", f"A link to the resource {_short(item.get('uri'))} "
                             f"({_short(item.get('name'))}).", label="Resource link")
    if kind == "resource" and isinstance(item.get("resource"), dict):
        resource = item["resource"]
        if isinstance(resource.get("text"), str):
            text, cut = _cut(resource["text"], MAX_TEXT_CHARS)
            return Block("text", text, label=f"Resource {_short(resource.get('uri'))}", cut=cut)
        return Block("note", f"The resource {_short(resource.get('uri'))} "
                             f"({_size(resource.get('blob'))} of data).", label="Resource")
    return _json_block(item, "Content")


def _image(item: dict[str, Any]) -> Block:
    media_type, data = _media_type(item), item.get("data")
    label = f"Image ({media_type}, {_size(data)})"
    if media_type not in IMAGE_TYPES or not isinstance(data, str) or \
            len(data) > MAX_IMAGE_BYTES * 4 // 3 + 4:
        return Block("note", f"{label}: not shown here (type or size).", label=label)
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return Block("note", f"{label}: its data is not valid base64.", label=label)
    return Block("image", f"the tool's image ({media_type})", f"data:{media_type};base64,{data}",
                 label)


def _json_block(value: Any, label: str) -> Block:
    try:
        text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    except (ValueError, TypeError, RecursionError):
        text = repr(value)
    text, cut = _cut(text, MAX_JSON_CHARS)
    return Block("json", text, label=label, cut=cut)


def _cut(text: str, limit: int) -> tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _media_type(item: dict[str, Any]) -> str:
    value = item.get("mimeType")
    return value[:100] if isinstance(value, str) else "unknown type"


def _short(value: Any) -> str:
    return value[:300] if isinstance(value, str) else "?"


def _size(data: Any) -> str:
    """A base64 payload's decoded size, for people."""
    return for_people(decoded_size(data)) if isinstance(data, str) else "no data"
