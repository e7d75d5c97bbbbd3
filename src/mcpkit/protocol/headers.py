"""Request metadata headers of modern Streamable HTTP (2026-07-28), as pure functions.

`Mcp-Method` mirrors `method`; `Mcp-Name` mirrors `params.name` (tools/call, prompts/get),
`params.uri` (resources/read) or `params.taskId` (tasks/*); `Mcp-Param-{Name}` mirrors tool
arguments annotated with `x-mcp-header`. Values that are not plain header-safe ASCII travel
as `=?base64?…?=`. A header that is missing, malformed or different from the body is
-32020 (HTTP 400).
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Mapping
from typing import Any

from mcpkit.errors import InvalidArgument
from mcpkit.protocol import errors

_SENTINEL = re.compile(r"^=\?base64\?(.*)\?=$", re.DOTALL)
# Visible ASCII, space and tab (RFC 9110 field values).
_SAFE_VALUE = re.compile(r"^[\x20-\x7e\t]*$")
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
MAX_SAFE_INTEGER = 2**53 - 1

NAME_SOURCES: dict[str, str] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
"""Which params member `Mcp-Name` mirrors, for the methods that need it."""


def decode_header_value(value: str) -> str:
    """Decode a `=?base64?…?=` value (strictly: canonical padding and alphabet)."""
    match = _SENTINEL.match(value)
    if not match:
        return value
    encoded = match.group(1)
    try:
        raw = base64.b64decode(encoded.encode("ascii"), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError, UnicodeError):
        raise errors.header_mismatch(f"invalid base64 header value {value!r}") from None
    if base64.b64encode(raw).decode("ascii") != encoded:
        raise errors.header_mismatch(f"non-canonical base64 header value {value!r}")
    return text


def encode_header_value(value: str) -> str:
    """Encode a value for a header: as-is when safe, else the base64 sentinel form."""
    safe = (
        _SAFE_VALUE.match(value)
        and value == value.strip(" \t")
        and "\t" not in value
        and not _SENTINEL.match(value)
    )
    if safe:
        return value
    return "=?base64?" + base64.b64encode(value.encode("utf-8")).decode("ascii") + "?="


def check_standard_headers(
    headers: Mapping[str, str], method: str, params: Mapping[str, Any] | None
) -> None:
    """Check `Mcp-Method` and, where required, `Mcp-Name` against the body.

    `headers` must be keyed by lower-case names.
    """
    header_method = headers.get("mcp-method")
    if header_method is None:
        raise errors.header_mismatch("missing Mcp-Method header")
    if header_method.strip() != method:
        raise errors.header_mismatch(
            f"Mcp-Method header {header_method!r} does not match body method {method!r}"
        )
    source = NAME_SOURCES.get(method)
    if source is None:
        return
    body_value = (params or {}).get(source)
    header_name = headers.get("mcp-name")
    if header_name is None:
        raise errors.header_mismatch(f"missing Mcp-Name header for {method}")
    decoded = decode_header_value(header_name.strip())
    if decoded != body_value:
        raise errors.header_mismatch(
            f"Mcp-Name header {decoded!r} does not match body value {body_value!r}"
        )


def header_params(input_schema: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The `x-mcp-header` annotations of a tool schema: header name → property path.

    Only statically reachable properties (a chain of `properties` keys) of type string,
    integer or boolean may be annotated; raises `InvalidArgument` (a ValueError)
    naming the first violation.
    """
    found: dict[str, tuple[str, ...]] = {}
    _collect_header_params(input_schema, (), found)
    return found


def _collect_header_params(
    schema: Mapping[str, Any], path: tuple[str, ...], found: dict[str, tuple[str, ...]]
) -> None:
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return
    for key, sub in props.items():
        if not isinstance(sub, Mapping):
            continue
        name = sub.get("x-mcp-header")
        if name is not None:
            _check_annotation(name, sub, found)
            found[name] = (*path, key)
        _collect_header_params(sub, (*path, key), found)


def _check_annotation(name: Any, prop: Mapping[str, Any], found: Mapping[str, Any]) -> None:
    if not isinstance(name, str) or not _TOKEN.match(name):
        raise InvalidArgument(f"x-mcp-header {name!r} is not a valid header name token")
    if name.lower() in (n.lower() for n in found):
        raise InvalidArgument(f"x-mcp-header {name!r} is used twice (case-insensitively)")
    if prop.get("type") not in ("string", "integer", "boolean"):
        raise InvalidArgument(
            f"x-mcp-header {name!r} must annotate a string, integer or boolean")


def check_param_headers(
    headers: Mapping[str, str],
    annotations: Mapping[str, tuple[str, ...]],
    arguments: Mapping[str, Any] | None,
) -> None:
    """Check every annotated argument against its `Mcp-Param-{Name}` header."""
    for name, path in annotations.items():
        value = value_at(arguments or {}, path)
        header = headers.get("mcp-param-" + name.lower())
        if value is None:
            continue  # absent or null: the header must not be expected
        if header is None:
            raise errors.header_mismatch(f"missing Mcp-Param-{name} header")
        if not _SAFE_VALUE.match(header):
            raise errors.header_mismatch(f"Mcp-Param-{name} header has invalid characters")
        decoded = decode_header_value(header.strip(" \t"))
        if not _same_value(decoded, value):
            raise errors.header_mismatch(f"Mcp-Param-{name} header does not match the body")


def value_at(arguments: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The argument an `x-mcp-header` path points at (None when absent)."""
    node: Any = arguments
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def _same_value(header: str, body: Any) -> bool:
    if isinstance(body, bool):
        return header == ("true" if body else "false")
    if isinstance(body, int | float):
        try:
            number = float(header)
        except ValueError:
            return False
        return math.isfinite(number) and number == float(body)
    return isinstance(body, str) and header == body
