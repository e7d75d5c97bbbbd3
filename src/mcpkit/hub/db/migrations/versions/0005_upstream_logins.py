"""Per-user OAuth logins to upstreams: `upstreams.auth_mode` ("static": stored headers and
bearer, as before; "oauth": the owner's own login), the logins (sealed grants, one per user and
upstream) and the pending starts of logins (by the sha256 of their state, expiring).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-26

Written out in full (no imports from the models), so it keeps describing this revision when the
models move on.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from mcpkit.hub.db.sqlite_rebuild import referring_rows_kept

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=False)


def _owner_fks(table: str) -> list[sa.ForeignKeyConstraint]:
    return [
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], name=f"fk_{table}_user_id_users",
                                ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["upstream_id"], ["upstreams.id"],
                                name=f"fk_{table}_upstream_id_upstreams", ondelete="CASCADE"),
    ]


def upgrade() -> None:
    # SQLite rebuilds upstreams for the constraint: its catalogs kept (sqlite_rebuild)
    with referring_rows_kept("upstreams"), op.batch_alter_table("upstreams") as upstreams:
        upstreams.add_column(sa.Column("auth_mode", sa.String(16), nullable=False,
                                       server_default="static"))
        upstreams.create_check_constraint("auth_mode", "auth_mode IN ('static', 'oauth')")
    op.create_table(
        "upstream_logins",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("upstream_id", sa.String(36), nullable=False),
        sa.Column("grant_sealed", sa.Text(), nullable=False),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        *_owner_fks("upstream_logins"),
        sa.PrimaryKeyConstraint("user_id", "upstream_id", name="pk_upstream_logins"),
    )
    op.create_index("ix_upstream_logins_upstream_id", "upstream_logins", ["upstream_id"])
    op.create_table(
        "upstream_login_states",
        sa.Column("state_hash", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("upstream_id", sa.String(36), nullable=False),
        sa.Column("pending_sealed", sa.Text(), nullable=False),
        _timestamp("expires_at"),
        *_owner_fks("upstream_login_states"),
        sa.PrimaryKeyConstraint("state_hash", name="pk_upstream_login_states"),
    )
    for column in ("user_id", "upstream_id", "expires_at"):
        op.create_index(f"ix_upstream_login_states_{column}", "upstream_login_states",
                        [column])


def downgrade() -> None:
    op.drop_table("upstream_login_states")
    op.drop_table("upstream_logins")
    with referring_rows_kept("upstreams"), op.batch_alter_table("upstreams") as upstreams:
        upstreams.drop_constraint("ck_upstreams_auth_mode", type_="check")
        upstreams.drop_column("auth_mode")
