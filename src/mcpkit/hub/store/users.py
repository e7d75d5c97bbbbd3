"""Users: who may call the hub. Names are unique slugs; admins manage other users."""

from __future__ import annotations

from sqlalchemy import exc, func, select, update

from mcpkit.hub.db.models import User, utcnow
from mcpkit.hub.store import validation as check
from mcpkit.hub.store._db import Database, is_unique_violation
from mcpkit.hub.store._paging import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor
from mcpkit.hub.store.errors import Conflict, NotFound
from mcpkit.hub.store.records import Page, UserRecord


def user_record(row: User) -> UserRecord:
    return UserRecord(
        id=row.id,
        name=row.name,
        is_admin=row.is_admin,
        disabled=row.disabled,
        created_at=row.created_at,
    )


class Users:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, name: str, *, is_admin: bool = False) -> UserRecord:
        """A new user; `Conflict("name")` if the name is taken."""
        row = User(
            name=check.name(name), is_admin=check.flag(is_admin, "is_admin"), created_at=utcnow()
        )
        async with self._db.write() as session:
            session.add(row)
            try:
                await session.flush()
            except exc.IntegrityError as error:
                if is_unique_violation(error):
                    raise Conflict("name", f"a user named {name!r} exists") from error
                raise
            return user_record(row)

    async def get(self, user_id: int) -> UserRecord:
        async with self._db.read() as session:
            row = await session.get(User, user_id)
            if row is None:
                raise NotFound("user", user_id)
            return user_record(row)

    async def get_by_name(self, name: str) -> UserRecord:
        async with self._db.read() as session:
            row = await session.scalar(select(User).where(User.name == name))
            if row is None:
                raise NotFound("user", name)
            return user_record(row)

    async def list(
        self, *, limit: int = DEFAULT_LIMIT, cursor: str | None = None
    ) -> Page[UserRecord]:
        """Users by name, `limit` at a time; pass `next_cursor` back for the next page."""
        limit = check.limit(limit, MAX_LIMIT)
        after = decode_cursor(cursor)
        query = select(User).order_by(User.name).limit(limit + 1)
        if after is not None:
            query = query.where(User.name > after)
        async with self._db.read() as session:
            rows = list(await session.scalars(query))
        items = tuple(user_record(row) for row in rows[:limit])
        more = len(rows) > limit
        return Page(items, encode_cursor(items[-1].name) if more else None)

    async def count(self) -> int:
        """How many users there are (disabled ones too): the start-up summary's figure."""
        async with self._db.read() as session:
            return int(await session.scalar(select(func.count()).select_from(User)) or 0)

    async def set_disabled(self, user_id: int, disabled: bool = True) -> UserRecord:
        """Disable (or enable again) a user: a disabled user's tokens stop working."""
        return await self._set(user_id, disabled=check.flag(disabled, "disabled"))

    async def set_admin(self, user_id: int, is_admin: bool = True) -> UserRecord:
        return await self._set(user_id, is_admin=check.flag(is_admin, "is_admin"))

    async def set_password_hash(self, user_id: int, password_hash: str | None) -> None:
        """Store a user's password hash (mcpkit.hub.passwords); None removes the password."""
        async with self._db.write() as session:
            done = await session.scalar(
                update(User).where(User.id == user_id)
                .values(password_hash=password_hash).returning(User.id))
            if done is None:
                raise NotFound("user", user_id)

    async def sign_in_record(self, name: str) -> tuple[UserRecord, str | None] | None:
        """The user named `name` and their password hash, or None for an unknown name."""
        async with self._db.read() as session:
            row = await session.scalar(select(User).where(User.name == name))
            return None if row is None else (user_record(row), row.password_hash)

    async def _set(self, user_id: int, **values: bool) -> UserRecord:
        async with self._db.write() as session:
            row = await session.scalar(
                update(User).where(User.id == user_id).values(**values).returning(User)
            )
            if row is None:
                raise NotFound("user", user_id)
            return user_record(row)
