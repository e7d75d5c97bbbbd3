"""`AuditBuffer`: the audit log of tool calls, written off the request path.

A call appends its entry (user, upstream, tool, duration, outcome - never arguments or
results) and returns; entries are written in batches every `interval_s` or once `batch`
are waiting, in one transaction. Shutdown writes what is left. If the database refuses a
batch, it is logged and dropped (an audit hiccup must not fail calls or grow memory
without bound: at most `max_pending` entries wait).
"""

from __future__ import annotations

import logging

import anyio

from mcpkit.hub.store import AuditEntry, Store

log = logging.getLogger(__name__)


class AuditBuffer:
    def __init__(
        self, store: Store, *, interval_s: float = 1.0, batch: int = 200, max_pending: int = 10_000
    ) -> None:
        self._store = store
        self._interval_s = interval_s
        self._batch = batch
        self._max_pending = max_pending
        self._pending: list[AuditEntry] = []
        self._wake = anyio.Event()
        self.dropped = 0

    @property
    def pending(self) -> int:
        """Entries waiting to be written."""
        return len(self._pending)

    def add(self, entry: AuditEntry) -> None:
        if len(self._pending) >= self._max_pending:
            self.dropped += 1
            return
        self._pending.append(entry)
        if len(self._pending) >= self._batch:
            self._wake.set()

    async def run(self) -> None:
        """Write batches until cancelled; then write the rest (shielded)."""
        try:
            while True:
                with anyio.move_on_after(self._interval_s):
                    await self._wake.wait()
                self._wake = anyio.Event()
                await self.flush()
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(10.0):
                await self.flush(until_empty=True)

    async def flush(self, *, until_empty: bool = False) -> None:
        """Write what is waiting now, in batches of at most `batch`.

        Entries added meanwhile wait for the next round: a loop that wrote until the list
        was empty never slept while calls kept coming, and wrote a transaction of a few
        rows every few calls instead of one of hundreds a second. `until_empty` (shutdown)
        writes those too."""
        while self._pending:
            waiting, self._pending = self._pending, []
            for start in range(0, len(waiting), self._batch):
                await self._write(waiting[start:start + self._batch])
            if not until_empty:
                return

    async def _write(self, entries: list[AuditEntry]) -> None:
        try:
            await self._store.audit.record_many(entries)
        except Exception as error:
            log.warning("dropping %d audit entries: the store refused them (%s)",
                        len(entries), error)
