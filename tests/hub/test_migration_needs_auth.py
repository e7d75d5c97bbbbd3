"""Migration 0011 (health status "needs_auth", catalog credentials) on a database with data,
SQLite and PostgreSQL: the upgrade keeps every upstream, its catalog and its owner's login
(SQLite recreates the table, whose DROP would cascade to them: so do 0005's and 0009's,
which keep them too), the new status is accepted and a foreign one still refused, and the downgrade
turns needs_auth into unhealthy and drops the columns."""

from __future__ import annotations

from typing import Any

import pytest
from alembic import command
from sqlalchemy import exc, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from mcpkit.hub.db import migrate as migrations
from mcpkit.hub.db.engine import make_engine

pytestmark = pytest.mark.anyio

OLDER = "0004"
"""Before 0005 (auth_mode), which rebuilds upstreams on SQLite too."""
BEFORE = "0010"
THIS = "0011"
UPSTREAM = "00000000-0000-4000-8000-000000000007"


def _downgrade(connection: Connection, revision: str) -> None:
    command.downgrade(migrations.alembic_config(connection), revision)


async def _rows(engine: AsyncEngine, query: str) -> list[Any]:
    async with engine.connect() as connection:
        return list((await connection.execute(text(query))).all())


async def _execute(engine: AsyncEngine, statement: str) -> None:
    async with engine.begin() as connection:
        await connection.execute(text(statement))


async def _seed(engine: AsyncEngine) -> None:
    """A user and an upstream with two tools, at revision 0004."""
    for statement in (
        "INSERT INTO users (id, name, is_admin, disabled, created_at) "
        "VALUES (1, 'alice', false, false, CURRENT_TIMESTAMP)",
        "INSERT INTO upstreams (id, user_id, name, transport, url, enabled, disabled_tools, "
        "connect_timeout_s, call_timeout_s, health_status, tool_count, created_at, "
        f"updated_at, version) VALUES ('{UPSTREAM}', 1, 'docs', 'http', "
        "'http://127.0.0.1:1/mcp', true, '[]', 5, 5, 'unhealthy', 2, CURRENT_TIMESTAMP, "
        "CURRENT_TIMESTAMP, 1)",
        "INSERT INTO upstream_tools (upstream_id, position, name, definition) VALUES "
        f"('{UPSTREAM}', 0, 'a', '{{}}'), ('{UPSTREAM}', 1, 'b', '{{}}')",
    ):
        await _execute(engine, statement)


async def test_the_upgrade_keeps_upstreams_and_catalogs_and_the_downgrade_undoes_it(
    database_url: str,
) -> None:
    engine = make_engine(database_url)
    try:
        await migrations.upgrade(engine, OLDER)
        await _seed(engine)
        await migrations.upgrade(engine, BEFORE)
        assert len(await _rows(engine, "SELECT * FROM upstream_tools")) == 2  # 0005, 0009 too
        await _execute(engine, "INSERT INTO upstream_logins (user_id, upstream_id, grant_sealed, "
                               f"created_at, updated_at) VALUES (1, '{UPSTREAM}', 'sealed', "
                               "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)")
        await migrations.upgrade(engine, THIS)
        assert await migrations.current_revision(engine) == THIS
        assert await _rows(engine, "SELECT name FROM upstream_tools ORDER BY position") == [
            ("a",), ("b",)]
        assert await _rows(engine, "SELECT grant_sealed FROM upstream_logins") == [("sealed",)]
        await _execute(engine, "UPDATE upstreams SET health_status = 'needs_auth', "
                               "catalog_bearer_encrypted = 'sealed'")
        with pytest.raises(exc.IntegrityError):  # the other constraints came along
            await _execute(engine, "UPDATE upstreams SET health_status = 'sleepy'")
        with pytest.raises(exc.IntegrityError):
            await _execute(engine, "UPDATE upstreams SET transport = 'pigeon'")

        async with engine.begin() as connection:
            await connection.run_sync(_downgrade, BEFORE)
        assert await migrations.current_revision(engine) == BEFORE
        assert await _rows(engine, "SELECT health_status FROM upstreams") == [("unhealthy",)]
        assert len(await _rows(engine, "SELECT * FROM upstream_tools")) == 2
        assert len(await _rows(engine, "SELECT * FROM upstream_logins")) == 1
        with pytest.raises(exc.DatabaseError):  # the column is gone
            await _rows(engine, "SELECT catalog_bearer_encrypted FROM upstreams")
        with pytest.raises(exc.IntegrityError):  # and the status with it
            await _execute(engine, "UPDATE upstreams SET health_status = 'needs_auth'")

        await migrations.upgrade(engine)  # and up again, to exactly the models
        assert await migrations.schema_differences(engine) == []
        assert len(await _rows(engine, "SELECT * FROM upstream_tools")) == 2
    finally:
        await engine.dispose()
