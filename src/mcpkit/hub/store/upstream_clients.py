"""The hub's own client registrations (DCR) at upstreams' authorization servers, one per
(issuer, redirect URI), reused by every user's upstream login there.

    record = await clients.get(issuer, redirect_uri, max_age=…)   # opened, or None
    await clients.put(issuer, redirect_uri, record)                # kept (the bound applied)
    await clients.forget(issuer, redirect_uri)                     # the server forgot it

The registration is not a user's: it names the hub as a client (client id, maybe a secret),
never a user or a token. It is still sealed with the hub's SecretBox (a client secret is a
credential), and found by the sha256 of its key. At most `max_clients` are kept: a `put` past
it deletes the least recently used; a `get` marks a row used. Two replicas registering at
once both succeed: the last `put` is kept, and the other registration stays valid at the
server for the login that holds it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import delete, func, select

from mcpkit.errors import InvalidArgument
from mcpkit.hub.crypto import CredentialError, SecretBox
from mcpkit.hub.db.models import UpstreamOAuthClient
from mcpkit.hub.store._db import Database

MAX_CLIENTS = 1000
"""Registrations kept in all (one per authorization server and redirect URI the hub's users
log in to); past it the least recently used is dropped (a later login there registers
again)."""


def client_key(issuer: str, redirect_uri: str) -> str:
    return hashlib.sha256(f"{issuer}\n{redirect_uri}".encode()).hexdigest()


class UpstreamClients:
    def __init__(self, db: Database, box: SecretBox | None, clock: Callable[[], datetime],
                 *, max_clients: int = MAX_CLIENTS) -> None:
        if max_clients < 1:
            raise InvalidArgument(f"max_clients must be at least 1, not {max_clients}")
        self._db = db
        self._box = box
        self._clock = clock
        self.max_clients = max_clients

    async def get(self, issuer: str, redirect_uri: str, *, max_age: timedelta
                  ) -> str | None:
        """The registration kept for the pair (opened), marked used; None when there is
        none, or it is older than `max_age` (then it is deleted: registered again)."""
        key, now = client_key(issuer, redirect_uri), self._clock()
        async with self._db.write() as session:
            row = await session.get(UpstreamOAuthClient, key)
            if row is None:
                return None
            if row.created_at < now - max_age:
                await session.delete(row)
                return None
            row.used_at = now
            sealed = row.registration_sealed
        return self._require_box().open_text(sealed)

    async def put(self, issuer: str, redirect_uri: str, record: str) -> None:
        """Keep (or replace) the pair's registration; the least recently used beyond
        `max_clients` are deleted."""
        key, now = client_key(issuer, redirect_uri), self._clock()
        sealed = self._require_box().seal(record)
        async with self._db.write() as session:
            row = await session.get(UpstreamOAuthClient, key)
            if row is None:
                session.add(UpstreamOAuthClient(key_hash=key, registration_sealed=sealed,
                                                created_at=now, used_at=now))
            else:
                row.registration_sealed, row.created_at, row.used_at = sealed, now, now
            await session.flush()
            others = UpstreamOAuthClient.key_hash != key  # this one stays, whatever the ties
            kept = (select(UpstreamOAuthClient.key_hash).where(others)
                    .order_by(UpstreamOAuthClient.used_at.desc()).limit(self.max_clients - 1))
            await session.execute(delete(UpstreamOAuthClient)
                                  .where(others, UpstreamOAuthClient.key_hash.not_in(kept))
                                  .execution_options(synchronize_session=False))

    async def forget(self, issuer: str, redirect_uri: str) -> bool:
        """Drop the pair's registration (the server no longer knows it); whether one was
        kept."""
        async with self._db.write() as session:
            result = await session.execute(
                delete(UpstreamOAuthClient)
                .where(UpstreamOAuthClient.key_hash == client_key(issuer, redirect_uri))
                .returning(UpstreamOAuthClient.key_hash))
            return result.scalar_one_or_none() is not None

    async def count(self) -> int:
        async with self._db.read() as session:
            return int(await session.scalar(select(func.count()).select_from(
                UpstreamOAuthClient)) or 0)

    def _require_box(self) -> SecretBox:
        if self._box is None:
            raise CredentialError(
                "no secret key is configured for upstream logins (MCPKIT_HUB_SECRET_KEY)")
        return self._box
