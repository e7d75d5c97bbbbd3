"""`LateStart`: run a callback for each piece of work still going after a delay - one ticker
for all of them instead of a timer each.

    late = LateStart(0.05)
    key = late.add(start_watching)   # start_watching() runs if the work lasts 0.05-0.1 s
    ...
    late.discard(key)                # the work ended first: it never runs

The HTTP app uses it to start watching a request's connection for a disconnect only when
the call runs long enough to be worth it. A timer per request (`loop.call_later` and its
cancel) cost more CPU than the rest of what a request's watching does, on uvloop above all;
here a request costs two dict operations, and the ticker runs only while something waits.
A callback runs between `delay_s` and twice that after `add`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable

log = logging.getLogger(__name__)


class LateStart:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._waiting: dict[int, tuple[float, Callable[[], None]]] = {}
        self._keys = itertools.count()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticker: asyncio.TimerHandle | None = None

    def add(self, callback: Callable[[], None]) -> int:
        """Run `callback` (in the running loop) once `delay_s` has passed, unless
        `discard`ed first; returns the key for `discard`."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # first use, or the app now serves in another loop
            self._loop, self._ticker = loop, None
            self._waiting.clear()  # what the old loop waited for died with it
        key = next(self._keys)
        self._waiting[key] = (loop.time() + self.delay_s, callback)
        if self._ticker is None:
            self._ticker = loop.call_later(self.delay_s, self._tick)
        return key

    def discard(self, key: int) -> None:
        self._waiting.pop(key, None)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _tick(self) -> None:
        loop = self._loop
        assert loop is not None
        now = loop.time()
        due = [key for key, (when, _) in self._waiting.items() if when <= now]
        for key in due:
            _, callback = self._waiting.pop(key)
            try:
                callback()
            except Exception:  # one bad callback must not stop the others
                log.exception("a delayed start failed")
        self._ticker = loop.call_later(self.delay_s, self._tick) if self._waiting else None
