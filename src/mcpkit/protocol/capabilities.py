"""Capability checks.

Capabilities are JSON objects whose presence means support; nested objects refine it
(e.g. `sampling.tools`). A requirement is met when every key it names is present in the
declared capabilities, recursively.
"""

from __future__ import annotations

from typing import Any


def missing_capabilities(required: dict[str, Any], declared: dict[str, Any]) -> dict[str, Any]:
    """The part of `required` that `declared` lacks (empty when all is there)."""
    missing: dict[str, Any] = {}
    for key, sub in required.items():
        have = declared.get(key)
        if not isinstance(have, dict):
            missing[key] = sub if isinstance(sub, dict) else {}
            continue
        if isinstance(sub, dict) and sub:
            deeper = missing_capabilities(sub, have)
            if deeper:
                missing[key] = deeper
    return missing


def has_capability(declared: dict[str, Any] | None, *path: str) -> bool:
    """Whether `declared` contains the nested capability `path` (e.g. "sampling", "tools")."""
    node: Any = declared or {}
    for key in path:
        if not isinstance(node, dict) or not isinstance(node.get(key), dict):
            return False
        node = node[key]
    return True


def has_extension(declared: dict[str, Any] | None, name: str) -> bool:
    """Whether capabilities declare the extension `name` under `extensions`."""
    exts = (declared or {}).get("extensions")
    return isinstance(exts, dict) and isinstance(exts.get(name), dict)
