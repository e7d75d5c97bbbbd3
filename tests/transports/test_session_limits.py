"""One client cannot starve the others of legacy Streamable HTTP sessions (issue 20 §2).

Attacks, over a real `mcpkit example` process:
- 1,100 `initialize` from one address (the flooder): another address's `initialize` still
  gets a session, the flooder's own least recently used idle session is the one evicted
  (404 from then on), its newest and its busy ones (an open GET stream) live on;
- one address holding every session it may have, each with an open stream: its next
  `initialize` is 429 with `Retry-After` and a JSON-RPC error, and another address is not
  affected.
And `SessionManager`'s invariants under random create / use / busy / close sequences
(hypothesis): no owner above its cap, the pool never above the global cap, only idle
sessions evicted, and only the creator's own unless the pool is full.
"""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.transports.limits_support import http, initialize, mcpkit_process, open_stream, ping

from mcpkit.transports.server.http.sessions import (
    PrincipalSessionLimit,
    SessionLimitReached,
    SessionManager,
    SessionPoolFull,
)

pytestmark = pytest.mark.anyio

FLOOD = 1100


async def _initialize(port: int, source: str) -> tuple[int, str]:
    reply = await http(port, initialize(), source=source)
    return reply.status, reply.headers.get("mcp-session-id", "")


async def _ping(port: int, session_id: str, source: str) -> int:
    reply = await http(port, ping(), headers={"mcp-session-id": session_id,
                                              "mcp-protocol-version": "2025-06-18"},
                       source=source)
    return reply.status


async def test_a_flood_of_initialize_evicts_only_the_flooders_oldest_idle_sessions() -> None:
    with mcpkit_process(["example"]) as (_proc, port):
        first_status, first = await _initialize(port, "127.0.0.1")
        busy_status, busy = await _initialize(port, "127.0.0.1")
        assert first_status == busy_status == 200
        _reader, stream = await open_stream(port, busy)  # busy: never evicted
        try:
            other_status, other = await _initialize(port, "127.0.0.2")
            assert other_status == 200
            gate = asyncio.Semaphore(16)
            statuses: list[int] = []
            last = ""

            async def flood_one() -> None:
                nonlocal last
                async with gate:
                    status, session_id = await _initialize(port, "127.0.0.1")
                    statuses.append(status)
                    last = session_id or last

            await asyncio.gather(*(flood_one() for _ in range(FLOOD)))
            # the flooder only ever evicts its own idle sessions: never refused
            assert statuses == [200] * FLOOD
            # another client still gets a session, and its earlier one is still alive
            assert (await _initialize(port, "127.0.0.3"))[0] == 200
            assert await _ping(port, other, "127.0.0.2") == 200
            # the flooder's oldest idle session was evicted; its busy and newest ones live
            assert await _ping(port, first, "127.0.0.1") == 404
            assert await _ping(port, busy, "127.0.0.1") == 200
            assert await _ping(port, last, "127.0.0.1") == 200
        finally:
            stream.close()


async def test_a_client_whose_sessions_are_all_busy_gets_429_and_others_are_served() -> None:
    cap = 4
    with mcpkit_process(["example", "--max-sessions-per-client", str(cap)]) as (_proc, port):
        streams = []
        try:
            for _ in range(cap):
                status, session_id = await _initialize(port, "127.0.0.1")
                assert status == 200
                streams.append((await open_stream(port, session_id))[1])
            refused = await http(port, initialize(7), source="127.0.0.1")
            assert refused.status == 429
            assert int(refused.headers["retry-after"]) >= 1
            error = refused.json()
            assert error["id"] == 7 and error["error"]["code"] == -32603
            assert f"already has {cap} sessions, all busy" in error["error"]["message"]
            assert (await _initialize(port, "127.0.0.2"))[0] == 200
            streams.pop().close()  # one stream ends: that session is idle, hence evictable
            await asyncio.sleep(0.2)
            assert (await _initialize(port, "127.0.0.1"))[0] == 200
        finally:
            for writer in streams:
                writer.close()


# --- SessionManager's invariants ----------------------------------------------------------

