"""`LateStart`, the one ticker that starts the HTTP app's disconnect watchers: a callback runs
once its work has lasted the delay (and not later than twice it), never after `discard`, a
failing callback does not stop the others, and an app moved to another event loop keeps
working. The app's own use is tested end to end in tests/client/test_exchange.py
(`test_a_client_gone_at_once_still_cancels_its_modern_call`)."""

from __future__ import annotations

import asyncio
import gc
import threading

import anyio
import pytest
from tests.procs import eventually

from mcpkit.transports.server.http.late_start import LateStart

pytestmark = pytest.mark.anyio

DELAY_S = 0.05


async def test_a_callback_runs_once_its_work_lasted_the_delay() -> None:
    late = LateStart(DELAY_S)
    ran: list[float] = []
    started = anyio.current_time()
    late.add(lambda: ran.append(anyio.current_time() - started))
    await eventually(lambda: len(ran) == 1)
    assert DELAY_S <= ran[0] < 10 * DELAY_S  # 2x at most, with room for a slow machine
    assert late.waiting == 0
    await anyio.sleep(3 * DELAY_S)
    assert len(ran) == 1  # once


async def test_a_discarded_callback_never_runs() -> None:
    late = LateStart(DELAY_S)
    ran: list[str] = []
    keys = [late.add(lambda: ran.append("short")) for _ in range(100)]
    kept = late.add(lambda: ran.append("long"))
    for key in keys:
        late.discard(key)
    assert late.waiting == 1
    await eventually(lambda: ran == ["long"])
    await anyio.sleep(3 * DELAY_S)
    assert ran == ["long"]
    late.discard(kept)  # discarding what already ran is harmless


async def test_callbacks_added_later_wait_their_own_delay() -> None:
    late = LateStart(DELAY_S)
    ran: dict[str, float] = {}
    late.add(lambda: ran.setdefault("first", anyio.current_time()))
    await anyio.sleep(DELAY_S * 0.5)
    second_added = anyio.current_time()
    late.add(lambda: ran.setdefault("second", anyio.current_time()))
    await eventually(lambda: len(ran) == 2)
    assert ran["first"] <= ran["second"]
    assert ran["second"] - second_added >= DELAY_S  # not at the first one's tick


async def test_a_failing_callback_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    late = LateStart(DELAY_S)
    ran: list[str] = []

    def broken() -> None:
        raise RuntimeError("boom")

    late.add(broken)
    late.add(lambda: ran.append("fine"))
    await eventually(lambda: ran == ["fine"])
    assert "a delayed start failed" in caplog.text


def test_it_keeps_working_in_another_event_loop() -> None:
    late = LateStart(DELAY_S)

    async def one_round(stop_early: bool) -> list[str]:
        ran: list[str] = []
        late.add(lambda: ran.append("ran"))
        if stop_early:
            return ran  # the loop ends with the callback (and the ticker) still waiting
        await eventually(lambda: ran == ["ran"])
        return ran

    assert asyncio.run(one_round(stop_early=True)) == []
    assert asyncio.run(one_round(stop_early=False)) == ["ran"]
    gc.collect()
    assert late.waiting == 0  # the first loop, closed, took what it waited for with it


async def test_loops_in_two_threads_each_keep_their_own_callbacks() -> None:
    """One app served by two event loops at once (two threads): neither loses the other's
    waiting callbacks."""
    late = LateStart(DELAY_S)
    ran: list[str] = []
    started = threading.Event()

    async def in_the_other_loop() -> None:
        late.add(lambda: ran.append("other"))
        started.set()
        await eventually(lambda: "other" in ran)

    other = threading.Thread(target=asyncio.run, args=(in_the_other_loop(),))
    other.start()
    try:
        assert started.wait(5)
        late.add(lambda: ran.append("here"))
        await eventually(lambda: "here" in ran)
    finally:
        other.join(5)
    assert sorted(ran) == ["here", "other"]
