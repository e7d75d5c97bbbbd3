"""Catalog refreshes are shared fairly between users (hub/refresh_slots.py).

Attack: mallory registers upstreams that accept a connection and never answer (a listening
socket nobody accepts from), with long timeouts, and refreshes them all at once. With one
process-wide pool of refresh slots, alice's refresh of a healthy upstream then waited for
mallory's timeouts. Now mallory holds at most her per-user share, and alice's refresh is
answered while mallory's still hang.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.hub.hub_helpers import UPSTREAMS, Hub, Upstream, echo_server, fresh_user, running_hub

from mcpkit.hub.refresh_slots import RefreshSlots

pytestmark = pytest.mark.anyio

TARPIT_TIMEOUT_S = 5.0
"""connect_timeout_s and call_timeout_s of mallory's upstreams: how long each refresh hangs."""
ANSWER_BOUND_S = 3.0
"""Alice's refresh must be answered within this while mallory's hang (a liveness bound)."""


@pytest.fixture
def tarpit() -> Iterator[str]:
    """The URL of a server that takes connections (the kernel's backlog) and never answers."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    with running_hub(url, allow_private_upstreams=True, max_concurrent_refreshes=4,
                     max_refreshes_per_user=2) as running:
        yield running


@pytest.fixture
def echo() -> Iterator[Upstream]:
    with echo_server() as upstream:
        yield upstream


async def test_one_users_hanging_refreshes_do_not_hold_everyone_elses(
        hub: Hub, tarpit: str, echo: Upstream) -> None:
    _, mallory = await fresh_user(hub)
    _, alice = await fresh_user(hub)
    traps = [await mallory.create_upstream(
        name=f"trap{i}", url=tarpit, connect_timeout_s=TARPIT_TIMEOUT_S,
        call_timeout_s=TARPIT_TIMEOUT_S) for i in range(4)]
    healthy = await alice.create_upstream(name="echo", url=echo.url)
    statuses: list[int] = []

    async def refresh_trap(upstream_id: str) -> None:
        reply = await mallory.post(f"{UPSTREAMS}/{upstream_id}/refresh")
        statuses.append(reply.status)

    async with anyio.create_task_group() as tg:
        for trap in traps:
            tg.start_soon(refresh_trap, trap["id"])
        await anyio.sleep(0.5)  # mallory's refreshes hold (or wait for) their slots
        with anyio.fail_after(ANSWER_BOUND_S):
            answered = await alice.post(f"{UPSTREAMS}/{healthy['id']}/refresh")
        assert answered.status == 200, answered.text
        assert not statuses, "mallory's refreshes should still be hanging"
    assert statuses == [502] * len(traps)  # each failed on its own timeout, and said so


@settings(max_examples=60, deadline=None)
@given(plan=st.lists(st.integers(min_value=0, max_value=3), min_size=1, max_size=24),
       total=st.integers(min_value=1, max_value=6), per_user=st.integers(min_value=1,
                                                                         max_value=4))
def test_no_user_holds_more_than_its_share_and_the_table_empties(
        plan: list[int], total: int, per_user: int) -> None:
    """Any mix of users' refreshes: never more than `total` run, never more than `per_user`
    of one user, all of them finish, and the per-user table is empty afterwards."""
    slots = RefreshSlots(total, per_user)
    running: dict[int, int] = {}
    peak = {"all": 0, "user": 0}

    async def refresh(user: int) -> None:
        async with slots.for_user(user):
            running[user] = running.get(user, 0) + 1
            peak["all"] = max(peak["all"], sum(running.values()))
            peak["user"] = max(peak["user"], running[user])
            await anyio.lowlevel.checkpoint()
            await anyio.lowlevel.checkpoint()
            running[user] -= 1

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for user in plan:
                tg.start_soon(refresh, user)

    anyio.run(main)
    assert peak["all"] <= total
    assert peak["user"] <= min(per_user, total)
    assert slots.users_in_flight == 0
