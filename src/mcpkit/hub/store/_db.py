"""Transactions for the store's repositories, and the one place database errors are translated.

`Database.read()` / `Database.write()` each open a session in a transaction that commits when
the block ends (a read's commit only ends it). A write starts with `BEGIN IMMEDIATE` on SQLite,
so it holds the write lock from its first statement and waits for another writer (busy_timeout)
instead of failing on a lock upgrade. Errors from SQLAlchemy and the drivers leave as
`StoreError`s: an integrity error the caller did not handle becomes `Conflict`, a lost or
locked database `StoreUnavailable`.

A transaction is not interrupted by its caller's cancellation: it is shielded and runs to its
commit or rollback (within `TRANSACTION_LIMIT_S`); the caller's cancellation takes effect at
its next await after the block. Cancelling a statement midway makes SQLAlchemy invalidate the
connection, and with aiosqlite that close races the driver's own stop: each one left a task
that never finished and a worker thread behind (an event loop that cannot close, a process
that cannot exit). A transaction is a few short statements, so waiting for it is cheap.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from sqlalchemy import exc
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from mcpkit.hub.db.engine import SQLITE_BEGIN_OPTION
from mcpkit.hub.store.errors import Conflict, StoreError, StoreUnavailable

TRANSACTION_LIMIT_S = 60.0
"""The most a transaction may take (SQLite waits up to 10 s for the write lock, PostgreSQL up
to 30 s for a pooled connection): past it, it is cancelled after all and `StoreUnavailable`."""


class Database:
    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncSession]:
        async with self._transaction(write=False) as session:
            yield session

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncSession]:
        async with self._transaction(write=True) as session:
            yield session

    @asynccontextmanager
    async def _transaction(self, *, write: bool) -> AsyncIterator[AsyncSession]:
        limit = anyio.CancelScope(shield=True,
                                  deadline=anyio.current_time() + TRANSACTION_LIMIT_S)
        try:
            with limit:
                async with self.sessions() as session:
                    if write:
                        await session.connection(
                            execution_options={SQLITE_BEGIN_OPTION: "IMMEDIATE"}
                        )
                    yield session
                    await session.commit()
        except StoreError:
            raise
        except exc.IntegrityError as error:
            raise Conflict("integrity", "the change conflicts with stored data") from error
        except (exc.OperationalError, exc.InterfaceError, exc.TimeoutError, OSError) as error:
            reason = f"the database is unavailable ({type(error).__name__})"
            raise StoreUnavailable(reason) from error
        except exc.SQLAlchemyError as error:
            raise StoreError(f"database error ({type(error).__name__})") from error
        if limit.cancelled_caught:  # the block was cut short: nothing it meant to return
            raise StoreUnavailable(
                f"a database transaction took longer than {TRANSACTION_LIMIT_S:g} s")


def describe(error: BaseException) -> str:
    """A one-line account of a database error: the driver's message without SQLAlchemy's
    statement dump and links."""
    cause = getattr(error, "orig", None) or error
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}".rstrip(": ")


def is_unique_violation(error: exc.IntegrityError) -> bool:
    """Whether an integrity error is a UNIQUE (not a foreign key or CHECK) violation."""
    text = str(error.orig).lower()
    sqlstate = getattr(error.orig, "sqlstate", None) or getattr(error.orig, "pgcode", None)
    return sqlstate == "23505" or "unique" in text
