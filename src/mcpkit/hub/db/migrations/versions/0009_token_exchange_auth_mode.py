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
`upstreams` exists (`mcpkit.hub.db.sqlite_rebuild`).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mcpkit.hub.db.sqlite_rebuild import referring_rows_kept

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "upstreams"
CHECK = "auth_mode"
"""The constraint's name before the naming convention (ck_upstreams_auth_mode in the database)."""
BEFORE = ("static", "oauth")
AFTER = (*BEFORE, "token_exchange")


def _one_of(values: tuple[str, ...]) -> str:
    return f"auth_mode IN ({', '.join(repr(v) for v in values)})"


def upgrade() -> None:
    with referring_rows_kept(TABLE), op.batch_alter_table(TABLE) as upstreams:
        upstreams.drop_constraint(CHECK, type_="check")
        upstreams.create_check_constraint(CHECK, _one_of(AFTER))


def downgrade() -> None:
    # the older schema cannot exchange tokens: such an upstream sends its stored credentials
    op.execute(sa.text(f"UPDATE {TABLE} SET auth_mode = 'static' "
                       "WHERE auth_mode = 'token_exchange'"))
    with referring_rows_kept(TABLE), op.batch_alter_table(TABLE) as upstreams:
        upstreams.drop_constraint(CHECK, type_="check")
        upstreams.create_check_constraint(CHECK, _one_of(BEFORE))
