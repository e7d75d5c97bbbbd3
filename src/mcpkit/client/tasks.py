"""Following a task (the modern Tasks extension, `io.modelcontextprotocol/tasks`) to its end.

When the client declares the extension, a server may answer `tools/call` with a
`CreateTaskResult` (`resultType: "task"`) and run the tool in the background. `follow`
polls `tasks/get` at the server's `pollIntervalMs`, answers the task's input requests with
`tasks/update`, and returns the tool's result once the task completes. If the caller stops
waiting (cancellation, the maximum time), the task is cancelled on the server.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from mcpkit.client.errors import ClientError
from mcpkit.client.session import ServerError

EXTENSION = "io.modelcontextprotocol/tasks"
MIN_POLL_S = 0.05
MAX_POLL_S = 5.0
DEFAULT_POLL_S = 0.5
DEFAULT_MAX_POLLS = 10_000
"""`tasks/get` requests one call sends at most (with the 5 s interval cap: about 14 h)."""

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]
AnswerInputs = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class TaskFailed(ClientError):
    """The task ended `failed` or `cancelled` on the server."""


class TaskPollLimit(ClientError):
    """A task was still running after the client's bound on `tasks/get` polls."""


def is_task(result: Any) -> bool:
    return isinstance(result, dict) and result.get("resultType") == "task" \
        and isinstance(result.get("taskId"), str)


async def follow(
    created: dict[str, Any],
    request: Request,
    answer_inputs: AnswerInputs,
    *,
    max_seconds: float | None,
    max_polls: int = DEFAULT_MAX_POLLS,
) -> dict[str, Any]:
    """Poll the task until it is terminal; return its result (a CallToolResult)."""
    task_id: str = created["taskId"]
    view = created
    answered: set[str] = set()
    done = False
    polls = 0
    try:
        with anyio.fail_after(max_seconds):
            while True:
                status = view.get("status")
                if status == "completed":
                    done = True
                    return _result_of(view, task_id)
                if status in ("failed", "cancelled"):
                    done = True
                    raise _failure(view, task_id)
                if status == "input_required":
                    await _answer(view, task_id, request, answer_inputs, answered)
                if polls >= max_polls:
                    raise poll_limit(task_id, status, max_polls)
                polls += 1
                await anyio.sleep(_poll_seconds(view))
                view = await request("tasks/get", {"taskId": task_id})
    finally:
        if not done:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5.0):
                try:
                    await request("tasks/cancel", {"taskId": task_id})
                except Exception:  # best effort: the caller already gave up
                    pass


async def _answer(view: dict[str, Any], task_id: str, request: Request,
                  answer_inputs: AnswerInputs, answered: set[str]) -> None:
    asked = view.get("inputRequests")
    if not isinstance(asked, dict):
        return
    fresh = {k: v for k, v in asked.items() if k not in answered}
    if not fresh:
        return
    responses = await answer_inputs(fresh)
    answered.update(fresh)
    await request("tasks/update", {"taskId": task_id, "inputResponses": responses})


def _poll_seconds(view: dict[str, Any]) -> float:
    interval = view.get("pollIntervalMs")
    if not isinstance(interval, int | float) or isinstance(interval, bool):
        return DEFAULT_POLL_S
    return min(MAX_POLL_S, max(MIN_POLL_S, interval / 1000))


def _result_of(view: dict[str, Any], task_id: str) -> dict[str, Any]:
    result = view.get("result")
    if not isinstance(result, dict):
        raise TaskFailed(f"task {task_id} completed without a result")
    return result


def _failure(view: dict[str, Any], task_id: str) -> Exception:
    error = view.get("error")
    if isinstance(error, dict) and isinstance(error.get("code"), int):
        return ServerError(error["code"], str(error.get("message") or "task failed"),
                           error.get("data"))
    message = view.get("statusMessage") or view.get("status")
    return TaskFailed(f"task {task_id} ended {view.get('status')}: {message}")


def poll_limit(task_id: str, status: object, max_polls: int) -> TaskPollLimit:
    """The error of a task still not done after `max_polls` polls (both eras' followers)."""
    return TaskPollLimit(f"task {task_id} was still {status} after {max_polls} polls of "
                         "tasks/get (Client(limits=Limits(task_polls=...)) raises the bound)")
