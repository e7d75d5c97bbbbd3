"""DPoP (RFC 9449): the thumbprint of the key a refresh token is bound to (§5), and of the key
an authorization request named for its code (§10, `dpop_jkt`); NULL for unbound ones (every
row written before this revision).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


TABLES = ("oauth_refresh_tokens", "oauth_codes")


def upgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column("dpop_jkt", sa.String(128), nullable=True))


def downgrade() -> None:
    for table in TABLES:
        with op.batch_alter_table(table) as batch:
            batch.drop_column("dpop_jkt")
