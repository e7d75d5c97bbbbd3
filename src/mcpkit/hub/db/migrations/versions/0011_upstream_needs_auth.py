"""Upstreams: the health status "needs_auth" (the upstream asks for a login the hub lacks),
and separate credentials for catalog fetches and health checks (sealed like the others).

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26

Written out in full (no imports from the models), so it keeps describing this revision when the
models move on.

SQLite cannot alter a CHECK constraint: batch mode copies `upstreams` into a new table and
drops the old one. With foreign keys ON (the hub's connections, and the migration runs inside
one transaction, where `PRAGMA foreign_keys` cannot be changed) that DROP deletes the rows of
every table referring to `upstreams` (ON DELETE CASCADE): the catalogs, the owners' logins
(0005), and whatever later revisions hang on upstreams. So on SQLite the rows of those
tables - found by reflection, whichever they are - are copied aside first and put back once
the new `upstreams` exists (`mcpkit.hub.db.sqlite_rebuild`).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mcpkit.hub.db.sqlite_rebuild import referring_rows_kept

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "upstreams"
CHECK = "ck_upstreams_health_status"
BEFORE = ("unknown", "healthy", "unhealthy")
AFTER = (*BEFORE, "needs_auth")
COLUMNS = ("catalog_headers_encrypted", "catalog_bearer_encrypted")


def _one_of(values: tuple[str, ...]) -> str:
    return f"health_status IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    with referring_rows_kept(TABLE):
        with op.batch_alter_table(TABLE) as upstreams:
            for column in COLUMNS:
                upstreams.add_column(sa.Column(column, sa.Text(), nullable=True))
            upstreams.drop_constraint(CHECK, type_="check")
            upstreams.create_check_constraint(CHECK, _one_of(AFTER))


def downgrade() -> None:
    # the older schema knows no login state: such an upstream is simply failing
    op.execute(sa.text(f"UPDATE {TABLE} SET health_status = 'unhealthy' "
                       "WHERE health_status = 'needs_auth'"))
    with referring_rows_kept(TABLE):
        with op.batch_alter_table(TABLE) as upstreams:
            upstreams.drop_constraint(CHECK, type_="check")
            upstreams.create_check_constraint(CHECK, _one_of(BEFORE))
            for column in COLUMNS:
                upstreams.drop_column(column)
