"""The periodic health checker against real upstream MCP servers (a process, and an in-process
server whose tools the test changes), on a real SQLite file and a real PostgreSQL database,
with a real Redis for the replicas: a healthy upstream becomes healthy with its tools stored,
a stopped one unhealthy with `last_error` (its last good tools kept), a changed catalog - and
only a changed one - reaches the listeners, two checkers on one Redis check each upstream
once per interval, one bad upstream or listener does not stop the loop, and shutdown stops
it at once. Waits are `eventually` (until the state changes), never sleeps that assert timing.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from prometheus_client.parser import text_string_to_metric_families
from redis.asyncio import Redis
from tests.hub.hub_helpers import (
    UPSTREAMS,
    Hub,
    Upstream,
    call,
    echo_server,
    fresh_user,
    seed_admin,
    serve_app,
)
from tests.procs import eventually, free_port, serve_in_thread
from tests.services_fixtures import redis_server

from mcpkit.hub.api import create_app
from mcpkit.hub.api.context import HubContext
from mcpkit.hub.catalog import fetch_catalog
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.health import HUB_FAILURE, HealthChecker, health_checker
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.shared import open_redis
from mcpkit.hub.store import Catalog, Credentials, Store, UpstreamRecord, UpstreamSpec
from mcpkit.server.server import Server
from mcpkit.testing.services import RedisServer

__all__ = ["redis_server"]

pytestmark = pytest.mark.anyio

INTERVAL_S = 0.2
LIMIT_S = 20.0
"""How long `eventually` waits for a check (an upstream's connect and list, a few passes)."""


class Counting:
    """The real `fetch_catalog`, counting calls per upstream (and failing on request)."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.explode: set[str] = set()

    async def __call__(self, upstream: UpstreamRecord, credentials: Credentials,
                       settings: HubSettings) -> Catalog:
        self.calls[upstream.id] += 1
        if upstream.id in self.explode:
            raise RuntimeError("a bug in the hub, not the upstream")
        return await fetch_catalog(upstream, credentials, settings)


def settings_for(**extra: Any) -> HubSettings:
    return HubSettings(**{"allow_private_upstreams": True, "health_interval_s": INTERVAL_S,
                          **extra})


def context_for(store: Store, box: SecretBox, fetch: Counting | None = None,
                **extra: Any) -> HubContext:
    context = HubContext(settings_for(**extra), store, box)
    if fetch is not None:
        context.fetch = fetch
    return context


@contextlib.asynccontextmanager
async def running(context: HubContext) -> AsyncIterator[None]:
    async with health_checker(context):
        yield


async def register(store: Store, url: str, name: str = "up") -> UpstreamRecord:
    user = await store.users.create(f"user-{name}-{free_port()}")
    return await store.upstreams.create(user.id, UpstreamSpec(name=name, transport="http",
                                                              url=url, connect_timeout_s=5,
                                                              call_timeout_s=5))


@pytest.fixture(scope="module")
def echo() -> Iterator[Upstream]:
    with echo_server() as upstream:
        yield upstream


@pytest.fixture
async def redis(redis_server: RedisServer, anyio_backend: Any) -> AsyncIterator[Redis]:
    client = await open_redis(redis_server.url)
    try:
        await client.flushdb()
        yield client
    finally:
        await client.aclose()


def tool_names(catalog: Catalog) -> list[str]:
    return [tool["name"] for tool in catalog.tools]


# --- one checker --------------------------------------------------------------------------------


async def test_a_healthy_upstream_becomes_healthy_with_its_tools(
    store: Store, box: SecretBox, echo: Upstream
) -> None:
    upstream = await register(store, echo.url)
    assert upstream.health_status == "unknown"
    context = context_for(store, box)
    heard: list[tuple[int, str]] = []

    async def listener(user_id: int, upstream_id: str) -> None:
        heard.append((user_id, upstream_id))

    context.catalog_listeners.append(listener)
    checker = HealthChecker(context)
    assert await checker.run_pass() == 1
    record = await store.upstreams.get(upstream.user_id, upstream.id)
    assert record.health_status == "healthy" and record.last_error is None
    assert record.last_checked_at is not None and record.tool_count == 1
    assert tool_names(await store.catalog.get(upstream.user_id, upstream.id)) == ["echo"]
    assert heard == [(upstream.user_id, upstream.id)]  # from nothing to one tool: a change
    assert await checker.run_pass() == 0  # checked less than an interval ago: not due
    samples = {(s.name, tuple(s.labels.values())): s.value
               for family in text_string_to_metric_families(context.metrics.render()[0].decode())
               for s in family.samples}
    assert samples[("mcpkit_hub_upstreams", ("healthy",))] == 1
    assert samples[("mcpkit_hub_upstream_checks_total", ("ok",))] == 1


async def test_a_stopped_upstream_becomes_unhealthy_and_keeps_its_tools(
    store: Store, box: SecretBox
) -> None:
    fetch = Counting()
    context = context_for(store, box, fetch)
    with echo_server() as echo:
        upstream = await register(store, echo.url)
        async with running(context):
            await _wait_for_health(store, upstream, "healthy")
    # the upstream process is gone now
    async with running(context):
        record = await _wait_for_health(store, upstream, "unhealthy")
    assert record.last_error is not None and record.last_error.startswith("up: ")
    assert record.last_checked_at is not None
    assert tool_names(await store.catalog.get(upstream.user_id, upstream.id)) == ["echo"]


async def test_a_changed_catalog_reaches_the_listeners_and_an_unchanged_one_does_not(
    store: Store, box: SecretBox
) -> None:
    server = Server("changing", "1.0")

    def one() -> str:
        """The first tool."""
        return "1"

    def two() -> str:
        """The tool added later."""
        return "2"

    server.add_tool(one)
    fetch = Counting()
    context = context_for(store, box, fetch)
    heard: list[tuple[int, str]] = []

    async def listener(user_id: int, upstream_id: str) -> None:
        heard.append((user_id, upstream_id))

    context.catalog_listeners.append(listener)
    with serve_in_thread(server.asgi_app(), name="changing") as base:
        upstream = await register(store, base + "/mcp")
        async with running(context):
            await eventually(lambda: len(heard) == 1, LIMIT_S)  # the first list
            checks = fetch.calls[upstream.id]
            await eventually(lambda: fetch.calls[upstream.id] >= checks + 2, LIMIT_S)
            assert len(heard) == 1  # checked again, same tools: nobody told
            server.add_tool(two)
            await eventually(lambda: len(heard) == 2, LIMIT_S)
    assert heard == [(upstream.user_id, upstream.id)] * 2
    assert tool_names(await store.catalog.get(upstream.user_id, upstream.id)) == ["one", "two"]


async def test_one_bad_upstream_or_listener_does_not_stop_the_loop(
    store: Store, box: SecretBox, echo: Upstream
) -> None:
    fetch = Counting()
    context = context_for(store, box, fetch)
    bad = await register(store, echo.url, "bad")
    good = await register(store, echo.url, "good")
    fetch.explode.add(bad.id)

    async def broken_listener(user_id: int, upstream_id: str) -> None:
        raise RuntimeError("a listener bug")

    heard: list[str] = []

    async def listener(user_id: int, upstream_id: str) -> None:
        heard.append(upstream_id)

    context.catalog_listeners += [broken_listener, listener]
    async with running(context):
        # the bad one is tried again pass after pass ...
        await eventually(lambda: fetch.calls[bad.id] >= 3, LIMIT_S)
    # ... while the good one was checked, and the listener after the broken one still heard
    assert (await store.upstreams.get(good.user_id, good.id)).health_status == "healthy"
    assert heard == [good.id]
    record = await store.upstreams.get(bad.user_id, bad.id)
    assert record.health_status == "unhealthy"  # recorded, so it is not due again at once
    assert record.last_error == HUB_FAILURE  # the details are in the log, not shown to users
    assert "a bug in the hub" not in (record.last_error or "")


async def test_a_check_that_fails_in_the_hub_does_not_crowd_out_the_others(
    store: Store, box: SecretBox, echo: Upstream
) -> None:
    """Whatever fails, a pass moves on: with batches of two, two upstreams whose checks fail
    in the hub still let the third be checked in the same pass."""
    fetch = Counting()
    bad = [await register(store, echo.url, f"bad{n}") for n in range(2)]
    good = await register(store, echo.url, "good")
    # checked an hour ago: due, but after the never-checked bad ones (the first batch)
    await store.upstreams.set_health(good.user_id, good.id, "healthy",
                                     checked_at=datetime.now(UTC) - timedelta(hours=1))
    fetch.explode.update(upstream.id for upstream in bad)
    checker = HealthChecker(context_for(store, box, fetch), batch_size=2)
    assert await checker.run_pass() == 3
    assert (await store.upstreams.get(good.user_id, good.id)).health_status == "healthy"


async def test_shutdown_stops_the_loop_and_the_checks_in_flight(
    store: Store, box: SecretBox
) -> None:
    started = anyio.Event()

    async def hangs(upstream: UpstreamRecord, credentials: Credentials,
                    settings: HubSettings) -> Catalog:
        started.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    await register(store, "http://127.0.0.1:9/mcp")
    context = context_for(store, box)
    context.fetch = hangs
    with anyio.fail_after(10):  # a bound for the test, not a timing assertion
        async with running(context):
            await started.wait()
    # left the block: the hanging check was cancelled with the loop


async def test_disabled_upstreams_are_not_checked(store: Store, box: SecretBox,
                                                  echo: Upstream) -> None:
    from mcpkit.hub.store import UpstreamChanges

    upstream = await register(store, echo.url)
    await store.upstreams.update(upstream.user_id, upstream.id, UpstreamChanges(enabled=False))
    fetch = Counting()
    assert await HealthChecker(context_for(store, box, fetch)).run_pass() == 0
    assert not fetch.calls


# --- replicas -----------------------------------------------------------------------------------


async def test_two_checkers_on_one_redis_check_each_upstream_once_per_interval(
    database_url: str, box: SecretBox, echo: Upstream, redis: Redis, redis_server: RedisServer
) -> None:
    """Two replicas (their own store and Redis connection each) run a pass at the same
    moment: every due upstream is checked once, by one of them."""
    async with await Store.open(database_url, box) as store_a, \
            await Store.open(database_url, box, migrate=False) as store_b, \
            _closing(await open_redis(redis_server.url)) as other_redis:
        upstreams = [await register(store_a, echo.url, f"up{n}") for n in range(4)]
        fetch = Counting()
        settings = settings_for(health_interval_s=60.0)
        replica_a = HubContext(settings, store_a, box, redis=redis)
        replica_b = HubContext(settings, store_b, box, redis=other_redis)
        replica_a.fetch = replica_b.fetch = fetch
        done: list[int] = []

        async def run(context: HubContext) -> None:
            done.append(await HealthChecker(context).run_pass())

        async with anyio.create_task_group() as group:
            group.start_soon(run, replica_a)
            group.start_soon(run, replica_b)
        assert sum(done) == 4
        assert fetch.calls == Counter({upstream.id: 1 for upstream in upstreams})
        for upstream in upstreams:
            record = await store_a.upstreams.get(upstream.user_id, upstream.id)
            assert record.health_status == "healthy"


async def test_an_upstream_held_by_another_replica_is_skipped(
    store: Store, box: SecretBox, echo: Upstream, redis: Redis
) -> None:
    upstream = await register(store, echo.url)
    await redis.set(f"mcpkit:hub:health:{upstream.id}", "another-replica", px=60_000)
    fetch = Counting()
    context = context_for(store, box, fetch)
    context.use_redis(redis)
    assert await HealthChecker(context).run_pass() == 0  # and the pass ends
    assert not fetch.calls
    await redis.delete(f"mcpkit:hub:health:{upstream.id}")
    assert await HealthChecker(context).run_pass() == 1


async def test_a_redis_that_is_gone_does_not_stop_the_checks(
    store: Store, box: SecretBox, echo: Upstream
) -> None:
    upstream = await register(store, echo.url)
    gone = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    try:
        context = context_for(store, box)
        context.use_redis(gone)
        assert await HealthChecker(context).run_pass() == 1
    finally:
        await gone.aclose()
    assert (await store.upstreams.get(upstream.user_id, upstream.id)).health_status == "healthy"


# --- in the app -----------------------------------------------------------------------------------


@pytest.fixture
def checked_hub(tmp_path: Path) -> Iterator[Hub]:
    """A hub app with the health checker as `mcpkit hub serve` runs it."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}"
    box = SecretBox([generate_key()])
    token = seed_admin(url, box)
    settings = HubSettings(database_url=url, allow_private_upstreams=True,
                           health_interval_s=INTERVAL_S)
    with serve_app(create_app(settings, box=box, components=[health_checker])) as base:
        yield Hub(base, token, url, settings, box)


async def test_the_app_checks_registered_upstreams(checked_hub: Hub, echo: Upstream) -> None:
    _user_id, user = await fresh_user(checked_hub)
    created = await user.create_upstream(name="echo", url=echo.url)
    path = f"{UPSTREAMS}/{created['id']}"
    seen: list[dict[str, Any]] = []

    async def healthy() -> bool:
        seen.append((await user.get(path)).body)
        return seen[-1]["health_status"] == "healthy"

    await _until(healthy)
    assert seen[-1]["tool_count"] == 1 and seen[-1]["last_checked_at"]
    tools = await user.get(path + "/tools")
    assert [tool["name"] for tool in tools.body["items"]] == ["echo"]

    async def counted() -> bool:
        text = (await call("GET", checked_hub.url + "/metrics")).text
        return 'mcpkit_hub_upstreams{health="healthy"} 1.0' in text

    await _until(counted)


# --- helpers ------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def _closing(client: Redis) -> AsyncIterator[Redis]:
    try:
        yield client
    finally:
        await client.aclose()


async def _until(probe: Any, limit_s: float = LIMIT_S) -> None:
    """Until the async `probe()` is true (state another task or process changes)."""
    with anyio.fail_after(limit_s):
        while not await probe():  # noqa: ASYNC110 (polling state changed elsewhere)
            await anyio.sleep(0.02)


async def _wait_for_health(store: Store, upstream: UpstreamRecord, status: str
                           ) -> UpstreamRecord:
    found: list[UpstreamRecord] = []

    async def reached() -> bool:
        found.append(await store.upstreams.get(upstream.user_id, upstream.id))
        return found[-1].health_status == status

    await _until(reached)
    return found[-1]
