"""Upstreams: the auth mode "token_exchange" (the owner's identity at the hub's OpenID Connect
provider exchanged for an upstream token, RFC 8693; nothing new is stored).

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-26

Written out in full (no imports from the models), so it keeps describing this revision when the
models move on.

SQLite cannot alter a CHECK constraint: batch mode copies `upstreams` into a new table and
drops the old one. With foreign keys ON (the hub's connections; inside the migration's
transaction `PRAGMA foreign_keys` cannot be changed) that DROP deletes the rows of every table
referring to `upstreams` (ON DELETE CASCADE: catalogs, logins, ...). So on SQLite the rows of
those tables - found by reflection - are copied aside first and put back once the new
`upstreams` exists (the same way as revision 0007).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "upstreams"
CHECK = "auth_mode"
"""The constraint's name before the naming convention (ck_upstreams_auth_mode in the database)."""
BEFORE = ("static", "oauth")
AFTER = (*BEFORE, "token_exchange")
KEPT_PREFIX = "_kept_0009_"


def _one_of(values: tuple[str, ...]) -> str:
    return f"auth_mode IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    with _dependents_kept(TABLE), op.batch_alter_table(TABLE) as upstreams:
        upstreams.drop_constraint(CHECK, type_="check")
        upstreams.create_check_constraint(CHECK, _one_of(AFTER))


def downgrade() -> None:
    # the older schema cannot exchange tokens: such an upstream sends its stored credentials
    op.execute(sa.text(f"UPDATE {TABLE} SET auth_mode = 'static' "
                       "WHERE auth_mode = 'token_exchange'"))
    with _dependents_kept(TABLE), op.batch_alter_table(TABLE) as upstreams:
        upstreams.drop_constraint(CHECK, type_="check")
        upstreams.create_check_constraint(CHECK, _one_of(BEFORE))


@contextmanager
def _dependents_kept(table: str) -> Iterator[None]:
    """On SQLite: the rows of every table referring to `table` (directly or through another)
    copied aside, and put back after the block (see the module docstring)."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        yield
        return
    dependents = _dependents(bind, table)
    for name in dependents:
        op.execute(sa.text(f'CREATE TEMP TABLE "{KEPT_PREFIX}{name}" AS SELECT * FROM "{name}"'))
    yield
    for name in reversed(dependents):  # whatever the cascade left, children first
        op.execute(sa.text(f'DELETE FROM "{name}"'))
    for name in dependents:  # parents first, so every foreign key finds its row
        op.execute(sa.text(f'INSERT INTO "{name}" SELECT * FROM "{KEPT_PREFIX}{name}"'))
        op.execute(sa.text(f'DROP TABLE "{KEPT_PREFIX}{name}"'))


def _dependents(bind: sa.Connection, table: str) -> list[str]:
    """The tables whose foreign keys lead to `table`, each after the ones it refers to."""
    inspector = sa.inspect(bind)
    refers = {name: {key["referred_table"] for key in inspector.get_foreign_keys(name)}
              for name in inspector.get_table_names()}
    dependents: set[str] = set()
    frontier = {table}
    while frontier:
        frontier = {name for name, parents in refers.items()
                    if parents & frontier and name != table and name not in dependents}
        dependents |= frontier
    ordered: list[str] = []
    while len(ordered) < len(dependents):  # each round places at least one (no FK cycles)
        ready = sorted(name for name in dependents - set(ordered)
                       if not (refers[name] - {name}) & (dependents - set(ordered)))
        if not ready:  # pragma: no cover - a foreign-key cycle among the dependents
            ready = sorted(dependents - set(ordered))
        ordered.extend(ready)
    return ordered
