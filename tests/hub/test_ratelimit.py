"""Per-user rate limits: the token bucket in memory (a clock the test moves) and in a real Redis
(its Lua script; two limiter objects on one server are two replicas sharing one budget; keys
expire; a Redis that is gone lets requests through), and the REST API's 429 with
`Retry-After` over real HTTP."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from tests.hub.hub_helpers import ADMIN_USERS, Api, Hub, fresh_user, running_hub, serve_app
from tests.procs import free_port
from tests.services_fixtures import redis_server

from mcpkit.hub.api import create_app
from mcpkit.hub.ratelimit import (
    Bucket,
    MemoryRateLimiter,
    RedisRateLimiter,
    retry_after,
    user_key,
)
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.shared import open_redis
from mcpkit.testing.services import RedisServer

__all__ = ["redis_server"]

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def redis(redis_server: RedisServer, anyio_backend: Any) -> AsyncIterator[Redis]:
    client = await open_redis(redis_server.url)
    try:
        yield client
    finally:
        await client.aclose()


def prefix() -> str:
    """Keys of one test only (the session's Redis is shared)."""
    return f"test:{secrets.token_hex(4)}:"


# --- the arithmetic and the memory limiter ---------------------------------------------------


def test_the_bucket_refills_at_the_rate_up_to_the_burst() -> None:
    bucket = Bucket(per_minute=60, burst=3)  # one token a second
    assert bucket.take(3.0, at=0.0, now=0.0) == (2.0, 0.0)
    assert bucket.take(0.0, at=0.0, now=0.0) == (0.0, 1.0)
    assert bucket.take(0.25, at=0.0, now=0.0) == (0.25, 0.75)
    assert bucket.take(0.0, at=0.0, now=1.0) == (0.0, 0.0)     # refilled one, took it
    assert bucket.take(0.0, at=0.0, now=100.0) == (2.0, 0.0)   # never above the burst
    assert bucket.take(3.0, at=5.0, now=4.0) == (2.0, 0.0)     # a clock going back adds nothing
    assert bucket.full_after(1.0) == 2.0
    with pytest.raises(ValueError):
        Bucket(per_minute=0, burst=1)


def test_retry_after_is_whole_seconds_and_never_zero() -> None:
    assert [retry_after(w) for w in (0.001, 0.5, 1.0, 1.01, 59.2)] == [1, 1, 1, 2, 60]


async def test_memory_burst_then_refusal_then_refill() -> None:
    clock = Clock()
    limited: list[str] = []
    limiter = MemoryRateLimiter(per_minute=60, burst=3, clock=clock, on_limited=limited.append)
    assert [await limiter.acquire("user:1") for _ in range(3)] == [None, None, None]
    assert await limiter.acquire("user:1") == pytest.approx(1.0)
    assert limited == ["user:1"]
    assert await limiter.acquire("user:2") is None  # budgets are per key
    clock.now += 0.5
    assert await limiter.acquire("user:1") == pytest.approx(0.5)  # half a token so far
    clock.now += 0.5
    assert await limiter.acquire("user:1") is None
    assert await limiter.acquire("user:1") == pytest.approx(1.0)


async def test_memory_forgets_buckets_that_refilled() -> None:
    clock = Clock()
    limiter = MemoryRateLimiter(per_minute=60, burst=2, clock=clock)
    for user in range(1023):
        await limiter.acquire(user_key(user))
    clock.now += 2.0  # every bucket is full again: as good as absent
    await limiter.acquire("user:last")  # the 1024th acquire sweeps
    assert len(limiter._buckets) == 1


# --- Redis ------------------------------------------------------------------------------------


async def test_redis_burst_then_refusal(redis: Redis) -> None:
    limited: list[str] = []
    limiter = RedisRateLimiter(redis, per_minute=60, burst=3, prefix=prefix(),
                               on_limited=limited.append)
    assert [await limiter.acquire("user:1") for _ in range(3)] == [None, None, None]
    wait = await limiter.acquire("user:1")
    assert wait is not None and 0 < wait <= 1.0
    assert limited == ["user:1"]
    assert await limiter.acquire("user:2") is None


async def test_redis_refills(redis: Redis) -> None:
    limiter = RedisRateLimiter(redis, per_minute=6000, burst=1, prefix=prefix())  # 100/s
    assert await limiter.acquire("user:1") is None
    wait = await limiter.acquire("user:1")
    assert wait is not None and 0 < wait <= 0.01 + 0.001  # rounded up to a millisecond
    with anyio.fail_after(5):  # refilled eventually (how soon is not the point)
        while await limiter.acquire("user:1") is not None:  # noqa: ASYNC110 (polling Redis)
            await anyio.sleep(0.005)


async def test_two_replicas_share_one_budget(redis: Redis, redis_server: RedisServer) -> None:
    shared = prefix()
    other = await open_redis(redis_server.url)  # another replica's own connection
    try:
        replica_a = RedisRateLimiter(redis, per_minute=60, burst=4, prefix=shared)
        replica_b = RedisRateLimiter(other, per_minute=60, burst=4, prefix=shared)
        answers = [await limiter.acquire("user:7")
                   for limiter in (replica_a, replica_b, replica_a, replica_b)]
        assert answers == [None, None, None, None]
        assert await replica_a.acquire("user:7") is not None
        assert await replica_b.acquire("user:7") is not None
    finally:
        await other.aclose()


async def test_redis_keys_expire(redis: Redis, redis_server: RedisServer) -> None:
    keys = prefix()
    limiter = RedisRateLimiter(redis, per_minute=60, burst=5, prefix=keys)
    await limiter.acquire("user:1")
    ttl = redis_server.command("PTTL", keys + "user:1")
    assert isinstance(ttl, int) and 0 < ttl <= 1000 + 1000  # one token to refill, + a second


async def test_a_redis_that_is_gone_lets_requests_through(
    caplog: pytest.LogCaptureFixture,
) -> None:
    gone = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    try:
        limiter = RedisRateLimiter(gone, per_minute=60, burst=1)
        with caplog.at_level(logging.WARNING, "mcpkit.hub.ratelimit"):
            assert [await limiter.acquire("user:1") for _ in range(3)] == [None] * 3
    finally:
        await gone.aclose()
    warnings = [r for r in caplog.records if "not enforced" in r.getMessage()]
    assert len(warnings) == 1  # once, not once per request


# --- the REST API -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tight_hub(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hub]:
    """A burst of 3 at one request a minute: a 4th request in a row is refused."""
    path: Path = tmp_path_factory.mktemp("rate") / "hub.db"
    with running_hub(f"sqlite+aiosqlite:///{path}", rate_limit_per_minute=1,
                     rate_limit_burst=3) as hub:
        yield hub


async def test_the_api_answers_429_with_retry_after(tight_hub: Hub) -> None:
    _user_id, user = await fresh_user(tight_hub)  # the admin's first two requests
    for _ in range(3):
        assert (await user.get("/api/v1/users/me")).status == 200
    refused = await user.get("/api/v1/users/me")
    assert refused.status == 429, refused.text
    assert refused.error == {"code": "rate_limited", "message": refused.error["message"]}
    assert int(refused.headers["Retry-After"]) == 60  # one token a minute, none left
    assert "Retry-After" not in (await Api(tight_hub, None).get("/api/v1/users/me")).headers
    # another user's budget is their own: the admin has one request left
    admin = Api(tight_hub, tight_hub.admin_token)
    assert (await admin.get(ADMIN_USERS)).status == 200
    assert (await admin.get(ADMIN_USERS)).status == 429
    # a stranger is answered 401 (authentication first) and spends nobody's budget
    assert (await Api(tight_hub, "mcphub_nobody").get("/api/v1/users/me")).status == 401
    assert (await Api(tight_hub, None).get("/healthz")).status == 200  # not rate-limited
    metrics = (await Api(tight_hub, None).get("/metrics")).text
    refusals = [sample.value for family in text_string_to_metric_families(metrics)
                for sample in family.samples if sample.name == "mcpkit_hub_rate_limited_total"]
    assert refusals == [2.0]


async def test_429_is_documented_on_every_authenticated_route(tight_hub: Hub) -> None:
    document = (await Api(tight_hub, None).get("/openapi.json")).body
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            documented = "429" in operation["responses"]
            assert documented == path.startswith("/api/"), (method, path)
            if documented:
                header = operation["responses"]["429"]["headers"]["Retry-After"]
                assert header["schema"]["type"] == "integer"


@pytest.fixture
def replicas(tmp_path: Path, redis_server: RedisServer) -> Iterator[tuple[Hub, Hub]]:
    """Two hubs (two apps, each on its own event loop) on one database and one Redis."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    limits = {"rate_limit_per_minute": 1, "rate_limit_burst": 4, "redis_url": redis_server.url}
    with running_hub(url, **limits) as first:
        settings = HubSettings(database_url=url, **limits)
        with serve_app(create_app(settings, box=first.box)) as second_url:
            yield first, Hub(second_url, first.admin_token, url, settings, first.box)


async def test_replicas_behind_one_redis_share_the_users_budget(
    replicas: tuple[Hub, Hub],
) -> None:
    first, second = replicas
    _user_id, on_first = await fresh_user(first)
    on_second = Api(second, on_first.token)
    answers = [await api.get("/api/v1/users/me")
               for api in (on_first, on_second, on_first, on_second, on_first)]
    assert [reply.status for reply in answers] == [200, 200, 200, 200, 429]
