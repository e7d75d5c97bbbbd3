"""Indexes on the expiry of authorization codes and refresh tokens: each save purges a bounded
batch of expired rows (store/oauth.py), which must not scan the whole table.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("oauth_codes", "oauth_refresh_tokens")


def upgrade() -> None:
    for table in TABLES:
        op.create_index(f"ix_{table}_expires_at", table, ["expires_at"])


def downgrade() -> None:
    for table in TABLES:
        op.drop_index(f"ix_{table}_expires_at", table_name=table)
