"""The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663), server side.

A `tools/call` of a task-supporting tool, from a request whose client capabilities declare
the extension, answers at once with a flat `CreateTaskResult` (`resultType: "task"`) while
the tool runs in the background, owned by the server's `TaskStore`. The client polls
`tasks/get` (the result, or the protocol error, is inlined once terminal), answers the
task's input requests with `tasks/update` and stops it with `tasks/cancel`.

    server.extensions[tasks.EXTENSION] = {}
    server.add_tool(slow_job, task_support="optional")   # or "required"

Which calls become tasks is decided in one place, `run_as_task`:

| tool's taskSupport  | extension declared | not declared |
|---------------------|--------------------|--------------|
| None / "forbidden"  | synchronous        | synchronous  |
| "optional"          | task               | synchronous  |
| "required"          | task               | -32021       |

Input: when the tool asks for input (`ctx.elicit`, `ctx.ask_many`…) inside a task, the task
goes `input_required` and lists the pending requests on `tasks/get`; once `tasks/update` has
answered every one of them, the tool is run again from the top with all the answers (the
same re-run model as the modern `input_required` round).

A tool decorated with `@tasks.escalates` first runs inside the request: its input rounds are
ordinary synchronous `input_required` results, and it becomes a task only when it calls
`await tasks.escalate(ctx)` (the rest of it then runs in the background).

Memory: the store is bounded in count (`max_tasks_per_principal`, `max_tasks`) and in the
bytes of the results and errors it keeps (`max_result_bytes` for one, `max_bytes_per_principal`
and `max_bytes` in all), each charged at its wire size when the task ends, as are the answers
a running task holds (`max_answer_bytes` per task, dropped when it ends). A result over
`max_result_bytes` is not kept: the task fails with -32603 saying so. Past a byte budget the
store forgets finished tasks (oldest first) of the principal that just stored, then of the
principal holding the most bytes; a running task holds no result and is never dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import secrets
import time
import weakref
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import msgspec

from mcpkit.protocol import capabilities, errors
from mcpkit.server import inputs

if TYPE_CHECKING:
    from mcpkit.server.call import Call
    from mcpkit.server.context import Context
    from mcpkit.server.server import Server
    from mcpkit.server.tools import ToolDef

log = logging.getLogger(__name__)

EXTENSION = "io.modelcontextprotocol/tasks"

DEFAULT_MAX_TASKS = 1000
"""Tasks the server keeps at once (running, or finished and kept for their TTL)."""
DEFAULT_MAX_TASKS_PER_PRINCIPAL = 100
"""Tasks one principal (`Call.principal`; "" for callers without one) keeps at once: well
below `DEFAULT_MAX_TASKS`, so no one caller can take every slot of the store."""
DEFAULT_MAX_RESULT_BYTES = 8 * 1024 * 1024
"""The largest result (or error) one task may keep, in bytes of its JSON; a bigger one fails
the task with -32603 instead of being kept for the TTL."""
DEFAULT_MAX_BYTES_PER_PRINCIPAL = 32 * 1024 * 1024
"""The bytes of results one principal's finished tasks keep at once (the count cap alone
let 100 results of 4 MiB hold 400 MiB for ten minutes)."""
DEFAULT_MAX_BYTES = 256 * 1024 * 1024
"""The bytes of results every finished task of the server keeps at once."""
DEFAULT_MAX_ANSWER_BYTES = 1024 * 1024
"""The bytes of answers (`tasks/update`) one task may hold while it runs; they count toward
the byte budgets too, and are dropped once the task ends."""

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})

Execute = Callable[["Context"], Awaitable[dict[str, Any]]]
F = TypeVar("F", bound=Callable[..., Any])

ESCALATES = "__mcpkit_task_escalates__"
_ROUND_PARAMS = ("requestState", "inputResponses")
_escalations: weakref.WeakKeyDictionary[Context, Callable[[], None]] = weakref.WeakKeyDictionary()


def escalates(fn: F) -> F:
    """Mark a task-supporting tool that runs in the request until `await escalate(ctx)`."""
    setattr(fn, ESCALATES, True)
    return fn


async def escalate(ctx: Context) -> None:
    """From here on, run as a task (the request answers with its `CreateTaskResult`).
    A no-op when the call is not becoming a task, or already is one."""
    hook = _escalations.pop(ctx, None)
    if hook is not None:
        hook()
    await anyio.lowlevel.checkpoint()


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def client_declares(call: Call) -> bool:
    return capabilities.has_extension(call.client_capabilities, EXTENSION)


def require_extension(call: Call) -> None:
    """-32021 unless the request's client capabilities declare the extension."""
    if not client_declares(call):
        raise errors.missing_client_capability({"extensions": {EXTENSION: {}}})


