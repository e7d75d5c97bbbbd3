"""Content helpers: typed content blocks, icons and annotations for results.

    return [content.text("done"), content.image(png_bytes, "image/png")]

Each returns a struct of `mcpkit.protocol.types`; binary data is base64-encoded for you.
"""


import base64
from typing import Any, Literal

import msgspec

from mcpkit.protocol import types

_UNSET: Any = msgspec.UNSET


def _b64(data: bytes | str) -> str:
    return data if isinstance(data, str) else base64.b64encode(data).decode("ascii")


def annotations(
    *,
    audience: list[Literal["user", "assistant"]] | None = None,
    priority: float | None = None,
    last_modified: str | None = None,
) -> types.Annotations:
    """Hints for the client: who the content is for, how important, when it changed."""
    return types.Annotations(
        audience=_UNSET if audience is None else list(audience),
        priority=_UNSET if priority is None else priority,
        last_modified=_UNSET if last_modified is None else last_modified,
    )


def icon(
    src: str,
    *,
    mime_type: str | None = None,
    sizes: list[str] | None = None,
    theme: Literal["light", "dark"] | None = None,
) -> types.Icon:
    """An icon: an https: or data: URI, with optional type, sizes and theme."""
    return types.Icon(
        src=src,
        mime_type=_UNSET if mime_type is None else mime_type,
        sizes=_UNSET if sizes is None else sizes,
        theme=_UNSET if theme is None else theme,
    )


def text(value: str, *, annotations: types.Annotations | None = None) -> types.TextContent:
    return types.TextContent(text=value, annotations=_UNSET if annotations is None else annotations)


def image(
    data: bytes | str, mime_type: str, *, annotations: types.Annotations | None = None
) -> types.ImageContent:
    """An image; `data` is raw bytes or already base64-encoded text."""
    return types.ImageContent(
        data=_b64(data),
        mime_type=mime_type,
        annotations=_UNSET if annotations is None else annotations,
    )


def audio(
    data: bytes | str, mime_type: str, *, annotations: types.Annotations | None = None
) -> types.AudioContent:
    """Audio; `data` is raw bytes or already base64-encoded text."""
    return types.AudioContent(
        data=_b64(data),
        mime_type=mime_type,
        annotations=_UNSET if annotations is None else annotations,
    )


def embedded_resource(
    uri: str,
    value: str | bytes,
    *,
    mime_type: str | None = None,
    annotations: types.Annotations | None = None,
) -> types.EmbeddedResource:
    """A resource's contents inside a result: text for `str`, a base64 blob for `bytes`."""
    contents = types.ResourceContents(
        uri=uri,
        mime_type=_UNSET if mime_type is None else mime_type,
        text=value if isinstance(value, str) else _UNSET,
        blob=_b64(value) if isinstance(value, bytes) else _UNSET,
    )
    return types.EmbeddedResource(
        resource=contents, annotations=_UNSET if annotations is None else annotations
    )


def resource_link(
    uri: str,
    name: str,
    *,
    title: str | None = None,
    description: str | None = None,
    mime_type: str | None = None,
    size: int | None = None,
    icons: list[types.Icon] | None = None,
    annotations: types.Annotations | None = None,
) -> types.ResourceLink:
    """A link to a resource the client may read later."""
    return types.ResourceLink(
        uri=uri,
        name=name,
        title=_UNSET if title is None else title,
        description=_UNSET if description is None else description,
        mime_type=_UNSET if mime_type is None else mime_type,
        size=_UNSET if size is None else size,
        icons=_UNSET if icons is None else icons,
        annotations=_UNSET if annotations is None else annotations,
    )
