"""The hub under a flooding user or a token guesser (issue 20 §2), over a real `mcpkit hub
serve` process with two users.

Attacks:
- alice sends 1,100 legacy `initialize` on /mcp (unfixed: every other user's `initialize`
  then answered 503 for the 30 minutes her idle sessions lived). Now she only ever evicts
  her own idle sessions, and bob's `initialize` is answered;
- 600 wrong API tokens on /mcp from one address: 429 with `Retry-After` after the burst,
  for a right token from that address too, on /mcp and the REST API alike (one table);
  bob's right token from another address is served; wrong tokens on the REST API alone
  from a third address: 429 after the same burst.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.transports.limits_support import http, initialize, mcpkit_process

from mcpkit.transports.server.http.auth_failures import DEFAULT_AUTH_FAILURE_BURST

pytestmark = pytest.mark.anyio

FLOOD = 1100
WRONG = 600
ME = "/api/v1/users/me"


def _hub_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_HUB_")}
    env["MCPKIT_HUB_DATA"] = str(data)
    # the per-user request budget is not what these tests are about
    env["MCPKIT_HUB_RATE_LIMIT"] = "1000000"
    env["MCPKIT_HUB_RATE_BURST"] = "100000"
    # one more wrong token a minute after the burst: none more within these tests
    env["MCPKIT_HUB_AUTH_FAILURE_RATE"] = "1"
    return env


def _token_for(env: dict[str, str], user: str) -> str:
    for args in (["user", "add", user], ["token", "create", user]):
        done = subprocess.run([sys.executable, "-m", "mcpkit", "hub", *args], env=env,
                              capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str, str]]:
    """A hub process: its port, alice's token, bob's token."""
    env = _hub_env(tmp_path_factory.mktemp("hub"))
    alice, bob = _token_for(env, "alice"), _token_for(env, "bob")
    with mcpkit_process(["hub", "serve"], env=env) as (_proc, port):
        yield port, alice, bob


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


async def test_one_users_initialize_flood_does_not_starve_another_user(
    hub: tuple[int, str, str],
) -> None:
    port, alice, bob = hub
    gate = asyncio.Semaphore(16)
    statuses: dict[int, int] = {}

    async def flood_one() -> None:
        async with gate:
            reply = await http(port, initialize(), headers=_bearer(alice), source="127.0.0.5")
            statuses[reply.status] = statuses.get(reply.status, 0) + 1

    await asyncio.gather(*(flood_one() for _ in range(FLOOD)))
    assert statuses == {200: FLOOD}
    reply = await http(port, initialize(), headers=_bearer(bob), source="127.0.0.6")
    assert reply.status == 200, reply
    assert reply.headers.get("mcp-session-id")


async def test_wrong_tokens_are_limited_per_address_on_mcp_and_the_api(
    hub: tuple[int, str, str],
) -> None:
    port, alice, bob = hub
    statuses = []
    for index in range(WRONG):
        reply = await http(port, initialize(), headers=_bearer(f"wrong-{index}"),
                           source="127.0.0.7")
        statuses.append(reply.status)
        if reply.status == 429:
            assert int(reply.headers["retry-after"]) >= 1
            assert reply.json()["error"]["code"] == -32001
    burst = DEFAULT_AUTH_FAILURE_BURST
    assert statuses[:burst] == [401] * burst and set(statuses[burst:]) == {429}
    # the guesser's address is refused whatever it sends, on /mcp and the API
    assert (await http(port, initialize(), headers=_bearer(alice),
                       source="127.0.0.7")).status == 429
    assert (await http(port, None, method="GET", path=ME, headers=_bearer(alice),
                       source="127.0.0.7")).status == 429
    # another address with a right token is not affected
    assert (await http(port, initialize(), headers=_bearer(bob),
                       source="127.0.0.8")).status == 200
    assert (await http(port, None, method="GET", path=ME, headers=_bearer(bob),
                       source="127.0.0.8")).status == 200
    # the REST API counts its own wrong tokens
    api = [(await http(port, None, method="GET", path=ME, headers=_bearer(f"bad-{index}"),
                       source="127.0.0.9")) for index in range(burst + 5)]
    assert [reply.status for reply in api] == [401] * burst + [429] * 5
    assert api[-1].json()["error"]["code"] == "rate_limited"
    assert int(api[-1].headers["retry-after"]) >= 1


def test_the_limits_are_settings_and_options() -> None:
    import argparse

    from mcpkit.hub.settings import HubSettings, SettingsError

    settings = HubSettings.from_env({
        "MCPKIT_HUB_MAX_SESSIONS": "50", "MCPKIT_HUB_MAX_SESSIONS_PER_USER": "5",
        "MCPKIT_HUB_AUTH_FAILURE_BURST": "3", "MCPKIT_HUB_AUTH_FAILURE_RATE": "2",
        "MCPKIT_HUB_MAX_CONNECTIONS": "64", "MCPKIT_HUB_HEADER_TIMEOUT": "2.5",
        "MCPKIT_HUB_BODY_TIMEOUT": "7"})
    assert (settings.max_sessions, settings.max_sessions_per_user, settings.auth_failure_burst,
            settings.auth_failures_per_minute, settings.max_connections,
            settings.header_timeout_s, settings.body_timeout_s) == (50, 5, 3, 2, 64, 2.5, 7.0)
    given = argparse.Namespace(max_connections=10, header_timeout_s=1.0, body_timeout_s=None)
    from_args = HubSettings.from_args(given, {})
    assert (from_args.max_connections, from_args.header_timeout_s) == (10, 1.0)
    for bad in ({"MCPKIT_HUB_MAX_SESSIONS_PER_USER": "0"}, {"MCPKIT_HUB_HEADER_TIMEOUT": "-1"}):
        with pytest.raises(SettingsError):
            HubSettings.from_env(bad)
