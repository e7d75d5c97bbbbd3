"""What the three search tools (`glob`, `grep`, `ls`) share: their refusal, how they answer,
the caps they clamp a request to, and where a walked path is shown from."""

from __future__ import annotations

from pathlib import Path, PurePath
from typing import Any

from mcpkit.coding.workspace import Workspace
from mcpkit.errors import UsageError
from mcpkit.server.results import text_block
from mcpkit.server.tools import ToolResult

MAX_LIMIT = 5000
"""The most results any `limit` argument may ask for."""
WALK_TIMEOUT_S = 30.0
"""Wall-clock limit of one walk (glob, ls); past it the tool answers with what it found."""

READ_ONLY = {
    "readOnlyHint": True,
    "destructiveHint": False,
    "idempotentHint": True,
    "openWorldHint": False,
}


class SearchError(UsageError):
    """A search the tool refuses or cannot run (the message is meant for the model): a usage
    error - a path that does not exist, a file where a directory is wanted."""


def error(message: str) -> ToolResult:
    return ToolResult(content=[text_block(message)], is_error=True)


def text_result(text: str, structured: Any = None) -> ToolResult:
    return ToolResult(content=[text_block(text)], structured_content=structured)


def clamp(value: int | None, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    return max(low, min(high, value))


def root_of(workspace: Workspace, real: Path) -> Path:
    """The workspace root (the main one or an extra root) that holds `real`."""
    best = workspace.root
    best_len = -1
    for root in workspace.roots:
        if (real == root or root in real.parents) and len(root.parts) > best_len:
            best, best_len = root, len(root.parts)
    return best


def shown_path(workspace_root: PurePath, walk_root: PurePath, rel: str) -> str:
    """A walked file as the model should see it: relative to the workspace root."""
    if walk_root == workspace_root:
        return rel
    return str(walk_root / rel)
