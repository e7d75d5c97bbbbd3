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
A callback runs between `delay_s` and twice that after `add`, in the loop that added it:
an app served by several event loops (threads) keeps one ticker per loop.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import weakref
from collections.abc import Callable

log = logging.getLogger(__name__)


class _Ticker:
    """One loop's waiting callbacks, and whether a tick is pending. It keeps no reference
    to its loop (the loop is the weak key it is found by), so a closed loop goes away."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.waiting: dict[int, tuple[float, Callable[[], None]]] = {}
        self.ticking = False

    def add(self, loop: asyncio.AbstractEventLoop, key: int,
            callback: Callable[[], None]) -> None:
        self.waiting[key] = (loop.time() + self.delay_s, callback)
        if not self.ticking:
            self.ticking = True
            loop.call_later(self.delay_s, self.tick)

    def tick(self) -> None:
        loop = asyncio.get_running_loop()
        now = loop.time()
        due = [key for key, (when, _) in self.waiting.items() if when <= now]
        for key in due:
            _, callback = self.waiting.pop(key)
            try:
                callback()
            except Exception:  # one bad callback must not stop the others
                log.exception("a delayed start failed")
        self.ticking = bool(self.waiting)
        if self.ticking:
            loop.call_later(self.delay_s, self.tick)


class LateStart:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self._keys = itertools.count()
        self._tickers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Ticker] = (
            weakref.WeakKeyDictionary())

    def add(self, callback: Callable[[], None]) -> int:
        """Run `callback` in the running loop once `delay_s` has passed, unless
        `discard`ed first (in the same loop); returns the key for `discard`."""
        loop = asyncio.get_running_loop()
        ticker = self._tickers.get(loop)
        if ticker is None:
            ticker = self._tickers[loop] = _Ticker(self.delay_s)
        key = next(self._keys)
        ticker.add(loop, key, callback)
        return key

    def discard(self, key: int) -> None:
        ticker = self._tickers.get(asyncio.get_running_loop())
        if ticker is not None:
            ticker.waiting.pop(key, None)

    @property
    def waiting(self) -> int:
        """Callbacks not yet run, in every loop."""
        return sum(len(ticker.waiting) for ticker in list(self._tickers.values()))
