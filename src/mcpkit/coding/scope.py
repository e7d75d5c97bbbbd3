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
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_TASK = "default"
TASK_ID = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
MAX_TASKS = 256
"""Task scopes kept at once; the least recently used is dropped (its jobs stopped)."""

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
    """Background jobs by id (owned by `shell.py`)."""


class Scopes:
    """All task scopes of one server, with their output directories under `base_dir`."""

    def __init__(self, base_dir: Path | None = None) -> None:
        self._own_base = base_dir is None
        self.base_dir = base_dir or Path(tempfile.mkdtemp(prefix="mcpkit-serve-"))
        self._scopes: OrderedDict[str, TaskScope] = OrderedDict()

    def current(self) -> TaskScope:
        return self.get(current_task.get())

    def get(self, task_id: str) -> TaskScope:
        scope = self._scopes.get(task_id)
        if scope is None:
            out = self.base_dir / task_id
            out.mkdir(parents=True, exist_ok=True)
            scope = self._scopes[task_id] = TaskScope(task_id, out)
            while len(self._scopes) > MAX_TASKS:
                _, dropped = self._scopes.popitem(last=False)
                for job in dropped.jobs.values():
                    stop = getattr(job, "kill_now", None)
                    if stop is not None:
                        stop()
        else:
            self._scopes.move_to_end(task_id)
        return scope

    def all(self) -> list[TaskScope]:
        return list(self._scopes.values())

    def close(self) -> None:
        if self._own_base:
            shutil.rmtree(self.base_dir, ignore_errors=True)
