"""The Redis connection that replicas of the hub share (`--redis-url`, $MCPKIT_HUB_REDIS_URL).

    redis = await open_redis(url)             # pinged within a bounded time, or
                                              # SharedStateUnavailable (password never shown)
    app = create_app(settings, components=[redis_connection()])   # create_app does this itself

What lives there: the per-user rate-limit buckets (ratelimit.py), the per-upstream
health-check locks (health.py) and the DPoP proofs seen (hub/oauth/dpop.py: the replay cache
every replica checks); the /mcp router adds its own keys. Without a URL the hub runs
as one process and keeps that state in memory.

Every key the hub writes starts with `mcpkit:hub:` and expires, so one Redis can serve several
hubs' replicas (a separate logical database per hub is cleaner still: `redis://host/1`).

Commands are bounded by short socket timeouts: a Redis that stops answering costs a request
at most about a second, never a hang. The users of it then fail open - except the DPoP replay
check, which fails closed (503): skipping it would accept a replayed proof.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

import anyio
from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import RedisError

from mcpkit.errors import TransportError

if TYPE_CHECKING:
    from mcpkit.hub.api.context import HubContext

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
"""How long opening the connection (and its first PING) may take."""
COMMAND_TIMEOUT_S = 1.0
"""How long one command may take: a rate-limit check sits in front of every request."""
RETRIES = 1
"""One retry on a fresh connection (a dropped idle connection), not redis-py's default three
with backoff: a caller that fails open should learn quickly that Redis is gone."""


class SharedStateUnavailable(TransportError):
    """Redis cannot be reached (or the URL is not a Redis URL); `str()` is one line without the
    URL's password."""


def redacted(url: str) -> str:
    """`url` without its password (`redis://user:secret@host/0` → `redis://user:…@host/0`)."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return "<unparsable URL>"
    if not password:
        return url
    user = parts.username or ""
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{user}:…@{host}").geturl()


async def open_redis(url: str, *, timeout_s: float = CONNECT_TIMEOUT_S) -> Redis:
    """A client for `url` that has answered PING within `timeout_s`; close it with
    `await redis.aclose()`. `SharedStateUnavailable` otherwise."""
    try:
        client = Redis.from_url(
            url,
            socket_connect_timeout=timeout_s,
            socket_timeout=COMMAND_TIMEOUT_S,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), RETRIES),
        )
    except ValueError as error:
        raise SharedStateUnavailable(
            f"not a usable Redis URL {redacted(url)}: {_scrubbed(error, url)}") from None
    try:
        with anyio.fail_after(timeout_s):
            await client.ping()
    except (RedisError, OSError, TimeoutError) as error:
        await client.aclose()
        reason = _scrubbed(error, url) or f"no answer within {timeout_s:g} s"
        raise SharedStateUnavailable(f"cannot reach Redis at {redacted(url)}: {reason}") from None
    except BaseException:
        await client.aclose()
        raise
    return client


def redis_connection(client: Redis | None = None) -> Callable[
    [HubContext], AbstractAsyncContextManager[None]
]:
    """The app component for Redis: with `client`, uses it (the caller closes it); else opens
    `settings.redis_url` if one is set (closed on shutdown); either way it becomes
    `context.redis` and the rate limiter moves there. No URL and no client: nothing to do."""

    @asynccontextmanager
    async def component(context: HubContext) -> AsyncIterator[None]:
        redis = client
        url = context.settings.redis_url
        if redis is None and url is None:
            yield
            return
        if redis is None:
            assert url is not None
            redis = await open_redis(url)
            owned = True
        else:
            owned = False
        context.use_redis(redis)
        log.info("shared state in Redis at %s", redacted(url) if url else "(given client)")
        try:
            yield
        finally:
            if owned:
                await redis.aclose()

    return component


def _scrubbed(error: BaseException, url: str) -> str:
    """The error's message, one line, with the URL's password cut out should it appear."""
    text = " ".join(str(error).split())
    password = _password(url)
    if password:
        for spelling in (password, unquote(password)):
            text = text.replace(spelling, "…")
    return text


def _password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None

