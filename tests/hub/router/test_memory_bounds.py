"""The hub's /mcp bounds what it holds in bytes (issue 20 §3), measured on a real hub
process:

- a logging flood from an upstream, relayed to a legacy session of the hub and read by its
  client, leaves the hub's RSS within a stated bound (before: every relayed event of every
  stream was kept for the session's life, ~70 MiB per 5,000 x 10 KB call);
- a caller that stops reading while an upstream floods makes the hub drop what it cannot
  pass on (and say so once the caller reads again), not hold the upstream's whole flood
  (before: ~200 MiB for 5,000 x 10 KB)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import anyio
import pytest
from tests.hub.hub_helpers import Hub, fresh_user
from tests.hub.router.support import register
from tests.hub.router.test_replicas import seed_admin
from tests.memory_bounds import (
    MIB,
    ROOT,
    LegacySession,
    flood_server_http,
    read_events,
    rss_bytes,
    settled_rss,
)
from tests.procs import free_port, stop_process, wait_for_port

from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.settings import HubSettings, SettingsError
from mcpkit.transports.server.http.asgi import DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES
from mcpkit.transports.server.http.replay import DEFAULT_MAX_TOTAL_REPLAY_BYTES

pytestmark = pytest.mark.anyio

FLOOD_CALLS = 4
FLOOD_COUNT = 2_000
FLOOD_SIZE = 10_000
FLOOD_GROWTH_BOUND = 48 * MIB
"""One stream's replay budget (4 MiB), the upstream connection's own buffers and allocator
slack; the unbounded buffers kept FLOOD_CALLS x FLOOD_COUNT x FLOOD_SIZE (80 MB)."""


@contextlib.contextmanager
def hub_process(database_url: str, key: str, data: Path
                ) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`mcpkit hub serve` on a free port, running the mcpkit of the caller's PYTHONPATH."""
    port = free_port()
    command = [sys.executable, "-m", "mcpkit", "hub", "serve", "--port", str(port),
               "--database-url", database_url, "--data-dir", str(data),
               "--allow-private-upstreams", "--log-level", "warning"]
    path = os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(ROOT)]))
    env = {**os.environ, "MCPKIT_HUB_SECRET_KEY": key, "PYTHONPATH": path}
    proc = subprocess.Popen(command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        wait_for_port(proc, port)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        stop_process(proc)


@contextlib.asynccontextmanager
async def hub_with_flood_upstream(tmp_path: Path) -> AsyncIterator[
        tuple[aiohttp.ClientSession, LegacySession, subprocess.Popen[bytes]]]:
    """A hub process with the flood server registered as `fl` for a fresh user, and an open
    legacy session of that user: (the HTTP client, the session, the hub process)."""
    key = generate_key()
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    admin = await seed_admin(database_url, SecretBox([key]))
    with contextlib.ExitStack() as stack:
        base, proc = stack.enter_context(hub_process(database_url, key, tmp_path / "data"))
        up = stack.enter_context(flood_server_http())
        hub = Hub(base, admin, database_url, HubSettings(), SecretBox([key]))
        _user, api = await fresh_user(hub)
        await register(api, "fl", up.url)
        async with aiohttp.ClientSession() as client:
            session = LegacySession(client, f"{base}/mcp",
                                    headers={"authorization": f"Bearer {api.token}"})
            await session.open()
            await session.call_tool("fl__flood", count=200, size=FLOOD_SIZE)  # warm the heap
            yield client, session, proc
            await session.close()


STALLED_COUNT = 3_000
STALLED_GROWTH_BOUND = 40 * MIB
"""The relay backlog (4 MiB), the caller's stream budget and what waits in sockets, plus
slack; holding the flood (3,000 x 10 KB) cost ~120 MiB."""


async def test_a_caller_that_stops_reading_does_not_make_the_hub_hold_the_flood(
        tmp_path: Path) -> None:
    async with hub_with_flood_upstream(tmp_path) as (client, session, proc):
        before = rss_bytes(proc.pid)
        body = {"jsonrpc": "2.0", "id": 42, "method": "tools/call", "params": {
            "name": "fl__flood", "arguments": {"count": STALLED_COUNT, "size": FLOOD_SIZE}}}
        with anyio.fail_after(120):
            async with client.post(session.url, json=body, headers=session.headers) as resp:
                stalled = await anyio.to_thread.run_sync(settled_rss, proc.pid)
                warnings: list[bytes] = []
                logs, response = await read_events(resp.content, 42, warnings)
        print(f"\nflood to a caller that stopped reading, through the hub: RSS "
              f"{before / MIB:.1f} -> {stalled / MIB:.1f} MiB; {logs} log messages came")
        assert stalled - before < STALLED_GROWTH_BOUND
        assert response["result"]["content"][0]["text"] == f"logged {STALLED_COUNT}"
        # What was dropped is said, and adds up: each message came or was counted.
        dropped = sum(int(re.search(rb"the hub dropped (\d+) ", note)[1])  # type: ignore[index]
                      for note in warnings)
        assert dropped > 0
        assert logs - len(warnings) + dropped == STALLED_COUNT
        # The session lives on.
        _, response = await session.call_tool("fl__echo", text="still here")
        assert response["result"]["content"][0]["text"] == "still here"


async def test_a_relayed_logging_flood_leaves_no_replay_buffers_in_the_hub(
        tmp_path: Path) -> None:
    async with hub_with_flood_upstream(tmp_path) as (_client, session, proc):
        before = rss_bytes(proc.pid)
        with anyio.fail_after(180):
            for _ in range(FLOOD_CALLS):
                logs, response = await session.call_tool(
                    "fl__flood", count=FLOOD_COUNT, size=FLOOD_SIZE)
                assert logs == FLOOD_COUNT
                assert response["result"]["content"][0]["text"] == f"logged {FLOOD_COUNT}"
        after = rss_bytes(proc.pid)
        print(f"\nlogging flood through the hub: RSS {before / MIB:.1f} -> "
              f"{after / MIB:.1f} MiB")
        assert after - before < FLOOD_GROWTH_BOUND
        _, response = await session.call_tool("fl__echo", text="still here")
        assert response["result"]["content"][0]["text"] == "still here"


def test_the_byte_budgets_of_mcp_are_hub_settings() -> None:
    defaults = HubSettings.from_env({})
    assert defaults.max_replay_bytes == DEFAULT_MAX_TOTAL_REPLAY_BYTES
    assert defaults.max_bodies_in_flight_bytes == DEFAULT_MAX_BODIES_IN_FLIGHT_BYTES
    chosen = HubSettings.from_env({"MCPKIT_HUB_MAX_REPLAY_BYTES": "1000000",
                                   "MCPKIT_HUB_MAX_BODIES_IN_FLIGHT_BYTES": "2000000"})
    assert (chosen.max_replay_bytes, chosen.max_bodies_in_flight_bytes) == (1000000, 2000000)
    with pytest.raises(SettingsError, match="max_replay_bytes"):
        HubSettings.from_env({"MCPKIT_HUB_MAX_REPLAY_BYTES": "0"})
