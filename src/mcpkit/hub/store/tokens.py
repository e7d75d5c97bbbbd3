"""API tokens: bearer secrets shown once, stored as their sha256 (see mcpkit.hub.crypto).

`verify(secret)` is on every request's path: one indexed lookup by hash, and at most one write
a minute per token (`last_used_at`), done as a conditional UPDATE so replicas do not pile up.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import exc, or_, select, update

from mcpkit.hub.crypto import (
    API_TOKEN_PREFIX,
    hash_token,
    new_api_token,
    token_display_prefix,
    tokens_equal,
)
from mcpkit.hub.db.models import ApiToken, User
from mcpkit.hub.store import validation as check
from mcpkit.hub.store._db import Database
from mcpkit.hub.store.errors import Invalid, NotFound
from mcpkit.hub.store.records import NewToken, TokenRecord, UserRecord
from mcpkit.hub.store.users import user_record

LAST_USED_RESOLUTION = timedelta(minutes=1)
MAX_SECRET_LENGTH = 256


def token_record(row: ApiToken) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        user_id=row.user_id,
        name=row.name,
        prefix=row.prefix,
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
    )


class Tokens:
    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self._db = db
        self._clock = clock

    async def create(
        self, user_id: int, *, name: str = "default", expires_at: datetime | None = None
    ) -> NewToken:
        """A new token for the user; its `secret` is in the result and nowhere else."""
        name = check.token_name(name)
        now = self._clock()
        if expires_at is not None and check.aware(expires_at, "expires_at") <= now:
            raise Invalid("expires_at", "must be in the future")
        secret = new_api_token()
        row = ApiToken(
            user_id=user_id,
            name=name,
            token_hash=hash_token(secret),
            prefix=token_display_prefix(secret),
            created_at=now,
            expires_at=expires_at,
        )
        async with self._db.write() as session:
            session.add(row)
            try:
                await session.flush()
            except exc.IntegrityError as error:  # the user does not exist
                raise NotFound("user", user_id) from error
            return NewToken(token_record(row), secret)

    async def verify(self, secret: str) -> UserRecord | None:
        """The (enabled) user a valid token belongs to; None for an unknown, revoked or expired
        token or a disabled user - the caller answers all of them the same way (401)."""
        if not secret.startswith(API_TOKEN_PREFIX) or len(secret) > MAX_SECRET_LENGTH:
            return None
        digest = hash_token(secret)
        now = self._clock()
        async with self._db.read() as session:
            found = (
                await session.execute(
                    select(ApiToken, User)
                    .join(User, User.id == ApiToken.user_id)
                    .where(ApiToken.token_hash == digest)
                )
            ).one_or_none()
        if found is None:
            return None
        token, user = found
        if not tokens_equal(token.token_hash, digest) or not token_record(token).active(now):
            return None
        if user.disabled:
            return None
        if token.last_used_at is None or now - token.last_used_at >= LAST_USED_RESOLUTION:
            await self._touch(token.id, now)
        return user_record(user)

    async def _touch(self, token_id: int, now: datetime) -> None:
        async with self._db.write() as session:
            await session.execute(
                update(ApiToken)
                .where(
                    ApiToken.id == token_id,
                    or_(
                        ApiToken.last_used_at.is_(None),
                        ApiToken.last_used_at <= now - LAST_USED_RESOLUTION,
                    ),
                )
                .values(last_used_at=now)
            )

    async def revoke(self, token_id: int, *, user_id: int | None = None) -> TokenRecord:
        """Revoke a token (only the user's own when `user_id` is given); revoking twice keeps
        the first time."""
        query = select(ApiToken).where(ApiToken.id == token_id)
        if user_id is not None:
            query = query.where(ApiToken.user_id == user_id)
        async with self._db.write() as session:
            row = await session.scalar(query)
            if row is None:
                raise NotFound("token", token_id)
            if row.revoked_at is None:
                row.revoked_at = self._clock()
                await session.flush()
            return token_record(row)

    async def list(self, user_id: int) -> tuple[TokenRecord, ...]:
        """A user's tokens, oldest first (revoked and expired ones too: they say what happened)."""
        async with self._db.read() as session:
            rows = await session.scalars(
                select(ApiToken).where(ApiToken.user_id == user_id).order_by(ApiToken.id)
            )
            return tuple(token_record(row) for row in rows)
