"""A stop condition for walks that run in a worker thread, and the way to run them there:
the thread checks the `Deadline` as it goes; a cancelled call sets it and returns at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.to_thread


class Deadline:
    """A stop condition for walks running in a thread: cancelled, or out of time."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self.cancelled = threading.Event()
        self.timed_out = False

    def __call__(self) -> bool:
        if self.cancelled.is_set():
            return True
        if time.monotonic() > self.at:
            self.timed_out = True
            return True
        return False


async def in_thread(fn: Callable[[], Any], deadline: Deadline) -> Any:
    """Run a walk in a worker thread; on cancellation tell it to stop and return at once."""
    try:
        return await anyio.to_thread.run_sync(fn, abandon_on_cancel=True)
    finally:
        deadline.cancelled.set()
