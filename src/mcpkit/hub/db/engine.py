"""Engines and sessions for the hub's registry: SQLite by default, PostgreSQL for replicas.

    make_engine(url)          an `AsyncEngine`, tuned for its database (below)
    session_factory(engine)   an `async_sessionmaker` (objects stay usable after commit)
    default_data_dir()        $MCPKIT_HUB_DATA, else ~/.local/share/mcpkit/hub
    default_database_url()    $MCPKIT_HUB_DATABASE_URL, else sqlite+aiosqlite:///<data dir>/hub.db

SQLite (one hub process; no setup): the file is put in `journal_mode=WAL` when the engine is
made (readers never block the writer); every connection gets `synchronous=NORMAL` (a
committed transaction survives the process being killed; a power cut may lose the last
ones), `foreign_keys=ON` (cascades) and a `busy_timeout` (a writer waits for another instead
of failing at once). Transactions are real ones: the
driver's implicit-transaction mode is turned off and SQLAlchemy's `begin` emits `BEGIN`, or
`BEGIN IMMEDIATE` on a connection with the execution option `sqlite_begin="IMMEDIATE"` - what
the store uses for writes, so that a transaction that reads then writes takes the write lock
first and waits its turn instead of failing with SQLITE_BUSY.

PostgreSQL (`postgresql+asyncpg://…`, several replicas): a bounded pool, connections checked
before use (`pool_pre_ping`, so a restarted database is survived) and recycled after 30 min.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, InvalidRequestError
from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from mcpkit.errors import InvalidArgument

DATA_ENV = "MCPKIT_HUB_DATA"
DATABASE_URL_ENV = "MCPKIT_HUB_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 10_000
SQLITE_BEGIN_OPTION = "sqlite_begin"  # execution option: "DEFERRED" (default) or "IMMEDIATE"
ASYNC_DRIVERS = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg",
                 "postgres": "postgresql+asyncpg"}


def default_data_dir() -> Path:
    """Where the hub keeps its SQLite file and generated key: $MCPKIT_HUB_DATA or the XDG path."""
    configured = os.environ.get(DATA_ENV)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".local" / "share" / "mcpkit" / "hub"


def sqlite_url(path: Path) -> str:
    """The async SQLite URL of a database file."""
    return f"sqlite+aiosqlite:///{path}"


def default_database_url() -> str:
    """$MCPKIT_HUB_DATABASE_URL, else the SQLite file `hub.db` in `default_data_dir()`."""
    return os.environ.get(DATABASE_URL_ENV) or sqlite_url(default_data_dir() / "hub.db")


def async_url(database_url: str | URL) -> URL:
    """The URL with the async driver the hub uses when none is named: `postgresql://…` means
    asyncpg and `sqlite://…` aiosqlite. `InvalidArgument` (a ValueError) for what is not a
    database URL."""
    try:
        url = make_url(database_url)
    except ArgumentError:
        raise InvalidArgument("not a database URL (sqlite+aiosqlite:///PATH or "
                              "postgresql+asyncpg://USER@HOST/DB)") from None
    if "+" not in url.drivername:
        url = url.set(drivername=ASYNC_DRIVERS.get(url.drivername, url.drivername))
    return url


def is_sqlite(url: str | URL) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def make_engine(database_url: str | None = None, *, echo: bool = False) -> AsyncEngine:
    """An async engine for `database_url` (default: `default_database_url()`; a URL without a
    driver gets the async one, see `async_url`); `InvalidArgument` (a ValueError) for a URL
    the hub cannot use.

    A SQLite file and its directory are created (modes 0600 and 0700) if missing. The caller
    disposes of the engine (`await engine.dispose()`).
    """
    url = async_url(database_url or default_database_url())
    backend = url.get_backend_name()
    try:
        if backend == "sqlite":
            return _sqlite_engine(url, echo)
        if backend == "postgresql":
            return create_async_engine(
                url,
                echo=echo,
                pool_size=10,
                max_overflow=20,
                pool_timeout=30,
                pool_recycle=1800,
                pool_pre_ping=True,
            )
    except (ArgumentError, InvalidRequestError) as error:
        raise InvalidArgument(f"unsupported database URL {url.drivername}://… ({error})") from None
    raise InvalidArgument(f"the hub keeps its registry in SQLite or PostgreSQL, not {backend}")


def session_factory(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions bound to `engine`; loaded objects keep their values after commit."""
    return async_sessionmaker(engine, expire_on_commit=False)


def _sqlite_engine(url: URL, echo: bool) -> AsyncEngine:
    database = url.database
    if database and database != ":memory:" and not database.startswith("file:"):
        path = Path(database).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # token hashes and sealed credentials: owner-only (SQLite gives -wal/-shm the same mode)
        os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
        _use_wal(path)
    engine = create_async_engine(url, echo=echo)
    event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
    event.listen(engine.sync_engine, "begin", _sqlite_on_begin)
    return engine


def _use_wal(path: Path) -> None:
    """Put the database file in WAL mode once, before any engine connection exists.

    The journal mode is stored in the file. Switching it needs the database to itself and
    SQLite answers "database is locked" at once, without waiting for `busy_timeout`, when
    another connection is inside a transaction - so switching on every new pooled
    connection failed when several engines (replicas starting together) opened the same
    new file at once."""
    connection = sqlite3.connect(path, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000)
    try:
        connection.execute("PRAGMA journal_mode = WAL")
    finally:
        connection.close()


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    # Turn off the driver's own transaction handling: `_sqlite_on_begin` emits BEGIN instead.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode")
        if str(cursor.fetchone()[0]).lower() != "wal":  # a memory or URI database
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = NORMAL")
        cursor.execute("PRAGMA foreign_keys = ON")
    finally:
        cursor.close()


def _sqlite_on_begin(connection: Connection) -> None:
    mode = connection.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")
    if mode not in ("DEFERRED", "IMMEDIATE", "EXCLUSIVE"):
        raise InvalidArgument(f"{SQLITE_BEGIN_OPTION}: {mode!r} is not a SQLite transaction mode")
    connection.exec_driver_sql(f"BEGIN {mode}")
