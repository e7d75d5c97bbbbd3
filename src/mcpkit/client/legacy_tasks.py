"""Following a task of the 2025-11-25 protocol (the `tasks` utility of a legacy session).

A server whose capabilities include `tasks.requests.tools.call` may mark a tool
`execution.taskSupport: "required"` (it must be called as a task: -32601 otherwise) or
`"optional"`. Such a call carries `task: {}` in its params and is answered at once with a
`CreateTaskResult` (`{"task": {...}}`); then:

- `tasks/get` is polled at the server's `pollInterval` until the task is terminal or asks
  for input;
- `tasks/result` gives the tool's result (or its JSON-RPC error). It blocks until the task
  is terminal, and while it waits the server sends its `elicitation/create` (or sampling)
  requests on the session, which the client's responders answer as any other server
  request. So both `input_required` and the terminal statuses lead to `tasks/result`;
- a caller that stops waiting (cancellation, the maximum time, the poll bound) cancels the
  task with `tasks/cancel` (best effort, when the server offers it).

The modern Tasks extension is `mcpkit.client.tasks`; the two differ in shape (a nested
`task` object, `pollInterval` and `ttl` instead of `pollIntervalMs` and `ttlMs`, results
fetched with `tasks/result` instead of inlined in `tasks/get`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio

from mcpkit.client.tasks import (
    DEFAULT_MAX_POLLS,
    DEFAULT_POLL_S,
    MAX_POLL_S,
    MIN_POLL_S,
    TaskFailed,
    TaskPollLimit,
    poll_limit,
)

TASKS_VERSIONS = frozenset({"2025-11-25"})
"""The session versions that have the tasks utility."""
CANCEL_GRACE_S = 5.0
"""How long a `tasks/cancel` sent while giving up may take."""

Request = Callable[..., Awaitable[Any]]

__all__ = ["DEFAULT_MAX_POLLS", "TaskFailed", "TaskPollLimit", "follow"]


def server_runs_tool_tasks(version: str | None, capabilities: Mapping[str, Any]) -> bool:
    """Whether a session at `version` with these server capabilities takes task-augmented
    `tools/call` (spec: without `tasks.requests.tools.call` a client MUST NOT augment)."""
    if version not in TASKS_VERSIONS:
        return False
    tasks = capabilities.get("tasks")
    requests = tasks.get("requests") if isinstance(tasks, dict) else None
    tools = requests.get("tools") if isinstance(requests, dict) else None
    return isinstance(tools, dict) and isinstance(tools.get("call"), dict)


def task_support(tool: Mapping[str, Any] | None) -> str | None:
    """A listed tool's `execution.taskSupport` (None when absent or malformed)."""
    execution = (tool or {}).get("execution")
    support = execution.get("taskSupport") if isinstance(execution, dict) else None
    return support if support in ("required", "optional", "forbidden") else None


def wants_task(tool: Mapping[str, Any] | None, prefer: bool) -> bool:
    """A required tool always runs as a task; an optional one when `prefer`."""
    support = task_support(tool)
    return support == "required" or (support == "optional" and prefer)


def created_task(result: Any) -> dict[str, Any] | None:
    """The `task` of a `CreateTaskResult`, or None for an ordinary result."""
    if not isinstance(result, dict):
        return None
    task = result.get("task")
    if isinstance(task, dict) and isinstance(task.get("taskId"), str) \
            and "content" not in result:
        return task
    return None


async def follow(
    task: dict[str, Any],
    request: Request,
    *,
    max_seconds: float | None,
    max_polls: int = DEFAULT_MAX_POLLS,
    can_cancel: bool = True,
) -> dict[str, Any]:
    """Poll the task until it is terminal or wants input, then fetch its result with
    `tasks/result` (a `ServerError` when the tool's request failed). `request(method,
    params, timeout=..., max_timeout=...)` sends one request on the session."""
    task_id: str = task["taskId"]
    view = task
    polls = 0
    done = False
    try:
        with anyio.fail_after(max_seconds):
            while True:
                status = view.get("status")
                if status == "cancelled":
                    done = True
                    raise TaskFailed(f"task {task_id} was cancelled on the server: "
                                     f"{view.get('statusMessage') or 'no reason given'}")
                if status in ("completed", "failed", "input_required"):
                    # The outer `fail_after` bounds it; no idle limit while the user answers.
                    result = await request("tasks/result", {"taskId": task_id},
                                           timeout=None, max_timeout=None)
                    done = True
                    if not isinstance(result, dict):
                        raise TaskFailed(f"task {task_id}: tasks/result returned no object")
                    return result
                if polls >= max_polls:
                    raise poll_limit(task_id, status, max_polls)
                polls += 1
                await anyio.sleep(_poll_seconds(view))
                polled = await request("tasks/get", {"taskId": task_id})
                view = polled if isinstance(polled, dict) else {}
    finally:
        if not done and can_cancel:
            with anyio.CancelScope(shield=True), anyio.move_on_after(CANCEL_GRACE_S):
                try:
                    await request("tasks/cancel", {"taskId": task_id})
                except Exception:  # best effort: the caller already gave up
                    pass


def _poll_seconds(view: dict[str, Any]) -> float:
    interval = view.get("pollInterval")
    if not isinstance(interval, int | float) or isinstance(interval, bool):
        return DEFAULT_POLL_S
    return min(MAX_POLL_S, max(MIN_POLL_S, interval / 1000))


def can_cancel(capabilities: Mapping[str, Any]) -> bool:
    tasks = capabilities.get("tasks")
    return isinstance(tasks, dict) and isinstance(tasks.get("cancel"), dict)
