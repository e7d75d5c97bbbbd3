"""The owner's login to an OAuth-protected upstream, as the client auth object of the hub's
connections to it (pool, catalog, health).

    auth = await client_auth(context, upstream, purpose="call")     # HttpAuth | None
    credentials = await connection_credentials(context, upstream, purpose="catalog")

An upstream with `auth_mode` "static" (the default) needs none: its stored headers and bearer
are sent. One with "token_exchange" gets its owner's provider identity exchanged for an
upstream token (RFC 8693, hub/upstream_token_exchange.py; nothing stored; no usable identity:
`UpstreamNeedsSignIn`, an `UpstreamNeedsLogin`). One with `auth_mode` "oauth" is called with
its owner's own login, one per (user, upstream), kept sealed in the database
(store/upstream_logins.py, made by hub/upstream_login.py). With no login, or a dead one,
`UpstreamNeedsLogin` names the endpoint that starts one. The caller's hub token is never sent
upstream: the login is the owner's, and `LoginAuth` sends nothing else.

Refresh (`LoginAuth`): before a request when the access token is about to expire, and after
the upstream refused it (401). Every refresh of a stored login runs under one lock across
replicas (`RefreshLock`: Redis `SET NX PX` with a token through redis-py's Lock, bounded wait;
an in-process lock first, and alone when there is no Redis) and reads the store again first -
`mcpkit.client.shared_refresh.refresh_shared`, the client's own rule:

    another holder refreshed meanwhile   use the stored tokens, no request
    otherwise                            refresh; store the rotated refresh token, then use
    invalid_grant                        the login is deleted: UpstreamNeedsLogin
    5xx, network                         the login is kept: UpstreamUnavailable (try later)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Literal

import anyio
from redis.exceptions import LockError, RedisError

from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.tokens import REFRESH_MARGIN_S, TokenKey, TokenSet
from mcpkit.client import oauth_grant
from mcpkit.client.oauth_http import OAuthHttp
from mcpkit.client.shared_refresh import LoginRemoved, refresh_shared
from mcpkit.client.token_records import StoredGrant, TokenStoreError, decode_grant, encode_grant
from mcpkit.hub.keyed_locks import KeyedLocks
from mcpkit.hub.upstream_client import UpstreamUnavailable

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from mcpkit.auth.provider import HttpAuth
    from mcpkit.hub.api.context import HubContext
    from mcpkit.hub.store import Credentials, Store, UpstreamRecord

log = logging.getLogger(__name__)

Purpose = Literal["call", "catalog"]
"""What the connection is for: a caller's calls, or the catalog fetch (health checks too)."""
LOCK_PREFIX = "mcpkit:hub:upstream-login:"
LOCK_TTL_S = 30.0
"""A replica's refresh lock expires after this long even if it never releases it (a crash)."""
LOCK_WAIT_S = 15.0
"""The longest a refresh waits for another replica's: then UpstreamUnavailable."""
API_PREFIX = "/api/v1/users/mcp/upstreams"


class UpstreamNeedsLogin(UpstreamUnavailable):
    """The upstream needs its owner's OAuth login, and there is none (never made, logged out,
    or found dead: `invalid_grant`). An `UpstreamUnavailable`, so every path that reports an
    unreachable upstream reports this too; the health check tells it apart (needs_auth)."""

    def __init__(self, upstream: UpstreamRecord, why: str = "no login") -> None:
        self.upstream_id = upstream.id
        super().__init__(
            f"{upstream.name}: needs its owner's OAuth login ({why}): "
            f"POST {start_path(upstream.id)}")


def start_path(upstream_id: str) -> str:
    """The REST endpoint that starts the owner's login to the upstream."""
    return f"{API_PREFIX}/{upstream_id}/oauth/start"


async def client_auth(context: HubContext, upstream: UpstreamRecord, *,
                      purpose: Purpose = "call") -> HttpAuth | None:
    """The auth object for a connection to `upstream` (None: its static credentials do);
    `UpstreamNeedsLogin` when it needs its owner's login and has none. `purpose` is the same
    login for both (an upstream's separate catalog credentials: `connection_credentials`)."""
    if upstream.auth_mode == "token_exchange":
        return await exchanged_auth(context, upstream)
    if upstream.auth_mode != "oauth":
        return None
    login = StoredLogin(context.store, RefreshLock(context.redis), upstream.user_id, upstream.id)
    grant = await login.load()
    if grant is None:
        raise UpstreamNeedsLogin(upstream)
    return LoginAuth(login, upstream, grant,
                     http=OAuthHttp(allow_private=context.settings.allow_private_upstreams))


