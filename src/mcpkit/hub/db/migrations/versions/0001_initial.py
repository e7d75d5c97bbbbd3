"""The hub's first schema: users, API tokens, upstreams, their catalogs, the audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-21

Written out in full (no imports from the models), so it keeps describing this revision when the
models move on.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _user_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["user_id"], ["users.id"], name=f"fk_{table}_user_id_users", ondelete="CASCADE"
    )


def _catalog_table(table: str, key: str) -> None:
    op.create_table(
        table,
        sa.Column("upstream_id", sa.String(36), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column(key, sa.Text(), nullable=False),
        sa.Column("definition", sa.JSON(), nullable=False),
        sa.ForeignKeyConstraint(
            ["upstream_id"],
            ["upstreams.id"],
            name=f"fk_{table}_upstream_id_upstreams",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("upstream_id", "position", name=f"pk_{table}"),
    )


def upgrade() -> None:
    op.create_table(
        "users",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("disabled", sa.Boolean(), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_users"),
        sa.UniqueConstraint("name", name="uq_users_name"),
    )
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("prefix", sa.String(16), nullable=False),
        _timestamp("created_at"),
        _timestamp("last_used_at", nullable=True),
        _timestamp("expires_at", nullable=True),
        _timestamp("revoked_at", nullable=True),
        _user_fk("api_tokens"),
        sa.PrimaryKeyConstraint("id", name="pk_api_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_api_tokens_token_hash"),
    )
    op.create_index("ix_api_tokens_user_id", "api_tokens", ["user_id"])
    op.create_table(
        "upstreams",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("transport", sa.String(8), nullable=False),
        sa.Column("url", sa.Text(), nullable=True),
        sa.Column("command", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("headers_encrypted", sa.Text(), nullable=True),
        sa.Column("bearer_encrypted", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("enabled_tools", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("disabled_tools", sa.JSON(), nullable=False),
        sa.Column("connect_timeout_s", sa.Float(), nullable=False),
        sa.Column("call_timeout_s", sa.Float(), nullable=False),
        sa.Column("health_status", sa.String(16), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        _timestamp("last_checked_at", nullable=True),
        sa.Column("tool_count", sa.Integer(), nullable=False),
        _timestamp("catalog_updated_at", nullable=True),
        _timestamp("created_at"),
        _timestamp("updated_at"),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "transport IN ('http', 'sse', 'ws', 'stdio')", name="ck_upstreams_transport"
        ),
        sa.CheckConstraint(
            "health_status IN ('unknown', 'healthy', 'unhealthy')",
            name="ck_upstreams_health_status",
        ),
        _user_fk("upstreams"),
        sa.PrimaryKeyConstraint("id", name="pk_upstreams"),
        sa.UniqueConstraint("user_id", "name", name="uq_upstreams_user_id_name"),
    )
    op.create_index("ix_upstreams_user_id", "upstreams", ["user_id"])
    _catalog_table("upstream_tools", "name")
    op.create_index("ix_upstream_tools_upstream_id_name", "upstream_tools", ["upstream_id", "name"])
    _catalog_table("upstream_prompts", "name")
    _catalog_table("upstream_resources", "uri")
    _catalog_table("upstream_resource_templates", "uri_template")
    op.create_table(
        "audit_events",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        _timestamp("at"),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("upstream_id", sa.String(36), nullable=True),
        sa.Column("upstream_name", sa.String(63), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "outcome IN ('ok', 'tool_error', 'error', 'denied', 'timeout')",
            name="ck_audit_events_outcome",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_audit_events"),
    )
    op.create_index("ix_audit_events_user_id_at", "audit_events", ["user_id", "at"])


def downgrade() -> None:
    op.drop_table("audit_events")
    for table in (
        "upstream_resource_templates",
        "upstream_resources",
        "upstream_prompts",
        "upstream_tools",
        "upstreams",
        "api_tokens",
        "users",
    ):
        op.drop_table(table)
