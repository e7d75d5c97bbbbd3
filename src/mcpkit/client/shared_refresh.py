"""One refresh of a stored token, however many processes and tasks find it expired at once.

Refresh tokens are often single-use and rotated: when two holders of the same one both
refresh, the authorization server sees a reuse and revokes the whole family (RFC 9700 §4.14.2),
and both are logged out. So every refresh of a stored grant runs under the store's
`refresh_lock(key)` (an in-process lock, then the key's lock file), and the one that holds it
reads the store again first:

    the stored access token differs from the one this holder found expired, and is itself
        still good  ->  another holder refreshed meanwhile: use its tokens, no request
    otherwise       ->  refresh with the freshest refresh token (the stored one when there is
                        one), write the result to the store (atomically, before anything uses
                        the new access token: a rotated refresh token must not exist only in
                        memory), then use it

No entry at all under the lock means the login was removed meanwhile (a logout, or another
holder's `invalid_grant`): LoginRemoved, and nothing is refreshed or stored again - a running
process does not undo a logout.

A failed refresh keeps the stored entry - a network error, a 5xx, a timeout say nothing about
the refresh token - except `invalid_grant`, which says it is dead: then the entry is removed
(only if it still holds that same dead refresh token)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Protocol

from mcpkit.auth.errors import AuthorizationError
from mcpkit.auth.tokens import TokenKey, TokenSet
from mcpkit.client.oauth_grant import InvalidGrant
from mcpkit.client.token_records import TokenStoreError

log = logging.getLogger(__name__)


class SharedTokens(Protocol):
    """What a shared refresh needs of a store: its lock across holders (a
    `PersistentTokenStore`'s lock file; the hub's Redis lock for upstream logins), and reading
    and removing the tokens under it."""

    def refresh_lock(self, key: TokenKey) -> AbstractAsyncContextManager[None]: ...
    async def get(self, key: TokenKey) -> TokenSet | None: ...
    async def delete(self, key: TokenKey) -> None: ...


class LoginRemoved(AuthorizationError):
    """The stored login was removed while this process held its tokens (a logout, or a refresh
    token found dead by another process): its refresh token is not used again."""


async def refresh_shared(store: SharedTokens, key: TokenKey, seen: TokenSet,
                         refresh: Callable[[TokenSet], Awaitable[TokenSet]],
                         keep: Callable[[TokenSet], Awaitable[None]],
                         margin_s: float) -> TokenSet:
    """The tokens to use instead of `seen` (see the module docstring). `refresh` sends the
    refresh-token grant for the tokens it is given; `keep` writes new tokens to the store."""
    async with store.refresh_lock(key):
        kept = await store.get(key)
        if kept is None:
            raise LoginRemoved(f"the stored login for {key.resource} was removed (logged out?)"
                               ": not refreshing it")
        if kept.access_token != seen.access_token and not kept.expiring(margin_s):
            log.info("the access token for %s was refreshed by another process or task: "
                     "using it", key.resource)
            return kept
        current = kept if kept.refresh_token else seen
        try:
            fresh = await refresh(current)
        except InvalidGrant:
            if kept.refresh_token == current.refresh_token:
                log.info("the refresh token for %s is no longer valid (invalid_grant): "
                         "removing the stored login", key.resource)
                await store.delete(key)
            raise
        try:
            await keep(fresh)
        except TokenStoreError as exc:
            # the new tokens are used anyway: dropping them would lose a rotated refresh token
            log.error("could not store the refreshed tokens for %s: %s", key.resource, exc)
        return fresh
