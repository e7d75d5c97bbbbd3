"""The hub as an OAuth authorization server: user passwords, DCR clients, authorization codes,
consents, refresh-token families and the access-token signing keys.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-26

Written out in full (no imports from the models), so it keeps describing this revision when the
models move on.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _timestamp(name: str, *, nullable: bool = False) -> sa.Column[object]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _user_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["user_id"], ["users.id"], name=f"fk_{table}_user_id_users", ondelete="CASCADE"
    )


def _client_fk(table: str) -> sa.ForeignKeyConstraint:
    return sa.ForeignKeyConstraint(
        ["client_id"], ["oauth_clients.client_id"], name=f"fk_{table}_client_id_oauth_clients",
        ondelete="CASCADE",
    )


def upgrade() -> None:
    with op.batch_alter_table("users") as users:
        users.add_column(sa.Column("password_hash", sa.Text(), nullable=True))
    op.create_table(
        "oauth_clients",
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("client_name", sa.Text(), nullable=True),
        sa.Column("redirect_uris", sa.JSON(), nullable=False),
        sa.Column("application_type", sa.String(8), nullable=False),
        sa.Column("grant_types", sa.JSON(), nullable=False),
        sa.Column("token_endpoint_auth_method", sa.String(32), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("client_id", name="pk_oauth_clients"),
    )
    op.create_table(
        "oauth_codes",
        sa.Column("code_hash", sa.String(64), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("redirect_uri", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("code_challenge", sa.String(128), nullable=False),
        sa.Column("code_challenge_method", sa.String(8), nullable=False),
        sa.Column("family_id", sa.String(64), nullable=False),
        _timestamp("expires_at"),
        _timestamp("used_at", nullable=True),
        _client_fk("oauth_codes"),
        _user_fk("oauth_codes"),
        sa.PrimaryKeyConstraint("code_hash", name="pk_oauth_codes"),
    )
    op.create_index("ix_oauth_codes_client_id", "oauth_codes", ["client_id"])
    op.create_index("ix_oauth_codes_user_id", "oauth_codes", ["user_id"])
    op.create_table(
        "oauth_consents",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        _timestamp("created_at"),
        _user_fk("oauth_consents"),
        _client_fk("oauth_consents"),
        sa.PrimaryKeyConstraint("user_id", "client_id", name="pk_oauth_consents"),
    )
    op.create_table(
        "oauth_refresh_tokens",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("family_id", sa.String(64), nullable=False),
        sa.Column("client_id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("resource", sa.Text(), nullable=False),
        _timestamp("created_at"),
        _timestamp("expires_at"),
        _timestamp("used_at", nullable=True),
        _timestamp("revoked_at", nullable=True),
        _client_fk("oauth_refresh_tokens"),
        _user_fk("oauth_refresh_tokens"),
        sa.PrimaryKeyConstraint("token_hash", name="pk_oauth_refresh_tokens"),
    )
    for column in ("family_id", "client_id", "user_id"):
        op.create_index(f"ix_oauth_refresh_tokens_{column}", "oauth_refresh_tokens", [column])
    op.create_table(
        "oauth_signing_keys",
        sa.Column("kid", sa.String(64), nullable=False),
        sa.Column("private_jwk_sealed", sa.Text(), nullable=False),
        _timestamp("created_at"),
        sa.PrimaryKeyConstraint("kid", name="pk_oauth_signing_keys"),
    )


def downgrade() -> None:
    for table in ("oauth_signing_keys", "oauth_refresh_tokens", "oauth_consents",
                  "oauth_codes", "oauth_clients"):
        op.drop_table(table)
    with op.batch_alter_table("users") as users:
        users.drop_column("password_hash")
