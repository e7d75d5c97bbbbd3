"""A tool call that runs as a task, in either era: how it is sent, and following the task
it started to the tool's result.

A tool whose `execution.taskSupport` is "required" always runs as a task; an "optional"
one when the caller prefers (`Behaviour.tasks`, or `call_tool(task=…)`).

- Legacy (2025-11-25, `mcpkit.client.legacy_tasks`): the call carries `task: {}` when the
  server runs tool tasks; the `CreateTaskResult` it answers is followed with `tasks/get`
  and `tasks/result`.
- Modern (the Tasks extension, `mcpkit.client.tasks`): the extension is declared on this
  call's requests (unless the client declares it on all of them); a task result is
  followed with polls and `tasks/update` with the answers to its questions.

Both followers share the call's maximum time (what is left of it) and the poll bound.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

import anyio

from mcpkit.client import legacy_tasks, rounds
from mcpkit.client import tasks as modern_tasks
from mcpkit.client.responders import Responders
from mcpkit.protocol.versions import Era


class TaskPlan(NamedTuple):
    """How one call is sent: `legacy_task` puts `task: {}` in its params;
    `declare_extension` declares the modern Tasks extension on its requests."""

    legacy_task: bool
    declare_extension: bool


def plan(tool: Mapping[str, Any] | None, prefer: bool, declared_always: bool, era: Era | None,
         version: str | None, capabilities: Mapping[str, Any]) -> TaskPlan:
    as_task = legacy_tasks.wants_task(tool, prefer)
    return TaskPlan(
        legacy_task=as_task and era is Era.LEGACY
        and legacy_tasks.server_runs_tool_tasks(version, capabilities),
        declare_extension=as_task and era is Era.MODERN and not declared_always,
    )


async def follow(result: Any, *, era: Era | None, request: legacy_tasks.Request,
                 send: modern_tasks.Request, responders: Responders,
                 capabilities: Mapping[str, Any], started: float, maximum: float | None,
                 max_polls: int) -> Any:
    """The call's result, or the result of the task it started, within what is left of
    the call's `maximum` (counted from `started`) and `max_polls` polls; the questions a
    modern task asks are answered by `responders`."""
    created = legacy_tasks.created_task(result) if era is Era.LEGACY else None
    if created is not None:
        return await legacy_tasks.follow(
            created, request, max_seconds=_left(started, maximum), max_polls=max_polls,
            can_cancel=legacy_tasks.can_cancel(capabilities))
    if modern_tasks.is_task(result):
        return await modern_tasks.follow(
            result, send, functools.partial(rounds.answer_inputs, responders),
            max_seconds=_left(started, maximum), max_polls=max_polls)
    return result


def _left(started: float, maximum: float | None) -> float | None:
    return None if maximum is None else max(0.0, maximum - (anyio.current_time() - started))
