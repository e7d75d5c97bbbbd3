"""`HubContext`: what the routes (and later the /mcp router) share while the app runs - the
settings, the store, the secret box, and the two seams tests and operators may swap:

    resolve(host, port) -> addresses      the DNS lookup behind the SSRF check at registration
    fetch(upstream, credentials, settings) -> Catalog    talking to an upstream (catalog.py)

and the operations pieces:

    metrics              HubMetrics: the app's Prometheus registry (metrics.py)
    limiter              RateLimiter: `await limiter.acquire(f"user:{user_id}")` -> None or
                         seconds to wait; in memory, or in Redis once `use_redis` ran
    auth_failures        AuthFailures: wrong tokens per client address (REST API and /mcp
                         share it; per process)
    redis                the Redis client replicas share (shared.py), None for one process
    oauth                the authorization server users sign in to (hub/oauth/service.py)
    catalog_listeners    `async (user_id, upstream_id)` callbacks the health checker calls
                         when a check changed that upstream's stored catalog (the router
                         registers one to send `list_changed` to the user's sessions)

It is made by the app's lifespan (the store belongs to the server's event loop) and kept on
`app.state.hub`; `hub_context` is the FastAPI dependency that hands it to a route.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fastapi import Request

from mcpkit.errors import InvalidState
from mcpkit.hub.catalog import fetch_catalog
from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.metrics import HubMetrics
from mcpkit.hub.ratelimit import MemoryRateLimiter, RateLimiter, RedisRateLimiter
from mcpkit.hub.refresh_slots import RefreshSlots
from mcpkit.hub.settings import HubSettings
from mcpkit.hub.store import Catalog, Credentials, Store, UpstreamRecord
from mcpkit.transports.server.http.auth_failures import AuthFailures

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from mcpkit.hub.oauth.service import OAuthService

HostResolver = Callable[[str, int], Awaitable[list[str]]]
CatalogFetcher = Callable[[UpstreamRecord, Credentials, HubSettings], Awaitable[Catalog]]
CatalogListener = Callable[[int, str], Awaitable[None]]
ToolNames = Callable[[int], Awaitable[Mapping[tuple[str, str], str]]]
"""user id → (upstream id, tool name) → the tool's name on the hub's /mcp (set by the /mcp
router: the names its lists give; absent, the API names no /mcp name)."""
UserListener = Callable[[int], None]
"""Told a user's id when an admin changed them (disabled, admin role): a cache that trusts
users reads this one again on its next token."""
"""`await listener(user_id, upstream_id)`: that upstream's stored catalog changed."""


async def resolve_host(host: str, port: int) -> list[str]:
    """Every address `host` resolves to (the system resolver, as a connection would use)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


@dataclass(slots=True)
class HubContext:
    settings: HubSettings
    store: Store
    box: SecretBox
    resolve: HostResolver = resolve_host
    fetch: CatalogFetcher = fetch_catalog
    refresh_slots: RefreshSlots | None = None
    """Bounds the catalog refreshes in flight (settings.max_concurrent_refreshes in all,
    settings.max_refreshes_per_user for one user)."""
    metrics: HubMetrics = field(default_factory=HubMetrics)
    redis: Redis | None = None
    catalog_listeners: list[CatalogListener] = field(default_factory=list)
    user_listeners: list[UserListener] = field(default_factory=list)
    tool_names: ToolNames | None = None
    oauth: OAuthService | None = None
    """The hub's authorization server (hub/oauth), set by its built-in component."""
    limiter: RateLimiter = field(init=False)
    """Per-user budgets (settings.rate_limit_per_minute, rate_limit_burst); refusals are
    counted in `metrics`."""
    auth_failures: AuthFailures = field(init=False)
    """Wrong API tokens per client address (settings.auth_failure_burst,
    auth_failures_per_minute): checked before a token is, on the REST API and /mcp."""

    def __post_init__(self) -> None:
        self.auth_failures = AuthFailures(
            burst=self.settings.auth_failure_burst,
            per_minute=self.settings.auth_failures_per_minute)
        if self.refresh_slots is None:
            self.refresh_slots = RefreshSlots(self.settings.max_concurrent_refreshes,
                                              self.settings.max_refreshes_per_user)
        self.limiter = MemoryRateLimiter(
            self.settings.rate_limit_per_minute, self.settings.rate_limit_burst,
            on_limited=self.metrics.count_rate_limited)
        if self.redis is not None:
            self.use_redis(self.redis)

    def user_changed(self, user_id: int) -> None:
        """The user was changed (disabled, demoted) or one of their tokens revoked: this
        replica's caches of verified tokens drop the user's now (another replica's within
        their own time to live)."""
        if self.oauth is not None:
            self.oauth.tokens.forget_user(user_id)
        for listener in self.user_listeners:
            listener(user_id)

    def use_redis(self, redis: Redis) -> None:
        """Share state with the other replicas through `redis`: it becomes `self.redis`, and
        the rate limits move there (one budget per user across replicas)."""
        self.redis = redis
        self.limiter = RedisRateLimiter(
            redis, self.settings.rate_limit_per_minute, self.settings.rate_limit_burst,
            on_limited=self.metrics.count_rate_limited)


def hub_context(request: Request) -> HubContext:
    context = getattr(request.app.state, "hub", None)
    if not isinstance(context, HubContext):  # only before the lifespan ran: a wiring bug
        raise InvalidState("the hub app is not started (its lifespan did not run)")
    return context
