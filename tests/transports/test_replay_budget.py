"""Replay buffers bounded in bytes (`replay.py`), in memory and property-based: whatever the
sequence of appends, finishes, releases and acknowledgements over several sessions and
streams, each stream, each session and the whole budget stay within their limits (give or
take the one newest event a stream being written keeps), and a finished stream keeps its
response unless it is dropped whole. The same buffers are measured on real processes in
test_memory_bounds.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.procs import eventually

from mcpkit.transports.server.http.replay import (
    EVENT_OVERHEAD_BYTES,
    ReplayBudget,
    ReplayLimits,
    SessionReplay,
)

LIMITS = ReplayLimits(per_stream=4_000, per_session=10_000, total=25_000)
MAX_EVENT = 3_000

actions = st.lists(
    st.tuples(
        st.sampled_from(["append", "append", "append", "finish", "release", "ack", "open"]),
        st.integers(0, 3),  # session
        st.integers(0, 3),  # stream within the session
        st.integers(0, MAX_EVENT),  # event size
    ),
    max_size=200,
)


@settings(max_examples=150, deadline=None)
@given(actions)
def test_every_budget_holds_whatever_happens(steps: list[tuple[str, int, int, int]]) -> None:
    budget = ReplayBudget(LIMITS)
    sessions = [budget.session() for _ in range(4)]
    slack = MAX_EVENT + EVENT_OVERHEAD_BYTES  # the newest event of the stream being written
    for action, s, n, size in steps:
        session = sessions[s]
        event_log = session.logs.get(str(n))
        if action == "open" or event_log is None:
            event_log = session.new_log(str(n))
        if action == "append" and not event_log.done:
            event_log.append(b"x" * size)
        elif action == "finish":
            event_log.finish()
        elif action == "release":
            event_log.release()
        elif action == "ack" and event_log.next_seq:
            event_log.acknowledge(size % event_log.next_seq)
        for one in sessions:
            for kept in one.logs.values():
                assert kept.size == sum(len(d) + EVENT_OVERHEAD_BYTES for _, d in kept.kept())
                assert kept.size <= LIMITS.per_stream or len(kept) == 1
            assert one.size == sum(kept.size for kept in one.logs.values())
            assert one.size <= LIMITS.per_session + slack
        assert budget.size == sum(one.size for one in sessions)
        assert budget.size <= LIMITS.total + slack


def test_a_stream_keeps_its_newest_event_even_over_its_limit() -> None:
    session = ReplayBudget(LIMITS).session()
    event_log = session.new_log("1")
    for _ in range(5):
        event_log.append(b"p" * 1_000)
    event_log.append(b"r" * 5_000)  # a response larger than the stream's budget
    assert [data[:1] for _, data in event_log.kept()] == [b"r"]
    assert event_log.kept()[0][0] == 5


def test_finished_streams_go_whole_before_running_ones_are_trimmed() -> None:
    session = ReplayBudget(LIMITS).session()
    finished = session.new_log("1")
    finished.append(b"a" * 3_000)
    finished.finish()
    running = session.new_log("2")
    running.append(b"b" * 3_000)
    other = session.new_log("3")
    other.append(b"c" * 3_000)
    other.append(b"d" * 800)  # over 10,000 bytes: the finished stream goes first
    assert "1" not in session.logs and finished.size == 0
    assert len(running) == 1 and len(other) == 2


def test_release_and_acknowledge_free_what_the_client_cannot_ask_for() -> None:
    budget = ReplayBudget(LIMITS)
    session = budget.session()
    event_log = session.new_log("1")
    ids = [event_log.append(b"e" * 100) for _ in range(10)]
    assert ids[3] == "1.3"
    event_log.acknowledge(3)
    assert [seq for seq, _ in event_log.kept()] == list(range(4, 10))
    event_log.finish()
    event_log.release()
    assert "1" not in session.logs and session.size == 0 and budget.size == 0
    event_log.append(b"late")  # still numbered, no longer kept
    assert len(event_log) == 0 and event_log.next_seq == 11


def test_the_total_budget_takes_from_the_least_recently_written_session() -> None:
    budget = ReplayBudget(ReplayLimits(per_stream=4_000, per_session=8_000, total=9_000))
    quiet, busy = budget.session(), budget.session()
    quiet.new_log("1").append(b"q" * 3_000)
    for index in range(3):
        busy.new_log(str(index)).append(b"b" * 2_000)
    assert budget.size <= 9_000
    assert quiet.size == 0 and busy.size == 3 * (2_000 + EVENT_OVERHEAD_BYTES)


def test_closing_a_session_frees_everything() -> None:
    budget = ReplayBudget(LIMITS)
    session: SessionReplay = budget.session()
    session.new_log("1").append(b"x" * 2_000)
    session.close()
    assert budget.size == 0 and not session.logs


@pytest.mark.anyio
async def test_a_stream_written_whole_is_released_after_the_grace() -> None:
    budget = ReplayBudget(ReplayLimits(delivered_grace_s=0.05))
    session = budget.session()
    event_log = session.new_log("1")
    event_log.append(b"response")
    event_log.finish()
    event_log.release_soon()
    assert "1" in session.logs  # a client whose connection broke can still resume
    await eventually(lambda: "1" not in session.logs)
    assert budget.size == 0 and event_log.released


@pytest.mark.parametrize("field", ["per_stream", "per_session", "total"])
def test_limits_must_be_positive(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        ReplayLimits(**{field: 0})
