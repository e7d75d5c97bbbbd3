"""A generation number for each access-token signing key, unique: replicas that rotate the key
at the same moment (by its age, hub/oauth/keys.py) each try to add the next generation, and the
database lets exactly one of them in. Existing keys are numbered oldest first.

Revision ID: 0008
Revises: 0006
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "oauth_signing_keys"
UNIQUE = "uq_oauth_signing_keys_generation"


def upgrade() -> None:
    # oauth_signing_keys has no child tables: SQLite's batch copy of it cascades nothing
    with op.batch_alter_table(TABLE) as batch:
        batch.add_column(sa.Column("generation", sa.Integer(), nullable=True))
    keys = sa.table(TABLE, sa.column("kid", sa.String()), sa.column("created_at"),
                    sa.column("generation", sa.Integer()))
    bind = op.get_bind()
    kids = bind.execute(sa.select(keys.c.kid).order_by(keys.c.created_at, keys.c.kid))
    for number, kid in enumerate(kids.scalars().all(), start=1):
        bind.execute(keys.update().where(keys.c.kid == kid).values(generation=number))
    with op.batch_alter_table(TABLE) as batch:
        batch.alter_column("generation", existing_type=sa.Integer(), nullable=False)
        batch.create_unique_constraint(UNIQUE, ["generation"])


def downgrade() -> None:
    with op.batch_alter_table(TABLE) as batch:
        batch.drop_constraint(UNIQUE, type_="unique")
        batch.drop_column("generation")
