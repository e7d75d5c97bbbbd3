"""server/admission.py's bookkeeping: a connection and a caller never exceed their limits,
every admission is given back exactly once, and a caller with nothing running holds no
entry (the table is as big as the callers with work in flight, whatever the traffic)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mcpkit.protocol import errors
from mcpkit.server.admission import Admission
from mcpkit.server.connection import Connection

CALLERS = ("alice", "bob", None)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 5)), max_size=200),
    per_connection=st.integers(1, 6),
    per_caller=st.integers(1, 10),
)
def test_admission_counts_hold(steps: list[tuple[bool, int]], per_connection: int,
                               per_caller: int) -> None:
    admission = Admission(max_per_connection=per_connection, max_per_caller=per_caller)
    connections = [Connection(caller=CALLERS[i % 3]) for i in range(6)]
    held = [0] * 6  # the model: admissions not yet given back, per connection
    for admit, index in steps:
        connection = connections[index]
        if admit:
            caller_running = sum(h for c, h in zip(connections, held, strict=True)
                                 if c.caller == connection.caller)
            refused = admission.admit(connection)
            expect_room = held[index] < per_connection and (
                connection.caller is None or caller_running < per_caller)
            assert (refused is None) == expect_room
            if refused is None:
                held[index] += 1
            else:
                assert refused.code == errors.SERVER_BUSY
                assert refused.data["limit"] in (per_connection, per_caller)
        elif held[index]:
            admission.release(connection)
            held[index] -= 1
        assert [c.running for c in connections] == held
        for caller in ("alice", "bob"):
            running = sum(h for c, h in zip(connections, held, strict=True) if c.caller == caller)
            assert admission.running(caller) == running <= per_caller
            assert (caller in admission._by_caller) == (running > 0)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(st.tuples(st.booleans(), st.integers(0, 5), st.integers(0, 60)),
                   max_size=200),
    per_caller_bytes=st.integers(1, 100),
    total_bytes=st.integers(1, 200),
)
def test_admission_bytes_hold(steps: list[tuple[bool, int, int]], per_caller_bytes: int,
                              total_bytes: int) -> None:
    """The params' footprints: a caller (or a caller-less connection) holds at most its
    budget, the server at most its own, unless a lone request that fits nothing else runs
    by itself; every byte charged is given back; empty callers leave no entry."""
    admission = Admission(max_per_connection=1000, max_per_caller=1000,
                          max_bytes_per_caller=per_caller_bytes, max_bytes=total_bytes)
    connections = [Connection(caller=CALLERS[i % 3]) for i in range(6)]
    held: list[list[int]] = [[] for _ in range(6)]  # the model: footprints admitted

    def owner_bytes(index: int) -> int:
        caller = connections[index].caller
        if caller is None:
            return sum(held[index])
        return sum(sum(h) for c, h in zip(connections, held, strict=True) if c.caller == caller)

    for admit, index, footprint in steps:
        connection = connections[index]
        if admit:
            mine, everyone = owner_bytes(index), sum(sum(h) for h in held)
            refused = admission.admit(connection, footprint)
            expect_room = (not mine or mine + footprint <= per_caller_bytes) and (
                not everyone or everyone + footprint <= total_bytes)
            assert (refused is None) == expect_room
            if refused is None:
                held[index].append(footprint)
            else:
                assert refused.code == errors.SERVER_BUSY
                assert refused.data["limit"] in (per_caller_bytes, total_bytes)
        elif held[index]:
            admission.release(connection, held[index].pop())
        assert admission.bytes_running == sum(sum(h) for h in held)
        assert [c.running_bytes for c in connections] == [sum(h) for h in held]
        for caller in ("alice", "bob"):
            in_use = sum(sum(h) for c, h in zip(connections, held, strict=True)
                         if c.caller == caller)
            assert (caller in admission._bytes_by_caller) == (in_use > 0)


def test_a_lone_request_always_fits_its_callers_byte_budget() -> None:
    """The codec refuses params past MAX_PARAMS_FOOTPRINT; anything it lets through must be
    admitted when its caller has nothing running, or a legit large call could never run."""
    from mcpkit.protocol.jsonrpc import MAX_PARAMS_FOOTPRINT
    from mcpkit.server.admission import DEFAULT_MAX_BYTES, DEFAULT_MAX_BYTES_PER_CALLER

    assert MAX_PARAMS_FOOTPRINT <= DEFAULT_MAX_BYTES_PER_CALLER <= DEFAULT_MAX_BYTES
    admission = Admission()
    assert admission.admit(Connection(caller="alice"), MAX_PARAMS_FOOTPRINT) is None