def run_as_task(server: Server, call: Call, tool: ToolDef) -> bool:
    """Whether this call of `tool` runs as a task (raises -32021 when it must and cannot)."""
    support = tool.task_support
    if support not in ("optional", "required"):
        return False
    if call.modern and client_declares(call) and EXTENSION in server.extensions:
        return True
    if support == "required":
        require_extension(call)
    return False


@dataclasses.dataclass(eq=False)
class Task:
    """One task: its status and, once terminal, its result or error."""

    task_id: str
    principal: str
    ttl_ms: int
    poll_interval_ms: int
    status: str = WORKING
    status_message: str | None = None
    created_at: str = dataclasses.field(default_factory=_now_iso)
    updated_at: str = ""
    created_mono: float = dataclasses.field(default_factory=time.monotonic)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    held_bytes: int = 0  # the wire size of `result` or `error`, charged to the store's budgets
    answer_bytes: int = 0  # the wire size of the `answers` taken by `tasks/update`, likewise
    pending: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    answers: dict[str, Any] = dataclasses.field(default_factory=dict)
    answered: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    runner: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.updated_at = self.updated_at or self.created_at

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def expired(self, now: float) -> bool:
        return now - self.created_mono > self.ttl_ms / 1000

    def remaining_s(self) -> float:
        return max(0.0, self.ttl_ms / 1000 - (time.monotonic() - self.created_mono))

    def set_status(self, status: str, message: str | None = None) -> None:
        self.status = status
        self.status_message = message
        self.updated_at = _now_iso()

    def envelope(self) -> dict[str, Any]:
        """The `Task` fields shared by `CreateTaskResult` and `tasks/get`."""
        wire: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": self.created_at,
            "lastUpdatedAt": self.updated_at,
            "ttlMs": self.ttl_ms,
            "pollIntervalMs": self.poll_interval_ms,
        }
        if self.status_message is not None:
            wire["statusMessage"] = self.status_message
        return wire

    def detailed(self) -> dict[str, Any]:
        """The `tasks/get` answer (a `DetailedTask`)."""
        wire = self.envelope()
        if self.status == COMPLETED and self.result is not None:
            wire["result"] = self.result
        elif self.status == FAILED and self.error is not None:
            wire["error"] = self.error
        elif self.status == INPUT_REQUIRED:
            wire["inputRequests"] = dict(self.pending)
        return wire


@dataclasses.dataclass(eq=False)
class _Handoff:
    """The request's side of a task being born: escalated, or settled synchronously."""

    ready: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    escalated: bool = False
    outcome: dict[str, Any] | None = None
    failure: errors.McpError | inputs._InputRequired | None = None


def result_too_large(size: int, limit: int) -> errors.McpError:
    """The error a task ends with when its result is too large to keep."""
    return errors.McpError(
        errors.INTERNAL_ERROR,
        f"The task's result is {size} bytes, over the {limit} bytes a task may keep "
        "(the result was dropped)",
        {"size": size, "limit": limit},
    )


def _wire_size(value: Any) -> int:
    """The bytes `value` takes as JSON (what keeping it costs, give or take)."""
    try:
        return len(msgspec.json.encode(value))
    except (TypeError, ValueError, OverflowError, msgspec.EncodeError):
        return 0  # it cannot be sent either; the engine answers -32603 when it is asked for