async def exchanged_auth(context: HubContext, upstream: UpstreamRecord) -> HttpAuth:
    """A token-exchange upstream's auth: the owner's provider identity exchanged for an
    upstream token (hub/upstream_token_exchange.py). The token is got here first (usually
    from the cache), so a missing identity is `UpstreamNeedsSignIn` before anything is sent,
    as a missing login is."""
    exchange = context.oauth.token_exchange if context.oauth is not None else None
    if exchange is None:
        raise UpstreamUnavailable(f"{upstream.name}: token exchange needs the hub to sign "
                                  "users in with an OpenID Connect provider (--oidc-issuer)")
    await exchange.token(context.store, upstream)
    return exchange.auth_for(context.store, upstream)


async def connection_credentials(context: HubContext, upstream: UpstreamRecord, *,
                                 purpose: Purpose = "call") -> Credentials:
    """The upstream's stored credentials with the owner's login attached (`client_auth`).
    A catalog fetch (health checks too) of an upstream with catalog credentials sends those
    alone, the login not attached - but still required: without one the owner's calls cannot
    work, and the upstream is `needs_auth` (UpstreamNeedsLogin)."""
    credentials = await context.store.upstreams.credentials(upstream.user_id, upstream.id,
                                                            purpose=purpose)
    auth = await client_auth(context, upstream, purpose=purpose)
    if purpose == "catalog" and upstream.has_catalog_credentials:
        return credentials
    return credentials if auth is None else dataclasses.replace(credentials, auth=auth)


def credentials_for(context: HubContext, purpose: Purpose
                    ) -> Callable[[UpstreamRecord], Awaitable[Credentials]]:
    """`connection_credentials` for `purpose`, as the pool and `refresh_catalog` take it."""
    return functools.partial(connection_credentials, context, purpose=purpose)


class RefreshLock:
    """One refresh of a (user, upstream) login at a time: in this process (an anyio lock),
    then across replicas (redis-py's Lock: SET NX PX with a random token, expiring after
    `ttl_s`, waited for at most `wait_s`). Redis failing: logged, and the in-process lock
    alone is used (a refresh race is possible then; a refused refresh is not)."""

    def __init__(self, redis: Redis | None, *, ttl_s: float = LOCK_TTL_S,
                 wait_s: float = LOCK_WAIT_S) -> None:
        self.redis = redis
        self.ttl_s = ttl_s
        self.wait_s = wait_s

    @contextlib.asynccontextmanager
    async def hold(self, user_id: int, upstream_id: str) -> AsyncIterator[None]:
        async with _LOCAL_LOCKS.hold((user_id, upstream_id)):
            if self.redis is None:
                yield
                return
            lock = self.redis.lock(f"{LOCK_PREFIX}{user_id}:{upstream_id}", timeout=self.ttl_s,
                                   blocking_timeout=self.wait_s, sleep=0.05)
            try:
                taken = await lock.acquire()
            except (RedisError, OSError) as error:
                log.warning("upstream login refresh lock unavailable (Redis: %s): "
                            "refreshing under this replica's lock only", error)
                yield
                return
            if not taken:
                raise LockTimeout(f"another replica held the refresh lock of upstream "
                                  f"{upstream_id} for over {self.wait_s:g} s")
            try:
                yield
            finally:
                try:
                    await lock.release()
                except (LockError, RedisError, OSError) as error:  # expired meanwhile: gone
                    log.warning("releasing the upstream login refresh lock: %s", error)


_LOCAL_LOCKS: KeyedLocks[tuple[int, str]] = KeyedLocks()
"""This process's refresh locks, per (user, upstream): one entry per login being refreshed."""


class LockTimeout(AuthorizationError):
    """Another replica held a login's refresh lock past the wait."""


