"""Migration 0009 (auth mode "token_exchange") on a database that has data (SQLite, whose
batch rebuild of `upstreams` would cascade-delete every row referring to it, and
PostgreSQL): before it the database refuses the new mode, after it takes it, and the
upstreams' catalogs, logins and OIDC identities are all still there."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from mcpkit.hub.crypto import SecretBox
from mcpkit.hub.db import migrate as migrations
from mcpkit.hub.db.engine import make_engine
from mcpkit.hub.store import Store
from mcpkit.hub.store.oidc import IdpTokens

pytestmark = pytest.mark.anyio

BEFORE = "0008"
UPSTREAM_ID = "00000000-0000-4000-8000-000000000009"


async def seed_upstream(database_url: str, user_id: int) -> None:
    """An "oauth" upstream of `user_id` with one tool and its owner's login (revision 0008)."""
    engine = make_engine(database_url)
    try:
        async with engine.begin() as connection:
            for statement in (
                "INSERT INTO upstreams (id, user_id, name, transport, url, enabled, "
                "disabled_tools, connect_timeout_s, call_timeout_s, health_status, tool_count, "
                "created_at, updated_at, version, auth_mode) VALUES (:id, :user, 'up', 'http', "
                "'http://127.0.0.1:9/mcp', true, '[]', 10, 60, 'unknown', 1, CURRENT_TIMESTAMP, "
                "CURRENT_TIMESTAMP, 1, 'oauth')",
                "INSERT INTO upstream_tools (upstream_id, position, name, definition) "
                "VALUES (:id, 0, 't', '{\"name\": \"t\"}')",
                "INSERT INTO upstream_logins (user_id, upstream_id, grant_sealed, created_at, "
                "updated_at) VALUES (:user, :id, 'sealed', CURRENT_TIMESTAMP, CURRENT_TIMESTAMP)",
            ):
                await connection.execute(text(statement), {"id": UPSTREAM_ID, "user": user_id})
    finally:
        await engine.dispose()


async def counts(database_url: str) -> dict[str, int]:
    engine = make_engine(database_url)
    try:
        async with engine.connect() as connection:
            return {table: (await connection.execute(text(
                f"SELECT COUNT(*) FROM {table}"))).scalar_one()
                for table in ("upstreams", "upstream_tools", "upstream_logins",
                              "oidc_identities")}
    finally:
        await engine.dispose()


async def set_mode(database_url: str, upstream_id: str, mode: str) -> None:
    engine = make_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE upstreams SET auth_mode = :mode "
                                          "WHERE id = :id"), {"mode": mode, "id": upstream_id})
    finally:
        await engine.dispose()


async def test_0009_takes_token_exchange_and_keeps_every_row(database_url: str,
                                                             box: SecretBox) -> None:
    engine = make_engine(database_url)
    try:
        await migrations.upgrade(engine, BEFORE)
    finally:
        await engine.dispose()
    async with await Store.open(database_url, box, migrate=False) as store:
        user = await store.users.create("ada")
        await store.oidc.sign_in("http://127.0.0.1:8", "ada-subject", names=["ada"],
                                 tokens=IdpTokens("id.token.x"), allow_signup=False)
        await store.oidc.link("http://127.0.0.1:8", "ada-subject", user.id)
    # the upstream's rows as SQL of revision 0008: the store writes the newest models'
    # columns, which later revisions add to upstreams
    await seed_upstream(database_url, user.id)
    with pytest.raises(IntegrityError):
        await set_mode(database_url, UPSTREAM_ID, "token_exchange")
    before = await counts(database_url)
    assert before == {"upstreams": 1, "upstream_tools": 1, "upstream_logins": 1,
                      "oidc_identities": 1}

    engine = make_engine(database_url)
    try:
        await migrations.upgrade(engine)
        assert await migrations.current_revision(engine) == migrations.head_revision()
        assert await migrations.schema_differences(engine) == []
    finally:
        await engine.dispose()
    assert await counts(database_url) == before
    await set_mode(database_url, UPSTREAM_ID, "token_exchange")
    with pytest.raises(IntegrityError):
        await set_mode(database_url, UPSTREAM_ID, "something_else")
    async with await Store.open(database_url, box, migrate=False) as store:
        assert (await store.upstreams.get(user.id, UPSTREAM_ID)).auth_mode == "token_exchange"
