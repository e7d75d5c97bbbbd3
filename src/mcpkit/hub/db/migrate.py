"""Schema migrations, run from Python: no alembic.ini for users.

    await upgrade(engine)          bring the database to the newest revision (idempotent)
    await migrate(database_url)    the same with an engine of its own
    await current_revision(engine) the revision the database is at (None: never migrated)
    head_revision()                the newest revision shipped with this mcpkit
    await schema_differences(engine)
                                   what alembic's compare_metadata finds between the database
                                   and the models ([] when they match)

The upgrade is one transaction: `BEGIN IMMEDIATE` on SQLite, and on PostgreSQL an advisory
lock taken first, so replicas that start together migrate once and the others wait, then find
the database at head. The revisions live in `migrations/versions/`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from mcpkit.hub.db.engine import SQLITE_BEGIN_OPTION, make_engine
from mcpkit.hub.db.models import Base

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# pg_advisory_xact_lock key held while migrating ("mcpk" in ASCII)
MIGRATION_LOCK_KEY = 0x6D63706B


def alembic_config(connection: Connection | None = None) -> Config:
    """An alembic `Config` for the hub's migrations, handing over `connection` to env.py."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:  # pragma: no cover - the package ships its revisions
        # builtin: an invariant, like an assert
        raise RuntimeError(f"no migrations in {MIGRATIONS_DIR}")
    return head


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    """Migrate the database of `engine` to `revision` in one transaction."""
    async with engine.connect() as connection:
        connection = await connection.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
        async with connection.begin():
            if connection.dialect.name == "postgresql":
                await connection.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
            await connection.run_sync(_upgrade, revision)


async def migrate(database_url: str | None = None) -> None:
    """`upgrade()` the database at `database_url` (default: the hub's default URL) to head."""
    engine = make_engine(database_url)
    try:
        await upgrade(engine)
    finally:
        await engine.dispose()


async def current_revision(engine: AsyncEngine) -> str | None:
    async with engine.connect() as connection:
        return await connection.run_sync(
            lambda sync: MigrationContext.configure(sync).get_current_revision()
        )


async def schema_differences(engine: AsyncEngine) -> list[Any]:
    """alembic's diff between the database and the models; [] when the schema is as declared."""
    async with engine.connect() as connection:
        return await connection.run_sync(_differences)


def _upgrade(connection: Connection, revision: str) -> None:
    command.upgrade(alembic_config(connection), revision)


def _differences(connection: Connection) -> list[Any]:
    context = MigrationContext.configure(connection, opts={"compare_type": True})
    return list(compare_metadata(context, Base.metadata))
