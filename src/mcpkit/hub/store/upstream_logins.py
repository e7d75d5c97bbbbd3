"""Users' OAuth logins to their upstreams, and the logins started and not yet finished.

    logins   get, put, delete (a user's login to one of their upstreams: a sealed record)
    pending  save (bounded per user, expired rows purged), take (single use)

Isolation is structural, as for upstreams: every login query is keyed by the owning user id
AND the upstream id, and `put` writes only for an upstream that user owns - there is no way
to read or write a login by the upstream alone. Both rows go with the upstream or the user
(foreign keys cascade).

What is stored is opaque here: the caller's record (hub/upstream_auth.py: the grant, or what
a callback needs), sealed with the hub's SecretBox before it is written. A pending login is
found by the sha256 of its `state` (a database dump holds no usable state) and taken by one
`DELETE … RETURNING`, so two callbacks racing with the same state cannot both win.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from mcpkit.hub.crypto import CredentialError, SecretBox
from mcpkit.hub.db.models import Upstream, UpstreamLogin, UpstreamLoginState
from mcpkit.hub.store._db import Database
from mcpkit.hub.store.upstreams import require_owned

MAX_PENDING_PER_USER = 20
"""Logins one user may have started and not finished; starting another drops the oldest."""
PURGE_BATCH = 500
"""Expired pending logins deleted at most per save (a bounded cost)."""


@dataclass(frozen=True, slots=True)
class Pending:
    """A pending login, taken: whose, for which upstream, until when, and its sealed data
    (opened)."""

    user_id: int
    upstream_id: str
    expires_at: datetime
    data: str


class UpstreamLogins:
    def __init__(self, db: Database, box: SecretBox | None, clock: Callable[[], datetime],
                 *, max_pending_per_user: int = MAX_PENDING_PER_USER) -> None:
        self._db = db
        self._box = box
        self._clock = clock
        self.max_pending_per_user = max_pending_per_user

    def now(self) -> datetime:
        """The store's clock (tests move it)."""
        return self._clock()

    # --- logins --------------------------------------------------------------------------

    async def get(self, user_id: int, upstream_id: str) -> str | None:
        """The user's login record for their upstream (opened), None when there is none."""
        async with self._db.read() as session:
            sealed = await session.scalar(select(UpstreamLogin.grant_sealed).where(
                UpstreamLogin.user_id == user_id, UpstreamLogin.upstream_id == upstream_id))
        return None if sealed is None else self._require_box().open_text(sealed)

    async def has(self, user_id: int, upstream_id: str) -> bool:
        async with self._db.read() as session:
            found = await session.scalar(select(UpstreamLogin.upstream_id).where(
                UpstreamLogin.user_id == user_id, UpstreamLogin.upstream_id == upstream_id))
        return found is not None

    async def put(self, user_id: int, upstream_id: str, record: str, *,
                  new_login: bool = False) -> None:
        """Store (or replace) the user's login record for their upstream; `NotFound` when the
        upstream is not theirs (or gone). A `new_login` (not a refresh) bumps the upstream's
        version, so every replica's open connection to it is replaced at its next use."""
        sealed = self._require_box().seal(record)
        now = self._clock()
        async with self._db.write() as session:
            upstream = await require_owned(session, user_id, upstream_id, lock=new_login)
            if new_login:
                upstream.version += 1
            row = await session.get(UpstreamLogin, (user_id, upstream_id))
            if row is None:
                session.add(UpstreamLogin(user_id=user_id, upstream_id=upstream_id,
                                          grant_sealed=sealed, created_at=now, updated_at=now))
            else:
                row.grant_sealed, row.updated_at = sealed, now

    async def delete(self, user_id: int, upstream_id: str) -> bool:
        """Remove the user's login to their upstream; whether there was one. Removing one
        bumps the upstream's version (open connections holding its tokens are replaced)."""
        async with self._db.write() as session:
            result = await session.execute(
                delete(UpstreamLogin)
                .where(UpstreamLogin.user_id == user_id,
                       UpstreamLogin.upstream_id == upstream_id)
                .returning(UpstreamLogin.upstream_id))
            removed = result.scalar_one_or_none() is not None
            if removed:
                await session.execute(
                    update(Upstream)
                    .where(Upstream.user_id == user_id, Upstream.id == upstream_id)
                    .values(version=Upstream.version + 1))
            return removed

    # --- pending logins ------------------------------------------------------------------

    async def save_pending(self, state_hash: str, user_id: int, upstream_id: str, data: str,
                           expires_at: datetime) -> None:
        """Keep a started login (after purging expired ones, and the user's oldest past
        `max_pending_per_user`); `NotFound` when the upstream is not the user's."""
        sealed = self._require_box().seal(data)
        async with self._db.write() as session:
            await require_owned(session, user_id, upstream_id)
            await self._purge(session, user_id)
            session.add(UpstreamLoginState(state_hash=state_hash, user_id=user_id,
                                           upstream_id=upstream_id, pending_sealed=sealed,
                                           expires_at=expires_at))

    async def take_pending(self, state_hash: str) -> Pending | None:
        """The pending login with this state hash, removed (single use); None when there is
        none. An expired one is removed and returned too: the caller tells the user so."""
        async with self._db.write() as session:
            result = await session.execute(
                delete(UpstreamLoginState)
                .where(UpstreamLoginState.state_hash == state_hash)
                .returning(UpstreamLoginState.user_id, UpstreamLoginState.upstream_id,
                           UpstreamLoginState.expires_at, UpstreamLoginState.pending_sealed))
            row = result.one_or_none()
        if row is None:
            return None
        user_id, upstream_id, expires_at, sealed = row
        return Pending(user_id, upstream_id, expires_at, self._require_box().open_text(sealed))

    async def _purge(self, session: AsyncSession, user_id: int) -> None:
        """Delete a batch of expired pending logins, and the user's oldest beyond what the
        new one leaves room for."""
        expired = (select(UpstreamLoginState.state_hash)
                   .where(UpstreamLoginState.expires_at < self._clock()).limit(PURGE_BATCH))
        newest = (select(UpstreamLoginState.state_hash)
                  .where(UpstreamLoginState.user_id == user_id)
                  .order_by(UpstreamLoginState.expires_at.desc())
                  .limit(max(0, self.max_pending_per_user - 1)))
        for doomed in (UpstreamLoginState.state_hash.in_(expired),
                       (UpstreamLoginState.user_id == user_id)
                       & UpstreamLoginState.state_hash.not_in(newest)):
            await session.execute(delete(UpstreamLoginState).where(doomed)
                                  .execution_options(synchronize_session=False))

    def _require_box(self) -> SecretBox:
        if self._box is None:
            raise CredentialError(
                "no secret key is configured for upstream logins (MCPKIT_HUB_SECRET_KEY)")
        return self._box
