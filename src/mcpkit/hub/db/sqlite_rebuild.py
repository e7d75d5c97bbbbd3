"""SQLite table rebuilds in migrations without losing the rows that refer to the table.

    with referring_rows_kept("upstreams"):
        with op.batch_alter_table("upstreams") as upstreams:
            upstreams.create_check_constraint(...)      # SQLite: copy, DROP, rename

SQLite cannot alter most constraints: alembic's batch mode copies the table into a new one,
drops the old one and renames the copy. The hub's connections have foreign keys ON, and a
migration runs inside one transaction, where `PRAGMA foreign_keys` cannot be changed: the DROP
then deletes the rows of every table referring to the old one (ON DELETE CASCADE) - an
upstream's catalog and its owner's login, say. Inside `referring_rows_kept(table)` those rows
(of every table whose foreign keys lead to `table`, directly or through another, found by
reflection) are copied into temporary tables first and put back after the block, parents
before children. Other databases alter in place: nothing is copied there.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa

KEPT_PREFIX = "_kept_"


@contextmanager
def referring_rows_kept(table: str) -> Iterator[None]:
    """On SQLite: the rows referring to `table` kept across the block (see the module)."""
    from alembic import op

    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        yield
        return
    dependents = referring_tables(bind, table)
    for name in dependents:
        op.execute(sa.text(f'CREATE TEMP TABLE "{KEPT_PREFIX}{name}" AS SELECT * FROM "{name}"'))
    yield
    for name in reversed(dependents):  # whatever the cascade left, children first
        op.execute(sa.text(f'DELETE FROM "{name}"'))
    for name in dependents:  # parents first, so every foreign key finds its row
        op.execute(sa.text(f'INSERT INTO "{name}" SELECT * FROM "{KEPT_PREFIX}{name}"'))
        op.execute(sa.text(f'DROP TABLE "{KEPT_PREFIX}{name}"'))


def referring_tables(bind: sa.Connection, table: str) -> list[str]:
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
