"""What a `Client` knows of its server's tools: the listed catalog, each tool's
`x-mcp-header` arguments, and the validators of their output schemas.

Invariants:
- `tools` is None until the catalog is listed, and again after `tools/list_changed`.
- In the modern era a tool whose `x-mcp-header` annotations are invalid is left out of
  the catalog and refused by name (spec: clients must not call them).
- An output validator is built once per tool per listing; a pattern RE2 cannot run is
  skipped (logged), never handed to a backtracking engine (the server chose both the
  schema and the value).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import msgspec

from mcpkit.client.errors import InvalidToolOutput
from mcpkit.protocol import headers, types
from mcpkit.schema_patterns import PatternPolicy
from mcpkit.validation import SchemaValidator

log = logging.getLogger(__name__)


class ToolCatalog:
    def __init__(self) -> None:
        self.tools: dict[str, dict[str, Any]] | None = None
        self.unsafe: set[str] = set()
        """Tools left out for invalid `x-mcp-header` annotations (modern era)."""
        self.annotations: dict[str, dict[str, tuple[str, ...]]] = {}
        """Each tool's `x-mcp-header` arguments, by tool name."""
        self._known: dict[str, Mapping[str, Any]] = {}  # know()'s, by name
        self._validators: dict[str, SchemaValidator] = {}

    def forget(self) -> None:
        """The server's list changed: list it again before relying on it."""
        self.tools = None

    def adopt(self, raw: list[Any], *, modern: bool) -> list[dict[str, Any]]:
        """Take a fresh `tools/list` (all pages); the tools kept, in order."""
        kept: dict[str, dict[str, Any]] = {}
        self.unsafe.clear()
        self.annotations.clear()
        self._known.clear()
        for tool in raw:
            if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
                continue
            annotations = header_annotations(tool)
            if modern and annotations is None:
                log.warning("ignoring tool %r: invalid x-mcp-header annotations", tool["name"])
                self.unsafe.add(tool["name"])
                continue
            kept[tool["name"]] = tool
            if annotations:
                self.annotations[tool["name"]] = annotations
        self.tools = kept
        self._validators.clear()
        return list(kept.values())

    def know(self, tool: Mapping[str, Any]) -> None:
        """Take one tool (its wire object) as `adopt` would, for its header arguments."""
        name = tool.get("name")
        if not isinstance(name, str) or self._known.get(name) is tool:
            return  # the same object again (a relay's cached catalog): nothing new to learn
        self._known[name] = tool
        annotations = header_annotations(dict(tool))
        if annotations:
            self.annotations[name] = annotations
        else:
            self.annotations.pop(name, None)

    def check_output(self, name: str, tool: dict[str, Any],
                     result: types.CallToolResult) -> None:
        """InvalidToolOutput when a tool with an `outputSchema` answered outside it."""
        schema = tool.get("outputSchema")
        if not isinstance(schema, dict) or result.is_error is True:
            return
        if result.structured_content is msgspec.UNSET:
            raise InvalidToolOutput(
                f"tool {name!r} declares an outputSchema but returned no structuredContent")
        validator = self._validators.get(name)
        if validator is None:
            validator = self._validators[name] = SchemaValidator(
                schema, patterns=PatternPolicy.SKIP)
        problems = validator.errors(result.structured_content)
        if problems:
            raise InvalidToolOutput(
                f"tool {name!r} returned structuredContent that does not match its "
                f"outputSchema: {'; '.join(problems)}")


def header_annotations(tool: dict[str, Any]) -> dict[str, tuple[str, ...]] | None:
    """A tool's x-mcp-header annotations, or None when they are invalid."""
    schema = tool.get("inputSchema")
    if not isinstance(schema, dict):
        return {}
    try:
        return headers.header_params(schema)
    except ValueError:
        return None