OWNERS = ("alice", "bob", "carol")
step = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(OWNERS)),
    st.tuples(st.just("use"), st.integers(0, 60)),
    st.tuples(st.just("busy"), st.integers(0, 60)),
    st.tuples(st.just("idle"), st.integers(0, 60)),
    st.tuples(st.just("close"), st.integers(0, 60)),
)


@settings(max_examples=150, deadline=None)
@given(steps=st.lists(step, max_size=80), per_owner=st.integers(1, 5), total=st.integers(1, 9))
def test_session_caps_hold_and_only_idle_sessions_are_evicted(
    steps: list[tuple[str, object]], per_owner: int, total: int
) -> None:
    manager = SessionManager(max_sessions=total, max_sessions_per_principal=per_owner)
    made: list[str] = []  # every id ever created, in order
    for action, arg in steps:
        before = dict(manager.sessions)
        if action == "create":
            assert isinstance(arg, str)
            owner_count = manager.count(arg)
            try:
                session = manager.create(arg)
            except PrincipalSessionLimit:
                # refused only when the owner is at its cap and all of its sessions are busy
                assert owner_count >= min(per_owner, total)
                assert all(s.busy for s in before.values() if s.owner == arg)
                continue
            except SessionPoolFull:
                assert len(before) >= total and all(s.busy for s in before.values())
                continue
            made.append(session.id)
            gone = [s for sid, s in before.items() if sid not in manager.sessions]
            assert len(gone) <= 2 and not any(s.busy for s in gone)
            if owner_count >= min(per_owner, total):  # at its cap: its own session went
                assert any(s.owner == arg for s in gone)
            elif gone:  # below its cap: only a full pool takes another's
                assert len(before) >= total
        elif made:
            assert isinstance(arg, int)
            session_id = made[arg % len(made)]
            held = manager.sessions.get(session_id)
            if held is None:
                continue
            if action == "use":
                assert manager.get(session_id, held.principal) is held
            elif action == "busy":
                held.open_streams += 1
            elif action == "idle":
                held.open_streams = 0
            else:
                manager.close(session_id)
        assert len(manager.sessions) <= total
        for owner in OWNERS:
            assert manager.count(owner) <= per_owner
        assert sum(manager.count(owner) for owner in OWNERS) == len(manager.sessions)


def test_the_least_recently_used_idle_session_goes_first() -> None:
    manager = SessionManager(max_sessions=10, max_sessions_per_principal=3)
    first, second, third = (manager.create("p") for _ in range(3))
    manager.get(first.id, "p")  # used again: now the most recent
    manager.create("p")
    assert second.id not in manager.sessions
    assert first.id in manager.sessions and third.id in manager.sessions


def test_refusals_are_mcp_errors_with_their_http_status() -> None:
    manager = SessionManager(max_sessions=2, max_sessions_per_principal=1)
    manager.create("a").open_streams = 1
    with pytest.raises(PrincipalSessionLimit) as own:
        manager.create("a")
    assert own.value.status == 429
    manager.create("b").open_streams = 1
    with pytest.raises(SessionPoolFull) as pool:
        manager.create("c")
    assert pool.value.status == 503 and isinstance(pool.value, SessionLimitReached)


async def _open_sse(port: int, source: str) -> tuple[bytes, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(f"GET /sse HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\naccept: text/event-stream"
                 "\r\n\r\n".encode())
    async with asyncio.timeout(10):
        return await reader.readline(), writer


async def test_http_sse_streams_are_capped_per_client_too() -> None:
    cap = 3
    with mcpkit_process(["example", "--max-sessions-per-client", str(cap)]) as (_proc, port):
        writers = []
        try:
            for _ in range(cap):
                status_line, writer = await _open_sse(port, "127.0.0.1")
                writers.append(writer)
                assert b" 200 " in status_line
            status_line, writer = await _open_sse(port, "127.0.0.1")
            writers.append(writer)
            assert b" 429 " in status_line
            status_line, writer = await _open_sse(port, "127.0.0.2")
            writers.append(writer)
            assert b" 200 " in status_line
        finally:
            for writer in writers:
                writer.close()
