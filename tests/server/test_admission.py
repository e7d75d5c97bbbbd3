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
