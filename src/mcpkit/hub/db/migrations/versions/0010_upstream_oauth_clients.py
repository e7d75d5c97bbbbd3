"""The hub's dynamic client registrations at upstreams' authorization servers, kept (sealed)
and reused per (issuer, redirect URI) instead of one registration per user login.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26

Written out in full (no imports from the models), so it keeps describing this revision when the
models move on.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "upstream_oauth_clients"


def upgrade() -> None:
    op.create_table(
        TABLE,
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("registration_sealed", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key_hash", name=f"pk_{TABLE}"),
    )
    op.create_index(f"ix_{TABLE}_used_at", TABLE, ["used_at"])


def downgrade() -> None:
    op.drop_table(TABLE)