class TaskStore:
    """The server's tasks: bounded in number and in bytes kept, each kept for its TTL,
    runners owned here. Every limit is an attribute, read each time it applies."""

    def __init__(
        self,
        *,
        ttl_ms: int = 10 * 60 * 1000,
        poll_interval_ms: int = 250,
        max_tasks: int = DEFAULT_MAX_TASKS,
        max_tasks_per_principal: int = DEFAULT_MAX_TASKS_PER_PRINCIPAL,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        max_bytes_per_principal: int = DEFAULT_MAX_BYTES_PER_PRINCIPAL,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.max_tasks = max_tasks
        self.max_tasks_per_principal = max_tasks_per_principal
        self.max_result_bytes = max_result_bytes
        self.max_bytes_per_principal = max_bytes_per_principal
        self.max_bytes = max_bytes
        self.max_answer_bytes = max_answer_bytes
        self.tasks: dict[str, Task] = {}

    # --- lookup -------------------------------------------------------------------------------

    def get(self, task_id: Any, principal: str) -> Task:
        """The live task `task_id` of `principal`; -32602 for anything else."""
        if not isinstance(task_id, str):
            raise errors.invalid_params('"taskId" must be a string')
        self.purge()
        task = self.tasks.get(task_id)
        if task is None or task.principal != principal:
            raise errors.invalid_params(f"Unknown task: {task_id}", {"taskId": task_id})
        return task

    def purge(self) -> None:
        """Forget expired tasks (cancelling any still running)."""
        now = time.monotonic()
        for task_id, task in list(self.tasks.items()):
            if task.expired(now):
                del self.tasks[task_id]
                if task.runner is not None:
                    task.runner.cancel()

    def register(self, task: Task) -> None:
        """Keep `task`, within both caps (see `DEFAULT_MAX_TASKS_PER_PRINCIPAL`): a full
        principal makes room among its own finished tasks, a full store among those of the
        principal holding the most; with nothing finished to drop, -32000."""
        self.purge()
        own = [t for t in self.tasks.values() if t.principal == task.principal]
        if len(own) >= self.max_tasks_per_principal:
            self._drop_oldest_finished(own, self.max_tasks_per_principal, "for this caller")
        if len(self.tasks) >= self.max_tasks:
            self._drop_oldest_finished(self._by_holding(), self.max_tasks, "on this server")
        self.tasks[task.task_id] = task

    def _by_holding(self) -> list[Task]:
        """Every task, those of the principals holding the most first (stable)."""
        held: dict[str, list[Task]] = {}
        for task in self.tasks.values():
            held.setdefault(task.principal, []).append(task)
        return [t for group in sorted(held.values(), key=len, reverse=True) for t in group]

    def _drop_oldest_finished(self, among: list[Task], limit: int, where: str) -> None:
        """Forget the oldest finished task of `among`; -32000 when all of them still run
        (running tasks are never dropped: their callers still wait on them)."""
        finished = [t for t in among if t.terminal]
        if not finished:
            raise errors.server_busy(
                f"{len(among)} tasks are in progress {where} (the limit is {limit}); "
                "try again once one has finished or been cancelled", limit)
        # `among` is grouped by principal, largest first: the victim is the oldest finished
        # task of the first (largest) principal that has one.
        victim = finished[0].principal
        oldest = min((t for t in finished if t.principal == victim), key=lambda t: t.created_mono)
        del self.tasks[oldest.task_id]

    # --- bytes kept ---------------------------------------------------------------------------

    def held_bytes(self, principal: str | None = None) -> int:
        """The bytes kept by the tasks of `principal` (None: of everyone): results, errors
        and answers."""
        return sum(t.held_bytes + t.answer_bytes for t in self.tasks.values()
                   if principal is None or t.principal == principal)

    def settle(self, task: Task, status: str, *, result: dict[str, Any] | None = None,
               error: dict[str, Any] | None = None, message: str | None = None) -> None:
        """End `task` with `result` (completed) or `error` (failed), charged to the byte
        budgets: a value over the per-result cap (never more than either budget, so one
        value always fits once the others are gone) is replaced by `result_too_large`;
        then finished tasks are forgotten until both budgets hold again (or only running
        tasks' answers are left over them: those go as their tasks end). The task's answers
        are dropped: only a re-run needs them."""
        if task.terminal:
            return  # cancelled meanwhile: a terminal task does not change
        size = _wire_size(result if result is not None else error)
        cap = min(self.max_result_bytes, self.max_bytes_per_principal, self.max_bytes)
        if size > cap:
            log.warning("task %s: result of %d bytes over the %d-byte cap", task.task_id,
                        size, cap)
            too_large = result_too_large(size, cap)
            result, error, status = None, too_large.to_error(), FAILED
            message = "The result was too large to keep."
            size = _wire_size(error)
        task.result, task.error, task.held_bytes = result, error, size
        task.answers, task.answer_bytes, task.pending = {}, 0, {}  # only re-runs need them
        task.set_status(status, message)
        if self.tasks.get(task.task_id) is task:
            self._fit_budgets(task)

    def _over_budget(self, principal: str) -> bool:
        return (self.held_bytes(principal) > self.max_bytes_per_principal
                or self.held_bytes() > self.max_bytes)

    def _fit_budgets(self, stored: Task) -> None:
        """Forget finished tasks until the bytes of `stored`'s principal and of the store are
        within budget: the principal's own oldest first, then the biggest holder's."""
        principal = stored.principal
        while self.held_bytes(principal) > self.max_bytes_per_principal:
            if not self._forget_oldest(principal, spare=stored):
                break
        while self.held_bytes() > self.max_bytes:
            if self._forget_oldest(principal, spare=stored):
                continue
            if not self._forget_oldest(self._biggest_holder(spare=stored), spare=stored):
                break

    def _biggest_holder(self, spare: Task) -> str | None:
        held: dict[str, int] = {}
        for task in self.tasks.values():
            if task.terminal and task is not spare:
                held[task.principal] = held.get(task.principal, 0) + task.held_bytes
        return max(held, key=held.__getitem__) if held else None

    def _forget_oldest(self, principal: str | None, spare: Task) -> bool:
        """Forget the oldest finished task of `principal` holding bytes (never `spare`);
        False when there is none."""
        candidates = [t for t in self.tasks.values() if t.principal == principal
                      and t.terminal and t.held_bytes and t is not spare]
        if not candidates:
            return False
        del self.tasks[min(candidates, key=lambda t: t.created_mono).task_id]
        return True

    # --- creating and running -----------------------------------------------------------------

    async def start(
        self,
        server: Server,
        call: Call,
        make_context: Callable[[Call], Context],
        execute: Execute,
        *,
        escalates_itself: bool = False,
    ) -> dict[str, Any]:
        """Run `execute` as a task; the `CreateTaskResult` (or, for a tool that had not
        escalated yet, its synchronous outcome)."""
        task = Task(secrets.token_urlsafe(16), call.principal, self.ttl_ms, self.poll_interval_ms)
        handoff = _Handoff()
        ctx = make_context(call)

        def promote() -> None:
            self.register(task)
            handoff.escalated = True
            handoff.ready.set()

        if escalates_itself:
            _escalations[ctx] = promote
        else:
            promote()
        task.runner = asyncio.get_running_loop().create_task(
            self._run(task, call, ctx, make_context, execute, handoff),
            name=f"mcpkit-task-{task.task_id}",
        )
        if not handoff.escalated:
            await self._await_handoff(task, handoff)
        if handoff.escalated:
            return {"resultType": "task", **task.envelope()}
        if isinstance(handoff.failure, inputs._InputRequired):
            return server.input_required_result(call, ctx, handoff.failure)
        if handoff.failure is not None:
            raise handoff.failure
        if handoff.outcome is None:
            raise errors.internal_error("the tool ended without a result")
        return handoff.outcome

    async def _await_handoff(self, task: Task, handoff: _Handoff) -> None:
        try:
            with anyio.move_on_after(task.ttl_ms / 1000):
                await handoff.ready.wait()
        finally:
            if not handoff.escalated and task.runner is not None and not handoff.ready.is_set():
                task.runner.cancel()
        if not handoff.ready.is_set():
            raise errors.internal_error("the tool neither finished nor became a task in time")

    async def _run(
        self,
        task: Task,
        call: Call,
        ctx: Context,
        make_context: Callable[[Call], Context],
        execute: Execute,
        handoff: _Handoff,
    ) -> None:
        try:
            await self._drive(task, call, ctx, make_context, execute, handoff)
        except asyncio.CancelledError:
            if not task.terminal:
                task.set_status(CANCELLED, "The task was cancelled.")
            raise
        finally:
            _escalations.pop(ctx, None)
            task.runner = None

    async def _drive(
        self,
        task: Task,
        call: Call,
        ctx: Context,
        make_context: Callable[[Call], Context],
        execute: Execute,
        handoff: _Handoff,
    ) -> None:
        task.answers = dict(ctx.answers)
        while True:
            try:
                with anyio.fail_after(max(task.remaining_s(), 0.001)):
                    result = await execute(ctx)
            except inputs._InputRequired as need:
                if not handoff.escalated:
                    handoff.failure = need
                    handoff.ready.set()
                    return
                task.answers.update(ctx.accepted)
                if not await self._wait_for_input(task, need.requests):
                    return
                ctx = self._retry_context(call, ctx, task, make_context)
                continue
            except errors.McpError as exc:
                self._settle_error(task, handoff, exc)
                return
            except TimeoutError:
                self._settle_error(task, handoff, errors.internal_error("the task timed out"))
                return
            except Exception:
                log.exception("task %s crashed", task.task_id)
                self._settle_error(task, handoff, errors.internal_error())
                return
            if handoff.escalated:
                self.settle(task, COMPLETED, result=result)
            else:
                handoff.outcome = result
                handoff.ready.set()
            return

    def _settle_error(self, task: Task, handoff: _Handoff, exc: errors.McpError) -> None:
        if handoff.escalated:
            self.settle(task, FAILED, error=exc.to_error(), message=exc.message)
        else:
            handoff.failure = exc
            handoff.ready.set()

    async def _wait_for_input(self, task: Task, requests: dict[str, dict[str, Any]]) -> bool:
        """Park the task until every request is answered (False: it expired meanwhile)."""
        task.pending = dict(requests)
        task.answered = anyio.Event()
        task.set_status(INPUT_REQUIRED, "Waiting for input from the client.")
        with anyio.move_on_after(task.remaining_s()):
            await task.answered.wait()
        if task.pending:
            expired = errors.internal_error("the task expired waiting for input")
            self.settle(task, FAILED, error=expired.to_error(),
                        message="Expired waiting for input.")
            return False
        task.set_status(WORKING)
        return True

    @staticmethod
    def _retry_context(
        call: Call, previous: Context, task: Task, make_context: Callable[[Call], Context]
    ) -> Context:
        """A fresh context for the next run, carrying every answer so far."""
        params = {k: v for k, v in call.params.items() if k not in _ROUND_PARAMS}
        ctx = make_context(msgspec.structs.replace(call, params=params))
        ctx.answers = dict(task.answers)
        ctx.state = previous.state
        return ctx

    # --- client operations --------------------------------------------------------------------

    def update(self, task: Task, responses: Any) -> None:
        """Take the answers to the task's pending input requests (others are ignored),
        charged to the byte budgets: -32602 past the task's `max_answer_bytes`, -32000 when
        the budgets are full of running tasks (nothing finished left to forget)."""
        if not isinstance(responses, dict):
            raise errors.invalid_params('"inputResponses" must be an object')
        if task.status != INPUT_REQUIRED:
            return
        taken = {
            key: answer for key, answer in responses.items()
            if (request := task.pending.get(key)) is not None
            and inputs.is_valid_answer(str(request.get("method")), answer)
        }
        self._charge_answers(task, sum(_wire_size(answer) for answer in taken.values()))
        for key, answer in taken.items():
            task.answers[key] = answer
            del task.pending[key]
        task.updated_at = _now_iso()
        if not task.pending:
            task.answered.set()

    def _charge_answers(self, task: Task, size: int) -> None:
        if task.answer_bytes + size > self.max_answer_bytes:
            raise errors.invalid_params(
                f"the answers to this task's input requests would take {task.answer_bytes + size}"
                f" bytes, over the limit of {self.max_answer_bytes}",
                {"limit": self.max_answer_bytes})
        task.answer_bytes += size
        self._fit_budgets(task)
        if self._over_budget(task.principal):
            task.answer_bytes -= size
            limit = min(self.max_bytes_per_principal, self.max_bytes)
            raise errors.server_busy(
                "running tasks hold as many bytes of answers as they may; try again once "
                "one has finished or been cancelled", limit)

    def cancel(self, task: Task) -> None:
        """Stop the task cooperatively; a terminal task stays as it is."""
        if task.terminal:
            return
        task.set_status(CANCELLED, "The task was cancelled.")
        if task.runner is not None:
            task.runner.cancel()

    def cancel_all(self) -> None:
        """Shutdown: cancel every running task."""
        for task in self.tasks.values():
            self.cancel(task)

    async def aclose(self, grace_s: float = 1.0) -> None:
        """Cancel every running task and wait (bounded) for them to end."""
        runners = [t.runner for t in self.tasks.values() if t.runner is not None]
        self.cancel_all()
        if runners:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait(runners, timeout=grace_s)


# --- the tasks/* methods (modern era) -----------------------------------------------------------


def _task_of(server: Server, call: Call) -> Task:
    require_extension(call)
    return server.tasks.get(call.params.get("taskId"), call.principal)


async def get(server: Server, call: Call) -> dict[str, Any]:
    return _task_of(server, call).detailed()


async def update(server: Server, call: Call) -> dict[str, Any]:
    task = _task_of(server, call)
    server.tasks.update(task, call.params.get("inputResponses"))
    return {}


async def cancel(server: Server, call: Call) -> dict[str, Any]:
    server.tasks.cancel(_task_of(server, call))
    return {}
