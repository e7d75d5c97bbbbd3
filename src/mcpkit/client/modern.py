"""What a modern (2026-07-28) request carries besides its params: `_meta` and, on
Streamable HTTP, the `Mcp-Method`/`Mcp-Name`/`Mcp-Param-*` headers that mirror the body."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcpkit.protocol import meta as meta_keys
from mcpkit.protocol.headers import NAME_SOURCES, encode_header_value, value_at

INPUT_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
"""The requests a server may answer with `input_required` (spec: MRTR)."""


def modern_meta(
    base: dict[str, Any],
    version: str,
    capabilities: dict[str, Any],
    client_info: Mapping[str, Any],
    log_level: str | None,
) -> dict[str, Any]:
    """The request's `_meta` (a new dict): the caller's keys plus version, capabilities,
    identity. `capabilities` and `client_info` are shared, not copied: they are only
    encoded."""
    meta = dict(base)
    meta[meta_keys.PROTOCOL_VERSION] = version
    meta[meta_keys.CLIENT_CAPABILITIES] = capabilities
    meta[meta_keys.CLIENT_INFO] = client_info
    if log_level is not None:
        meta[meta_keys.LOG_LEVEL] = log_level
    return meta


def modern_headers(
    method: str,
    params: Mapping[str, Any],
    annotations: Mapping[str, tuple[str, ...]] | None = None,
) -> dict[str, str]:
    """`Mcp-Method`, `Mcp-Name` where the method has one, and `Mcp-Param-{Name}` for each
    argument a tool annotates with `x-mcp-header` (absent and null values are skipped)."""
    out = {"Mcp-Method": method}
    source = NAME_SOURCES.get(method)
    if source is not None and isinstance(params.get(source), str):
        out["Mcp-Name"] = encode_header_value(params[source])
    if annotations:
        arguments = params.get("arguments")
        if isinstance(arguments, Mapping):
            out.update(param_headers(annotations, arguments))
    return out


def param_headers(
    annotations: Mapping[str, tuple[str, ...]], arguments: Mapping[str, Any]
) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, path in annotations.items():
        value = value_at(arguments, path)
        text = _header_text(value)
        if text is not None:
            out[f"Mcp-Param-{name}"] = encode_header_value(text)
    return out


def _header_text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
