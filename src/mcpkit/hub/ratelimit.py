"""Per-user rate limits: a token bucket per key ("user:42"), `rate_limit_burst` tokens deep and
refilled at `rate_limit_per_minute`, so a user may burst and then gets a steady rate.

    limiter = MemoryRateLimiter(per_minute=600, burst=60)        # one process
    limiter = RedisRateLimiter(redis, per_minute=600, burst=60)  # replicas share one budget
    wait = await limiter.acquire("user:42")    # None: go ahead; else seconds until a token

Both spend one token per call with the same arithmetic (`Bucket`): in Python for the memory
limiter, in a Lua script for Redis, which runs atomically in the server, so two replicas
taking the last token at once cannot both get it. Redis keys expire once a bucket would be
full again (an absent key *is* a full bucket), so idle users cost nothing.

Availability over strictness: when Redis fails (down, slow, evicted script), the Redis
limiter lets the request through and logs a warning (at most once a minute) - a lost rate
limit must not take the whole hub down with it.

The REST API applies the limiter to every authenticated route (429 with `Retry-After`,
api/app.py); the /mcp router calls `context.limiter.acquire(f"user:{user_id}")` itself.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from redis.exceptions import RedisError

from mcpkit.errors import InvalidArgument

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript

log = logging.getLogger(__name__)

KEY_PREFIX = "mcpkit:hub:rate:"
FAILURE_LOG_EVERY_S = 60.0
"""A Redis outage is logged once per this many seconds, not once per request."""
SWEEP_EVERY = 1024
"""The memory limiter drops buckets that are full again every this many acquires."""

# KEYS[1]: the bucket; ARGV: tokens per millisecond, burst. Redis's own clock (TIME), so
# replicas with skewed clocks still agree. Returns 0 (allowed) or the milliseconds to wait.
# The arithmetic is `Bucket.take`'s, line for line.
TAKE_SCRIPT = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - at) * rate)
local wait = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait = math.ceil((1 - tokens) / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate) + 1000)
return wait
"""


class RateLimiter(Protocol):
    async def acquire(self, key: str) -> float | None:
        """Spend one token of `key`'s budget: None if there was one, else the seconds until
        there will be (the caller answers 429 / a JSON-RPC error; nothing is queued)."""
        ...


@dataclass(frozen=True, slots=True)
class Bucket:
    """The token-bucket arithmetic both limiters share (the Lua script mirrors `take`)."""

    per_minute: int
    burst: int

    def __post_init__(self) -> None:
        if self.per_minute < 1 or self.burst < 1:
            raise InvalidArgument("a rate limit needs a rate and a burst above 0")

    @property
    def per_second(self) -> float:
        return self.per_minute / 60.0

    def take(self, tokens: float, at: float, now: float) -> tuple[float, float]:
        """(tokens left, seconds to wait) for a bucket holding `tokens` at time `at`, asked
        for one token at `now`; a wait of 0 means the token was taken."""
        tokens = min(float(self.burst), tokens + max(0.0, now - at) * self.per_second)
        if tokens >= 1.0:
            return tokens - 1.0, 0.0
        return tokens, (1.0 - tokens) / self.per_second

    def full_after(self, tokens: float) -> float:
        """Seconds until a bucket holding `tokens` is full (then it is as good as absent)."""
        return (self.burst - tokens) / self.per_second


class MemoryRateLimiter:
    """Buckets in this process: exact for one process, per replica with several (use Redis).

    `clock` (monotonic seconds) is for tests; `on_limited` is called with the key of each
    refused request (the metrics count them)."""

    def __init__(
        self,
        per_minute: int,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        on_limited: Callable[[str], None] | None = None,
    ) -> None:
        self.bucket = Bucket(per_minute, burst)
        self._clock = clock
        self._on_limited = on_limited
        self._buckets: dict[str, tuple[float, float]] = {}
        self._calls = 0

    async def acquire(self, key: str) -> float | None:
        now = self._clock()
        tokens, at = self._buckets.get(key, (float(self.bucket.burst), now))
        tokens, wait = self.bucket.take(tokens, at, now)
        self._buckets[key] = (tokens, now)
        self._calls += 1
        if self._calls % SWEEP_EVERY == 0:
            self._sweep(now)
        if wait > 0:
            if self._on_limited is not None:
                self._on_limited(key)
            return wait
        return None

    def _sweep(self, now: float) -> None:
        """Forget buckets that have refilled: memory stays bounded by the active users."""
        full = [key for key, (tokens, at) in self._buckets.items()
                if now - at >= self.bucket.full_after(tokens)]
        for key in full:
            del self._buckets[key]


class RedisRateLimiter:
    """Buckets in Redis, shared by every replica using the same server (see the module
    docstring). Fails open: a Redis error lets the request through, with a warning logged."""

    def __init__(
        self,
        redis: Redis,
        per_minute: int,
        burst: int,
        *,
        prefix: str = KEY_PREFIX,
        on_limited: Callable[[str], None] | None = None,
    ) -> None:
        self.bucket = Bucket(per_minute, burst)
        self.prefix = prefix
        self._script: AsyncScript = redis.register_script(TAKE_SCRIPT)
        self._on_limited = on_limited
        self._last_failure_log = -math.inf

    async def acquire(self, key: str) -> float | None:
        per_ms = self.bucket.per_second / 1000.0
        try:
            wait_ms = await self._script(keys=[self.prefix + key],
                                         args=[repr(per_ms), self.bucket.burst])
        except (RedisError, OSError) as error:
            self._log_failure(error)
            return None
        if not wait_ms:
            return None
        if self._on_limited is not None:
            self._on_limited(key)
        return int(wait_ms) / 1000.0

    def _log_failure(self, error: BaseException) -> None:
        now = time.monotonic()
        if now - self._last_failure_log >= FAILURE_LOG_EVERY_S:
            self._last_failure_log = now
            log.warning("rate limits are not enforced: Redis failed (%s: %s); letting "
                        "requests through", type(error).__name__, error)


def retry_after(wait: float) -> int:
    """`Retry-After` in whole seconds (at least 1: 0 would invite an immediate retry)."""
    return max(1, math.ceil(wait))


def user_key(user_id: int) -> str:
    """The budget's key for a user: the same on the REST API and /mcp (one budget)."""
    return f"user:{user_id}"
