"""The Redis connection replicas share, against a real Redis: `open_redis` pings within a
bounded time and fails with one line that never shows the URL's password; the app component
puts the client and the Redis rate limiter on the context; and `mcpkit hub serve --redis-url`
opens Redis before binding (exit 2 when it cannot) and keeps its rate limits there."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.hub.hub_helpers import call
from tests.procs import eventually, free_port, stop_process, wait_for_port
from tests.services_fixtures import redis_server

from mcpkit.hub.api.context import HubContext
from mcpkit.hub.crypto import SecretBox, generate_key
from mcpkit.hub.ratelimit import MemoryRateLimiter, RedisRateLimiter
from mcpkit.hub.settings import HubSettings, SettingsError
from mcpkit.hub.shared import SharedStateUnavailable, open_redis, redacted, redis_connection
from mcpkit.hub.startup import policy as startup_policy
from mcpkit.hub.store import Store
from mcpkit.testing.services import RedisServer

__all__ = ["redis_server"]

pytestmark = pytest.mark.anyio

SECRET = "hunter2-redis-secret"


def test_redacted_cuts_the_password_only() -> None:
    assert redacted("redis://127.0.0.1:6379/0") == "redis://127.0.0.1:6379/0"
    assert redacted(f"redis://:{SECRET}@db:6379/1") == "redis://:…@db:6379/1"
    assert redacted(f"rediss://app:{SECRET}@db/0") == "rediss://app:…@db/0"
    assert redacted("redis://app@db/0") == "redis://app@db/0"


async def test_open_redis_answers(redis_server: RedisServer) -> None:
    client = await open_redis(redis_server.url)
    try:
        assert await client.ping()
    finally:
        await client.aclose()


@pytest.fixture
def redis_user(redis_server: RedisServer) -> Iterator[str]:
    """A Redis user whose password is not SECRET."""
    name = f"tester{free_port()}"
    redis_server.command("ACL", "SETUSER", name, "on", ">the-right-one", "~*", "+@all")
    try:
        yield name
    finally:
        redis_server.command("ACL", "DELUSER", name)


async def test_open_redis_fails_in_one_line_without_the_password(
    redis_server: RedisServer, redis_user: str
) -> None:
    at = f"127.0.0.1:{redis_server.port}/0"
    client = await open_redis(f"redis://{redis_user}:the-right-one@{at}")
    await client.aclose()
    nobody = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    wrong_password = f"redis://{redis_user}:{SECRET}@{at}"
    for url in (nobody, wrong_password, f"http://:{SECRET}@127.0.0.1/0"):
        with pytest.raises(SharedStateUnavailable) as caught:
            await open_redis(url, timeout_s=2)
        message = str(caught.value)
        assert SECRET not in message and "\n" not in message, message
        assert "…@127.0.0.1" in message, message


def test_settings_refuse_a_url_that_is_not_redis_without_echoing_it() -> None:
    with pytest.raises(SettingsError) as caught:
        HubSettings(redis_url=f"http://:{SECRET}@127.0.0.1/0")
    assert SECRET not in str(caught.value)
    with_password = HubSettings(redis_url=f"redis://:{SECRET}@db:6379/0")
    described = with_password.describe()
    assert SECRET not in described and "db:6379/0" in described
    policy = startup_policy(with_password)  # the start-up summary's line
    assert SECRET not in policy and "redis redis://…@db:6379/0" in policy


async def test_the_component_puts_redis_and_its_limiter_on_the_context(
    redis_server: RedisServer, tmp_path: Path
) -> None:
    box = SecretBox([generate_key()])
    async with await Store.open(f"sqlite+aiosqlite:///{tmp_path / 'hub.db'}", box) as store:
        alone = HubContext(HubSettings(), store, box)
        async with redis_connection()(alone):
            assert alone.redis is None and isinstance(alone.limiter, MemoryRateLimiter)
        shared = HubContext(HubSettings(redis_url=redis_server.url), store, box)
        async with redis_connection()(shared):
            assert shared.redis is not None and await shared.redis.ping()
            assert isinstance(shared.limiter, RedisRateLimiter)
            name = f"component-{free_port()}"
            await shared.redis.client_setname(name)
            assert name in _client_names(redis_server)
        await eventually(lambda: name not in _client_names(redis_server))  # closed


def _client_names(server: RedisServer) -> str:
    listing = server.command("CLIENT", "LIST")
    assert isinstance(listing, bytes)
    return listing.decode()


# --- mcpkit hub serve --redis-url ---------------------------------------------------------------


def hub_env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCPKIT_HUB_")}
    env["MCPKIT_HUB_DATA"] = str(data)
    return env


def hub(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mcpkit", "hub", *args], env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def start_serve(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "mcpkit", "hub", "serve", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def test_serve_exits_2_when_redis_cannot_be_reached(tmp_path: Path) -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    result = hub(hub_env(tmp_path), "serve", "--port", str(free_port()), "--redis-url", url)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("mcpkit hub: error: cannot reach Redis at redis://:…@127.0.0.1:")
    assert SECRET not in result.stderr


async def test_serve_keeps_rate_limits_in_redis(tmp_path: Path,
                                                redis_server: RedisServer) -> None:
    redis_server.command("FLUSHDB")
    env = hub_env(tmp_path)
    assert hub(env, "user", "add", "dora").returncode == 0
    token = hub(env, "token", "create", "dora").stdout.strip()
    port = free_port()
    proc = start_serve(env, "--port", str(port), "--redis-url", redis_server.url)
    err = b""
    try:
        wait_for_port(proc, port, timeout=30)
        base = f"http://127.0.0.1:{port}"
        me = await call("GET", base + "/api/v1/users/me", token=token)
        assert me.status == 200, me.text
        keys: Any = redis_server.command("KEYS", "mcpkit:hub:rate:*")
        assert keys == [f"mcpkit:hub:rate:user:{me.body['id']}".encode()]
        metrics = await call("GET", base + "/metrics")
        assert metrics.status == 200 and "mcpkit_hub_http_requests_total" in metrics.text
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            _out, err = proc.communicate(timeout=15)
        finally:
            stop_process(proc)
    assert proc.returncode == 0, err.decode()
    assert f"shared through redis redis://127.0.0.1:{redis_server.port}/0" in err.decode()
