"""Wrong bearer tokens are rate-limited per client address (issue 20 §2): `mcpkit serve
--token` as a real process, and `AuthFailures` itself.

Attack: 600 wrong tokens from one address as fast as it can send them (unfixed: not one
429). Now: 429 with `Retry-After` from the 21st on - for a right token from that address
too (else the answer would tell a guesser when it hit) - while a right token from another
address is served.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.transports.limits_support import http, initialize, mcpkit_process

from mcpkit.transports.server.http.auth_failures import DEFAULT_AUTH_FAILURE_BURST, AuthFailures

pytestmark = pytest.mark.anyio

TOKEN = "the-right-token-0123456789"
FLOOD = 600


async def test_a_wrong_token_flood_gets_429_and_other_addresses_are_served(
    tmp_path: Path,
) -> None:
    # one more wrong token a minute after the burst: none more within this test
    args = ["serve", "--workspace", str(tmp_path), "--token", TOKEN, "--auth-failure-rate", "1"]
    with mcpkit_process(args) as (_proc, port):
        statuses = []
        retry_after = set()
        for index in range(FLOOD):
            reply = await http(port, initialize(), headers={
                "authorization": f"Bearer wrong-{index}"})
            statuses.append(reply.status)
            if reply.status == 429:
                retry_after.add(int(reply.headers["retry-after"]))
        assert statuses[:DEFAULT_AUTH_FAILURE_BURST] == [401] * DEFAULT_AUTH_FAILURE_BURST
        assert set(statuses[DEFAULT_AUTH_FAILURE_BURST:]) == {429}
        assert retry_after and min(retry_after) >= 1
        good = {"authorization": f"Bearer {TOKEN}"}
        assert (await http(port, initialize(), headers=good, source="127.0.0.2")).status == 200
        assert (await http(port, initialize(), headers=good, source="127.0.0.1")).status == 429
        # no token at all from a third address: still a plain 401, it has its own budget
        assert (await http(port, initialize(), source="127.0.0.3")).status == 401


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_the_budget_refills_at_the_steady_rate() -> None:
    clock = Clock()
    failures = AuthFailures(burst=3, per_minute=60, clock=clock)
    for _ in range(3):
        assert failures.blocked("a") is None
        failures.failed("a")
    wait = failures.blocked("a")
    assert wait is not None and 0 < wait <= 1.0
    assert failures.blocked("b") is None
    clock.now += wait
    assert failures.blocked("a") is None


@settings(max_examples=60, deadline=None)
@given(addresses=st.lists(st.integers(0, 10_000), max_size=400), cap=st.integers(1, 50))
def test_the_table_stays_bounded_whoever_fails(addresses: list[int], cap: int) -> None:
    failures = AuthFailures(burst=2, per_minute=1, max_addresses=cap, clock=Clock())
    for address in addresses:
        failures.failed(f"10.0.{address // 256}.{address % 256}")
        assert failures.tracked <= cap
    if addresses:  # the most recent failer is always remembered
        last = addresses[-1]
        assert f"10.0.{last // 256}.{last % 256}" in failures._buckets
