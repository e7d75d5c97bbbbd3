"""`AuditBuffer` against a real SQLite store: batches, what waits for the next round, the
drain at shutdown, a refusing store, the bound on what may wait."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import anyio
import anyio.lowlevel
import pytest

from mcpkit.hub.router.audit import AuditBuffer
from mcpkit.hub.store import AuditEntry, AuditLog, Store, StoreUnavailable

pytestmark = pytest.mark.anyio


class CountingLog:
    """The store's audit log, counting its writes. Each write also adds `arrivals_per_write`
    entries to the buffer (as calls finishing meanwhile do) until `arrivals_left` are spent."""

    def __init__(self, real: AuditLog, user_id: int) -> None:
        self.real = real
        self.user_id = user_id
        self.writes: list[int] = []
        self.buffer: AuditBuffer | None = None
        self.arrivals_per_write = 0
        self.arrivals_left = 1_000_000
        self.refuse = False

    async def record_many(self, entries: Sequence[AuditEntry]) -> None:
        self.writes.append(len(entries))
        if self.buffer is not None:
            arriving = min(self.arrivals_per_write, self.arrivals_left)
            self.arrivals_left -= arriving
            for _ in range(arriving):
                self.buffer.add(entry(self.user_id, "arrived"))
        await anyio.lowlevel.checkpoint()
        if self.refuse:
            raise StoreUnavailable("the database is unavailable (OperationalError)")
        await self.real.record_many(entries)


def entry(user_id: int, tool: str = "echo") -> AuditEntry:
    return AuditEntry(user_id, None, "up", tool, 1.5, "ok")


async def counted(store: Store, **options: int) -> tuple[AuditBuffer, CountingLog, int]:
    user = await store.users.create("alice")
    counting = CountingLog(store.audit, user.id)
    store.audit = counting  # type: ignore[assignment]
    buffer = AuditBuffer(store, **options)  # type: ignore[arg-type]
    counting.buffer = buffer
    return buffer, counting, user.id


async def test_a_flush_writes_what_was_waiting_and_leaves_later_arrivals_for_the_next_round(
    sqlite_store: Store,
) -> None:
    buffer, log, user = await counted(sqlite_store)
    for _ in range(3):
        buffer.add(entry(user))
    log.arrivals_per_write, log.arrivals_left = 2, 10
    await buffer.flush()
    # one transaction: the two entries added during it wait (a flush that chased them
    # would write every few calls for as long as calls keep coming)
    assert log.writes == [3]
    assert buffer.pending == 2
    log.arrivals_per_write = 0
    await buffer.flush()
    assert log.writes == [3, 2] and buffer.pending == 0
    assert len(await log.real.recent(user)) == 5


async def test_batches_are_at_most_batch_entries(sqlite_store: Store) -> None:
    buffer, log, user = await counted(sqlite_store, batch=200)
    for _ in range(450):
        buffer.add(entry(user))
    await buffer.flush()
    assert log.writes == [200, 200, 50]
    assert len(await log.real.recent(user, limit=1000)) == 450


async def test_shutdown_writes_everything_including_late_arrivals(sqlite_store: Store) -> None:
    buffer, log, user = await counted(sqlite_store, interval_s=3600)
    async with anyio.create_task_group() as tg:
        tg.start_soon(buffer.run)
        for _ in range(4):
            buffer.add(entry(user))
        await anyio.sleep(0.01)
        assert log.writes == []  # nothing written before the interval or a full batch
        log.arrivals_per_write, log.arrivals_left = 1, 3
        tg.cancel_scope.cancel()
    # the drain went on while entries arrived during its writes (one per write, 3 in all)
    assert buffer.pending == 0
    assert log.writes == [4, 1, 1, 1]
    rows = await log.real.recent(user, limit=1000)
    assert len(rows) == sum(log.writes)


async def test_a_full_batch_wakes_the_writer_before_the_interval(sqlite_store: Store) -> None:
    buffer, log, user = await counted(sqlite_store, interval_s=3600, batch=10)
    async with anyio.create_task_group() as tg:
        tg.start_soon(buffer.run)
        for _ in range(10):
            buffer.add(entry(user))
        with anyio.fail_after(5):
            while not log.writes:  # noqa: ASYNC110 - polling the log the writer writes to
                await anyio.sleep(0.01)
        assert log.writes == [10]
        tg.cancel_scope.cancel()


async def test_a_refused_batch_is_logged_and_dropped_and_later_ones_are_written(
    sqlite_store: Store, caplog: pytest.LogCaptureFixture,
) -> None:
    buffer, log, user = await counted(sqlite_store)
    buffer.add(entry(user, "lost"))
    log.refuse = True
    with caplog.at_level(logging.WARNING, logger="mcpkit.hub.router.audit"):
        await buffer.flush()
    assert "dropping 1 audit entries" in caplog.text and buffer.pending == 0
    log.refuse = False
    buffer.add(entry(user, "kept"))
    await buffer.flush()
    assert [row.tool for row in await log.real.recent(user)] == ["kept"]


async def test_what_may_wait_is_bounded(sqlite_store: Store) -> None:
    buffer, _log, user = await counted(sqlite_store, max_pending=5)
    for _ in range(8):
        buffer.add(entry(user))
    assert buffer.pending == 5 and buffer.dropped == 3
