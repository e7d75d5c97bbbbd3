"""The hub's migrations: a fresh database (SQLite file, PostgreSQL) goes to head, the result is
exactly the models' schema, and running them again (or from several processes) changes nothing."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from sqlalchemy import text

from mcpkit.hub.db import migrate as migrations
from mcpkit.hub.db.engine import make_engine
from mcpkit.hub.db.models import Base

pytestmark = pytest.mark.anyio

TABLES = {
    "users",
    "api_tokens",
    "upstreams",
    "upstream_tools",
    "upstream_prompts",
    "upstream_resources",
    "upstream_resource_templates",
    "audit_events",
    "oauth_clients",
    "oauth_codes",
    "oauth_consents",
    "oauth_refresh_tokens",
    "oauth_signing_keys",
    "upstream_logins",
    "upstream_login_states",
    "upstream_oauth_clients",
    "oidc_identities",
}


def test_the_models_declare_the_tables() -> None:
    assert set(Base.metadata.tables) == TABLES


def test_the_revisions_ship_inside_the_package() -> None:
    directory = migrations.MIGRATIONS_DIR
    assert directory.is_relative_to(Path(migrations.__file__).parent)
    assert (directory / "env.py").is_file()
    files = sorted(p.name for p in (directory / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
    numbers = [name[:4] for name in files]
    # one revision per number, and the newest is the (single) head
    assert numbers == sorted(set(numbers)), files
    assert migrations.head_revision() == numbers[-1]


async def test_a_fresh_database_migrates_to_exactly_the_models(database_url: str) -> None:
    engine = make_engine(database_url)
    try:
        assert await migrations.current_revision(engine) is None
        await migrations.upgrade(engine)
        assert await migrations.current_revision(engine) == migrations.head_revision()
        assert await migrations.schema_differences(engine) == []
        async with engine.connect() as connection:
            names = await connection.run_sync(
                lambda sync: set(sync.dialect.get_table_names(sync))
            )
        assert names == TABLES | {"alembic_version"}
    finally:
        await engine.dispose()


async def test_migrating_again_changes_nothing(database_url: str) -> None:
    await migrations.migrate(database_url)
    engine = make_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(
                text("INSERT INTO users (name, is_admin, disabled, created_at) "
                     "VALUES ('kept', false, false, CURRENT_TIMESTAMP)")
            )
        await migrations.upgrade(engine)
        await migrations.migrate(database_url)
        async with engine.connect() as connection:
            assert (await connection.execute(text("SELECT name FROM users"))).scalars().all() == [
                "kept"
            ]
        assert await migrations.schema_differences(engine) == []
    finally:
        await engine.dispose()


async def test_the_comparison_would_see_a_difference(database_url: str) -> None:
    """The schema check is not vacuous: drop an index and it says so."""
    engine = make_engine(database_url)
    try:
        await migrations.upgrade(engine)
        async with engine.begin() as connection:
            await connection.execute(text("DROP INDEX ix_audit_events_user_id_at"))
        differences = await migrations.schema_differences(engine)
        assert [d[0] for d in differences] == ["add_index"]
    finally:
        await engine.dispose()


async def test_replicas_starting_together_migrate_once(database_url: str) -> None:
    engines = [make_engine(database_url) for _ in range(4)]
    try:
        async with anyio.create_task_group() as group:
            for engine in engines:
                group.start_soon(migrations.upgrade, engine)
        for engine in engines:
            assert await migrations.current_revision(engine) == migrations.head_revision()
        assert await migrations.schema_differences(engines[0]) == []
    finally:
        for engine in engines:
            await engine.dispose()


async def test_a_sqlite_database_gets_wal_foreign_keys_and_owner_only_mode(tmp_path: Path) -> None:
    path = tmp_path / "new" / "dir" / "hub.db"
    engine = make_engine(f"sqlite:///{path}")  # no driver named: the async one is used
    try:
        await migrations.upgrade(engine)
        async with engine.connect() as connection:
            pragma = {
                name: (await connection.exec_driver_sql(f"PRAGMA {name}")).scalar()
                for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
            }
    finally:
        await engine.dispose()
    assert pragma == {"journal_mode": "wal", "synchronous": 1, "foreign_keys": 1,
                      "busy_timeout": 10_000}
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700


def test_unusable_urls_are_value_errors() -> None:
    for url in ("mysql://u@h/db", "::", "nosuchdialect://x"):
        with pytest.raises(ValueError):
            make_engine(url)
