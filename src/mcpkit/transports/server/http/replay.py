"""Replay buffers of legacy SSE streams, bounded in bytes: per stream, per session and in
total.

Each legacy stream keeps its events in an `EventLog` so a client that lost the connection can
GET with `Last-Event-ID` and receive the rest (spec 2025-11-25, "Resumability and
Redelivery": the id is a cursor within one stream, and only that stream's later events are
replayed). What a client can still ask for decides what is kept:

- a stream whose last event (its response) was written on a live connection that then ended
  normally is *released* `delivered_grace_s` later: the client has all of it and no later id
  exists to resume from (a resume naming it then gets 410, "send the request again"). The
  grace covers what the server cannot see: ASGI servers accept writes after a client hung
  up, so "written" may not be "received", and such a client resumes within the stream's
  `retry` (1 s);
- a resume with `Last-Event-ID` acknowledges every event up to that id: the client never asks
  for them again, so they are dropped;
- the rest is held within three byte budgets (`ReplayLimits`). Over a stream's budget its
  oldest events go (never its newest: that may be the response). Over a session's or the
  process's, finished streams go whole, oldest first, and then the oldest events of
  running streams. A stream dropped whole answers a resume with 410; a resume after trimmed
  events gets the events still held (progress and log notifications may be lost under
  memory pressure, a response never silently: its stream goes whole or not at all).

Sizes are counted as the event's bytes plus `EVENT_OVERHEAD_BYTES` (the tuple, the int and
the list slot), so a flood of tiny events is bounded too.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import anyio

from mcpkit.errors import InvalidArgument
from mcpkit.protocol import sse
from mcpkit.transports.server.http.asgi import Send

log = logging.getLogger(__name__)

DEFAULT_MAX_STREAM_REPLAY_BYTES = 4 * 1024 * 1024
"""Bytes of events one stream keeps for replay."""
DEFAULT_MAX_SESSION_REPLAY_BYTES = 16 * 1024 * 1024
"""Bytes of events all streams of one legacy session keep for replay."""
DEFAULT_MAX_TOTAL_REPLAY_BYTES = 256 * 1024 * 1024
"""Bytes of events all sessions of the app (one `ReplayBudget`) keep for replay."""
DEFAULT_DELIVERED_GRACE_S = 10.0
"""How long a stream written whole is kept after its end, for a client whose connection
broke as it ended (see the module docstring)."""
EVENT_OVERHEAD_BYTES = 96
"""What an event costs beyond its bytes (a tuple, an int, a list slot)."""


@dataclass(frozen=True)
class ReplayLimits:
    per_stream: int = DEFAULT_MAX_STREAM_REPLAY_BYTES
    per_session: int = DEFAULT_MAX_SESSION_REPLAY_BYTES
    total: int = DEFAULT_MAX_TOTAL_REPLAY_BYTES
    delivered_grace_s: float = DEFAULT_DELIVERED_GRACE_S

    def __post_init__(self) -> None:
        for name in ("per_stream", "per_session", "total"):
            if getattr(self, name) < 1:
                raise InvalidArgument(f"replay limit {name} must be at least 1 byte")
        if self.delivered_grace_s < 0:
            raise InvalidArgument("replay limit delivered_grace_s must not be negative")


class EventLog:
    """The events of one legacy SSE stream, for replay after a reconnect.

    Invariant: `events[_first:]` are the kept events, seqs strictly increasing; `size` is
    their cost. Trimming advances `_first` and compacts the list now and then, so dropping
    the oldest event is O(1) amortised."""

    def __init__(
        self,
        stream_id: str,
        owner: SessionReplay | None = None,
        max_bytes: int = DEFAULT_MAX_STREAM_REPLAY_BYTES,
    ) -> None:
        self.stream_id = stream_id
        self.owner = owner
        self.max_bytes = max_bytes
        self.events: list[tuple[int, bytes]] = []
        self._first = 0
        self.size = 0
        self.next_seq = 0
        self.done = False
        self.released = False
        self._changed = anyio.Event()

    def __len__(self) -> int:
        return len(self.events) - self._first

    def kept(self) -> list[tuple[int, bytes]]:
        return self.events[self._first :]

    def append(self, data: bytes) -> str:
        seq = self.next_seq
        self.next_seq += 1
        if not self.released:
            self.events.append((seq, data))
            cost = len(data) + EVENT_OVERHEAD_BYTES
            self.size += cost
            while self.size > self.max_bytes and len(self) > 1:
                self._drop_oldest()
            if self.owner is not None:
                self.owner.grew(self, cost)
        self._wake()
        return f"{self.stream_id}.{seq}"

    def reserve_id(self) -> str:
        """An id for an event that carries no message (the priming event)."""
        seq = self.next_seq
        self.next_seq += 1
        return f"{self.stream_id}.{seq}"

    def finish(self) -> None:
        self.done = True
        self._wake()

    def acknowledge(self, seq: int) -> None:
        """The client has every event up to `seq` (it resumed from there): drop them."""
        while len(self) and self.events[self._first][0] <= seq:
            self._drop_oldest()

    def release_soon(self) -> None:
        """The stream was written whole: release it after the grace (see the module
        docstring); the budgets may drop it sooner (finished streams go first)."""
        grace = self.owner.budget.limits.delivered_grace_s if self.owner is not None else 0.0
        if grace <= 0 or self.released:
            self.release()
        else:
            asyncio.get_running_loop().call_later(grace, self.release)

    def release(self) -> None:
        """Every event reached the client and it cannot ask for any again (or the budgets
        dropped the stream whole): drop them all and keep no more (`append` still numbers
        events, for a stream still being written; a resume from it gets 410)."""
        self.released = True
        self.clear()
        if self.owner is not None:
            self.owner.forget(self)

    def clear(self) -> None:
        freed = self.size
        self.events = []
        self._first = 0
        self.size = 0
        if self.owner is not None and freed:
            self.owner.shrank(freed)

    def drop_oldest(self) -> int:
        """Drop the oldest kept event; the bytes freed (0 if there was none)."""
        return self._drop_oldest() if len(self) else 0

    def _drop_oldest(self) -> int:
        _seq, data = self.events[self._first]
        self.events[self._first] = (_seq, b"")  # free the bytes now, compact later
        self._first += 1
        if self._first > 64 and self._first * 2 > len(self.events):
            del self.events[: self._first]
            self._first = 0
        cost = len(data) + EVENT_OVERHEAD_BYTES
        self.size -= cost
        if self.owner is not None:
            self.owner.shrank(cost)
        return cost

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def follow(
        self, after: int, send: Send, on_sent: Callable[[int], None] | None = None
    ) -> None:
        """Send every kept event after seq `after`, then new ones until the stream is done;
        `on_sent(seq)` is told of each event sent."""
        while True:
            # Seqs only grow, so the first event after `after` is found by bisection.
            start = bisect.bisect_right(
                self.events, after, lo=self._first, key=lambda event: event[0]
            )
            for seq, data in self.events[start:]:
                await send(
                    {
                        "type": "http.response.body",
                        "more_body": True,
                        "body": sse.encode_event(data, id=f"{self.stream_id}.{seq}"),
                    }
                )
                after = seq
                if on_sent is not None:
                    on_sent(seq)
            if self.done:
                return
            await self._changed.wait()


class ReplayBudget:
    """The byte budget shared by every session of an app (see the module docstring): one
    per process unless several apps are given the same one."""

    def __init__(self, limits: ReplayLimits | None = None) -> None:
        self.limits = limits or ReplayLimits()
        self.size = 0
        self._sessions: OrderedDict[SessionReplay, None] = OrderedDict()
        """Sessions holding events, least recently grown first."""

    def session(self) -> SessionReplay:
        return SessionReplay(self)

    def grew(self, session: SessionReplay, cost: int, keep: EventLog) -> None:
        self.size += cost
        self._sessions[session] = None
        self._sessions.move_to_end(session)
        if self.size <= self.limits.total:
            return
        for other in list(self._sessions):
            if self.size <= self.limits.total:
                return
            other.shed(lambda: self.size <= self.limits.total, keep)
        if self.size > self.limits.total:
            log.warning("replay buffers over their total of %d bytes", self.limits.total)

    def shrank(self, cost: int) -> None:
        self.size -= cost

    def forget(self, session: SessionReplay) -> None:
        self._sessions.pop(session, None)


class SessionReplay:
    """The replay buffers of one legacy session: its streams' logs by id."""

    def __init__(self, budget: ReplayBudget) -> None:
        self.budget = budget
        self.logs: OrderedDict[str, EventLog] = OrderedDict()
        self.size = 0

    def new_log(self, stream_id: str) -> EventLog:
        replaced = self.logs.get(stream_id)
        if replaced is not None:
            replaced.release()
        event_log = EventLog(stream_id, self, self.budget.limits.per_stream)
        self.logs[stream_id] = event_log
        return event_log

    def grew(self, event_log: EventLog, cost: int) -> None:
        self.size += cost
        limit = self.budget.limits.per_session
        if self.size > limit:
            self.shed(lambda: self.size <= limit, event_log)
        self.budget.grew(self, cost, event_log)

    def shrank(self, cost: int) -> None:
        self.size -= cost
        self.budget.shrank(cost)

    def forget(self, event_log: EventLog) -> None:
        if self.logs.get(event_log.stream_id) is event_log:
            del self.logs[event_log.stream_id]

    def shed(self, enough: Callable[[], bool], keep: EventLog) -> None:
        """Free bytes until `enough()`: finished streams whole (oldest first), then the
        oldest events of running ones; never the newest event of `keep` (being written)."""
        for event_log in list(self.logs.values()):
            if enough():
                return
            if event_log.done and event_log is not keep:
                log.info("replay buffers full: dropping finished stream %s", event_log.stream_id)
                event_log.release()
        for event_log in list(self.logs.values()):
            while not enough() and len(event_log) > (1 if event_log is keep else 0):
                event_log.drop_oldest()
            if enough():
                return

    def keep_at_most(self, count: int, spare: EventLog) -> None:
        """At most `count` logs: the oldest go first (`spare`, the standalone stream's, stays)."""
        for event_log in list(self.logs.values()):
            if len(self.logs) <= count:
                return
            if event_log is not spare:
                event_log.release()

    def close(self) -> None:
        """The session ended: free everything."""
        for event_log in list(self.logs.values()):
            event_log.release()
        self.budget.forget(self)