class StoredLogin:
    """One user's login to one of their upstreams in the hub's store, as `refresh_shared`
    sees a token store. Bound to its (user, upstream) when made: every read and write is keyed
    by both, whatever key it is asked about, so it cannot reach another user's login."""

    def __init__(self, store: Store, lock: RefreshLock, user_id: int, upstream_id: str) -> None:
        self.store = store
        self.lock = lock
        self.user_id = user_id
        self.upstream_id = upstream_id

    async def load(self) -> StoredGrant | None:
        """The login (None: none, or a record that no longer decodes: logged)."""
        record = await self.store.upstream_logins.get(self.user_id, self.upstream_id)
        if record is None:
            return None
        try:
            return decode_grant(record.encode(), f"the login to upstream {self.upstream_id}")
        except TokenStoreError as error:
            log.error("%s", error)
            return None

    async def save(self, grant: StoredGrant, *, new_login: bool = False) -> None:
        await self.store.upstream_logins.put(self.user_id, self.upstream_id,
                                             encode_grant(grant).decode(), new_login=new_login)

    def refresh_lock(self, key: TokenKey) -> contextlib.AbstractAsyncContextManager[None]:
        return self.lock.hold(self.user_id, self.upstream_id)

    async def get(self, key: TokenKey) -> TokenSet | None:
        grant = await self.load()
        return grant.tokens if grant is not None and grant.key == key else None  # else: a
        # new login (another client, issuer or resource), not the one being refreshed

    async def delete(self, key: TokenKey) -> None:
        await self.store.upstream_logins.delete(self.user_id, self.upstream_id)


class LoginAuth:
    """An `HttpAuth` (mcpkit.auth.provider) over the owner's stored login to one upstream:
    `Authorization: Bearer <the login's access token>`, refreshed as the module says."""

    max_attempts = 1

    def __init__(self, login: StoredLogin, upstream: UpstreamRecord, grant: StoredGrant, *,
                 http: OAuthHttp | None = None,
                 refresh_margin_s: float = REFRESH_MARGIN_S) -> None:
        self.login = login
        self.upstream = upstream
        self.grant = grant
        self.http = http if http is not None else OAuthHttp()
        self.refresh_margin_s = refresh_margin_s
        self._lock = anyio.Lock()

    def __repr__(self) -> str:
        return f"LoginAuth(upstream={self.upstream.id!r}, tokens={self.grant.tokens!r})"

    async def headers(self, url: str, method: str = "POST") -> Mapping[str, str]:
        tokens = self.grant.tokens
        if tokens.expiring(self.refresh_margin_s) and tokens.refresh_token:
            async with self._lock:
                if self.grant.tokens is tokens:
                    await self._renew(tokens)
        return {"Authorization": f"Bearer {self.grant.tokens.access_token}"}

    async def challenge(self, url: str, status: int, headers: Mapping[str, str]) -> bool:
        if status != 401:
            return False  # a 403 (insufficient_scope) is the owner's to fix by logging in
        seen = self.grant.tokens
        async with self._lock:
            if self.grant.tokens is not seen:
                return True  # another request renewed it while this one waited
            if not seen.refresh_token:
                raise UpstreamNeedsLogin(self.upstream, "the upstream refused the login")
            await self._renew(seen)
            return self.grant.tokens.access_token != seen.access_token

    async def _renew(self, seen: TokenSet) -> None:
        grant, upstream = self.grant, self.upstream
        assert grant.metadata is not None and grant.client is not None
        metadata, client = grant.metadata, grant.client

        async def refresh(tokens: TokenSet) -> TokenSet:
            return await oauth_grant.refresh(self.http, metadata, client, tokens,
                                             grant.resource)

        async def keep(tokens: TokenSet) -> None:  # before anything uses the new token
            await self.login.save(dataclasses.replace(grant, tokens=tokens))

        try:
            fresh = await refresh_shared(self.login, grant.key, seen, refresh, keep,
                                         self.refresh_margin_s)
        except oauth_grant.InvalidGrant:
            log.info("the login to upstream %s (user %s) is dead (invalid_grant): removed",
                     upstream.id, upstream.user_id)
            raise UpstreamNeedsLogin(upstream, "the authorization server refused its refresh "
                                               "token") from None
        except LoginRemoved:
            raise UpstreamNeedsLogin(upstream, "logged out") from None
        except AuthorizationError as error:  # a 5xx, the network, the lock: the login stays
            raise UpstreamUnavailable(f"{upstream.name}: refreshing the login failed: "
                                      f"{error}") from None
        self.grant = dataclasses.replace(grant, tokens=fresh)


__all__ = ["LoginAuth", "Purpose", "RefreshLock", "StoredLogin", "UpstreamNeedsLogin",
           "client_auth", "connection_credentials", "credentials_for", "start_path"]
