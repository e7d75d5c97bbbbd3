"""On a pytest-timeout, list the running event loop's tasks with their stacks as well.

pytest-timeout (signal method) prints every thread's stack, but a hang in asyncio is usually
one task that never finishes - e.g. a leftover task ignoring cancellation while the runner
closes - and the main thread's stack only shows the loop. The timeout handler runs in the main
thread, inside the loop, so the loop's tasks are still there to list.
"""

from __future__ import annotations

import asyncio
import io
from typing import Any

import pytest_timeout

MAX_FRAMES = 30


def install() -> None:
    """Wrap `pytest_timeout.dump_stacks` once (idempotent)."""
    original = pytest_timeout.dump_stacks
    if getattr(original, "_with_tasks", False):
        return

    def dump_stacks_and_tasks(terminal: Any) -> None:
        original(terminal)
        dump_tasks(terminal)

    dump_stacks_and_tasks._with_tasks = True  # type: ignore[attr-defined]
    pytest_timeout.dump_stacks = dump_stacks_and_tasks


def dump_tasks(terminal: Any) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # the timeout fired outside an event loop
    tasks = asyncio.all_tasks(loop)
    terminal.sep("~", title=f"{len(tasks)} asyncio task(s) of the running loop")
    for task in tasks:
        text = io.StringIO()
        task.print_stack(limit=MAX_FRAMES, file=text)
        terminal.write(f"{task!r}\n{text.getvalue()}\n")
