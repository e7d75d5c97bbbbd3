"""The task store's caps (issue 20 §2, one caller cannot starve the others): per principal
well below the global one; running tasks are never dropped; a refusal is -32000 naming the
limit and happens only when the caller's own tasks, or the whole store, are all running."""

from __future__ import annotations

import secrets

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.protocol import errors
from mcpkit.server.tasks import COMPLETED, Task, TaskStore

PRINCIPALS = ("alice", "bob", "carol", "")


def _task(principal: str) -> Task:
    return Task(secrets.token_hex(8), principal, ttl_ms=600_000, poll_interval_ms=100)


# An operation: (True, principal) creates a task; (False, index) finishes a kept task.
operations = st.lists(
    st.one_of(
        st.tuples(st.just(True), st.sampled_from(PRINCIPALS)),
        st.tuples(st.just(False), st.integers(min_value=0, max_value=50)),
    ),
    max_size=120,
)


@settings(max_examples=150, deadline=None)
@given(ops=operations, per_principal=st.integers(1, 6), extra=st.integers(0, 8))
def test_task_store_caps_hold(ops: list[tuple[bool, object]], per_principal: int,
                              extra: int) -> None:
    store = TaskStore(max_tasks=per_principal + extra, max_tasks_per_principal=per_principal)
    for creates, arg in ops:
        if not creates:
            kept = list(store.tasks.values())
            if kept:
                kept[int(arg) % len(kept)].set_status(COMPLETED)  # type: ignore[call-overload]
            continue
        principal = str(arg)
        running_before = {t.task_id for t in store.tasks.values() if not t.terminal}
        own = [t for t in store.tasks.values() if t.principal == principal]
        task = _task(principal)
        try:
            store.register(task)
        except errors.McpError as refused:
            assert refused.code == errors.SERVER_BUSY
            assert refused.data["limit"] in (per_principal, store.max_tasks)
            # refused only when nothing finished could make room
            own_full = len(own) >= per_principal and all(not t.terminal for t in own)
            all_running = all(not t.terminal for t in store.tasks.values())
            assert own_full or (len(store.tasks) >= store.max_tasks and all_running)
        else:
            assert store.tasks[task.task_id] is task
        counts: dict[str, int] = {}
        for kept_task in store.tasks.values():
            counts[kept_task.principal] = counts.get(kept_task.principal, 0) + 1
        assert len(store.tasks) <= store.max_tasks
        assert all(count <= per_principal for count in counts.values())
        # a running task is never dropped to make room
        assert running_before <= set(store.tasks)


def test_one_principal_cannot_take_every_slot() -> None:
    store = TaskStore(max_tasks=10, max_tasks_per_principal=3)
    for _ in range(3):
        store.register(_task("hog"))
    try:
        store.register(_task("hog"))
    except errors.McpError as refused:
        assert refused.code == errors.SERVER_BUSY
        assert "limit is 3" in refused.message
    else:
        raise AssertionError("a fourth running task of one principal was kept")
    store.register(_task("other"))  # another caller is still served
    assert sum(t.principal == "other" for t in store.tasks.values()) == 1
