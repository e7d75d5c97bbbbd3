"""Per-task state: `?task_id=` (HTTP) or `--task-id` (stdio) scopes what tools remember.

Each task has its own read records (read-before-write), background jobs and output
directory. The task of the request being served is in the context variable
`current_task`, set by the HTTP middleware (`http.py`) for the whole request, so tool
handlers just call `scopes.current()`.
"""

from __future__ import annotations

import contextvars
import re
import shutil
import tempfile
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcpkit.errors import InvalidArgument
from mcpkit.protocol import errors

DEFAULT_TASK = "default"
TASK_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
MAX_TASKS = 256
"""Task scopes kept at once. A new task drops the least recently used idle one (no command
running, no background job running); when every task is busy, the new one is refused."""

current_task: contextvars.ContextVar[str] = contextvars.ContextVar(
    "mcpkit_coding_task", default=DEFAULT_TASK)


def valid_task_id(value: str) -> bool:
    return bool(TASK_ID.match(value)) and value not in (".", "..")


@dataclass(slots=True)
class ReadRecord:
    """What a file looked like when the model last read (or wrote) it."""

    mtime_ns: int
    size: int


@dataclass
class TaskScope:
    task_id: str
    output_dir: Path
    reads: dict[Path, ReadRecord] = field(default_factory=dict)
    jobs: dict[str, Any] = field(default_factory=dict)
    """Background jobs by id (owned by `shell.py`; each has `running` and `kill_now()`)."""
    commands: int = 0
    """Foreground commands running now (`shell.py` counts them)."""

    @property
    def busy(self) -> bool:
        """Something of this task is running: it is never dropped for another task."""
        return self.commands > 0 or any(getattr(job, "running", False)
                                        for job in self.jobs.values())


class TaskLimitError(errors.McpError):
    """A new task when `max_tasks` tasks are kept and every one is busy."""

    def __init__(self, task_id: str, limit: int) -> None:
        super().__init__(
            errors.INVALID_REQUEST,
            f"too many tasks: all {limit} task scopes have commands or background jobs "
            f"running, so task {task_id!r} cannot start; stop some jobs (bash_kill) or wait "
            f"for them, or raise the limit (mcpkit serve --max-tasks)",
            {"maxTasks": limit})


class Scopes:
    """All task scopes of one server, with their output directories under `base_dir`.

    Without a `base_dir` the scopes own a temporary directory (`mcpkit-serve-*` in the
    system temp dir), made when the first task needs it and removed by `close()`, or at
    the latest when these scopes are garbage-collected or the interpreter exits (a
    finalizer): a server, or code that builds one in-process, never leaves it behind."""

    def __init__(self, base_dir: Path | None = None, max_tasks: int = MAX_TASKS) -> None:
        if max_tasks < 1:
            raise InvalidArgument("max_tasks must be at least 1")
        self.max_tasks = max_tasks
        self._base_dir = base_dir
        self._cleanup: weakref.finalize[Any, Any] | None = None
        self._scopes: OrderedDict[str, TaskScope] = OrderedDict()

    @property
    def base_dir(self) -> Path:
        if self._base_dir is None:
            made = Path(tempfile.mkdtemp(prefix="mcpkit-serve-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, made, ignore_errors=True)
            self._base_dir = made
        return self._base_dir

    def current(self) -> TaskScope:
        return self.get(current_task.get())

    def get(self, task_id: str) -> TaskScope:
        scope = self._scopes.get(task_id)
        if scope is not None:
            self._scopes.move_to_end(task_id)
            return scope
        if len(self._scopes) >= self.max_tasks:
            self._drop_idle(task_id)
        out = self.base_dir / task_id
        out.mkdir(parents=True, exist_ok=True)
        scope = self._scopes[task_id] = TaskScope(task_id, out)
        return scope

    def _drop_idle(self, for_task: str) -> None:
        """Make room: drop the least recently used idle scope, or refuse `for_task`."""
        victim = next((s for s in self._scopes.values() if not s.busy), None)
        if victim is None:
            raise TaskLimitError(for_task, self.max_tasks)
        del self._scopes[victim.task_id]
        for job in victim.jobs.values():  # finished ones: nothing left to stop, but be sure
            stop = getattr(job, "kill_now", None)
            if stop is not None:
                stop()

    def all(self) -> list[TaskScope]:
        return list(self._scopes.values())

    def close(self) -> None:
        """Remove the temporary directory these scopes made (never a given `base_dir`)."""
        if self._cleanup is not None:
            self._cleanup()  # runs shutil.rmtree once; the finalizer is then dead
