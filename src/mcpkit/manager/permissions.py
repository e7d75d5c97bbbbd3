"""The permission hook: asked before every tool call, with what the call would do.

    async def hook(request: ToolCallRequest) -> Decision | str:
        if request.read_only:
            return "allow"
        return "ask"            # the manager then calls its `ask` callback (e.g. a prompt)

A hook may be sync or async and may return a `Decision` or its string value. "ask"
without an `ask` callback is a denial: nothing runs that nobody approved.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from mcpkit.manager.catalog import ManagedTool
from mcpkit.manager.errors import PermissionDenied


class Decision(StrEnum):
    ALLOW = "allow"
    DENY = "deny"
    ASK = "ask"


@dataclass(frozen=True, slots=True)
class ToolCallRequest:
    """A tool call about to be made."""

    tool: ManagedTool
    arguments: Mapping[str, Any]

    @property
    def server(self) -> str:
        return self.tool.server

    @property
    def name(self) -> str:
        """The exposed name (`mcp__<server>__<tool>`)."""
        return self.tool.name

    @property
    def annotations(self) -> dict[str, Any]:
        """The tool's annotations (`readOnlyHint`, `destructiveHint`, …) as the server gave them."""
        return self.tool.annotations

    @property
    def read_only(self) -> bool:
        return self.tool.read_only


PermissionHook = Callable[[ToolCallRequest], Decision | str | Awaitable[Decision | str]]
AskHook = Callable[[ToolCallRequest], bool | Awaitable[bool]]


async def check(request: ToolCallRequest, hook: PermissionHook | None,
                ask: AskHook | None) -> None:
    """Raise `PermissionDenied` unless the hook (and, for "ask", the user) allows the call."""
    if hook is None:
        return
    decision = await _resolve(hook(request))
    try:
        decision = Decision(decision)
    except ValueError:
        raise PermissionDenied(f"the permission hook answered {decision!r} for {request.name}; "
                               "expected allow, deny or ask") from None
    if decision is Decision.ALLOW:
        return
    if decision is Decision.ASK:
        if ask is None:
            raise PermissionDenied(f"{request.name} needs approval and nobody can be asked")
        if await _resolve(ask(request)):
            return
        raise PermissionDenied(f"the user declined {request.name}")
    raise PermissionDenied(f"{request.name} is denied by the permission hook")


async def _resolve(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value
