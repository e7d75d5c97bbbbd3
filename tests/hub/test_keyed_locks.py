"""KeyedLocks: one task per key at a time, and no entry left behind for a key no one uses."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.hub.keyed_locks import KeyedLocks


@pytest.mark.anyio
async def test_one_holder_per_key_and_other_keys_run_alongside() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    inside: dict[str, int] = {"a": 0, "b": 0}
    most: dict[str, int] = {"a": 0, "b": 0}

    async def work(key: str) -> None:
        async with locks.hold(key):
            inside[key] += 1
            most[key] = max(most[key], inside[key])
            await anyio.sleep(0.001)
            inside[key] -= 1

    async with anyio.create_task_group() as tasks:
        for index in range(20):
            tasks.start_soon(work, "ab"[index % 2])
        await anyio.lowlevel.checkpoint()
        assert len(locks) == 2  # both keys held or waited for while the tasks run
    assert most == {"a": 1, "b": 1}
    assert len(locks) == 0


@pytest.mark.anyio
async def test_an_entry_is_gone_after_an_error_or_a_cancellation() -> None:
    locks: KeyedLocks[int] = KeyedLocks()
    try:
        async with locks.hold(1):
            raise RuntimeError("inside")
    except RuntimeError:
        pass
    with anyio.move_on_after(0.01):
        async with locks.hold(2):
            await anyio.sleep(1)
    assert len(locks) == 0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=5), max_size=40))
def test_any_sequence_of_users_leaves_no_entry(keys: list[int]) -> None:
    async def run() -> None:
        locks: KeyedLocks[int] = KeyedLocks()

        async def use(key: int) -> None:
            async with locks.hold(key):
                await anyio.lowlevel.checkpoint()

        async with anyio.create_task_group() as tasks:
            for key in keys:
                tasks.start_soon(use, key)
        assert len(locks) == 0

    anyio.run(run)
