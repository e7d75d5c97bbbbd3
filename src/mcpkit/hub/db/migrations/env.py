"""Alembic's environment for the hub's schema; run through `mcpkit.hub.db.migrate`.

`migrate.upgrade(engine)` hands the connection over in `config.attributes["connection"]`,
already inside a transaction (on SQLite `BEGIN IMMEDIATE`, on PostgreSQL with an advisory lock),
so the whole upgrade commits or rolls back as one. Offline mode (`--sql`) renders SQL for the URL
in `sqlalchemy.url`.

Writing a new revision: add `versions/NNNN_what.py` with `down_revision` set to the previous
one (or autogenerate against an up-to-date database with `alembic revision --autogenerate`,
then review it: the test in tests/hub/test_migrations.py checks that the migrated schema matches
the models on SQLite and PostgreSQL). Autogenerate renders SQLite-compatible batch operations.
SQLite connections have foreign keys ON: a batch operation that recreates a parent table would
fire ON DELETE CASCADE, so recreate child tables, not parents, or copy data explicitly.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from mcpkit.errors import InvalidState
from mcpkit.hub.db.models import Base

target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )


def run_offline() -> None:
    context.configure(
        url=context.config.get_main_option("sqlalchemy.url"),
        target_metadata=target_metadata,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection = context.config.attributes.get("connection")
    if not isinstance(connection, Connection):
        raise InvalidState("run the hub's migrations through mcpkit.hub.db.migrate")
    _configure(connection)
    with context.begin_transaction():
        context.run_migrations()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
