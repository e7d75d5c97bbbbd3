"""What the manager exposes of its servers: tools (and resources, prompts) under qualified names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from msgspec import UNSET

from mcpkit.protocol import types


@dataclass(frozen=True, slots=True)
class ManagedTool:
    """One server's tool as the manager exposes it."""

    name: str
    """The exposed name: `mcp__<server>__<tool>`, sanitized, at most 64 characters."""
    server: str
    tool: types.Tool
    """The tool as its server listed it (its own name is `tool.name`)."""

    @property
    def description(self) -> str:
        return self.tool.description if isinstance(self.tool.description, str) else ""

    @property
    def input_schema(self) -> dict[str, Any]:
        return self.tool.input_schema

    @property
    def annotations(self) -> dict[str, Any]:
        """The tool's annotations as wire-format JSON (`readOnlyHint`, …); {} when none."""
        if self.tool.annotations is UNSET:
            return {}
        import msgspec

        plain: dict[str, Any] = msgspec.to_builtins(self.tool.annotations)
        return plain

    @property
    def read_only(self) -> bool:
        """Declared read-only: safe to retry after a reconnect."""
        annotations = self.tool.annotations
        return annotations is not UNSET and annotations.read_only_hint is True
