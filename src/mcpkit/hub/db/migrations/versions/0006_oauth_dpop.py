"""DPoP-bound refresh tokens (RFC 9449 §5): the thumbprint of the key a refresh token is bound
to, NULL for a bearer one (every token issued before this revision).

Revision ID: 0006
Revises: 0003
Create Date: 2026-11-26
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("oauth_refresh_tokens") as tokens:
        tokens.add_column(sa.Column("dpop_jkt", sa.String(128), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("oauth_refresh_tokens") as tokens:
        tokens.drop_column("dpop_jkt")
