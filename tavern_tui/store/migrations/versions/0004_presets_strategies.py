"""Playthroughs remember their bound preset and applied assembly strategy.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("playthroughs", sa.Column("preset_id", sa.Integer(), nullable=True))
    op.add_column("playthroughs", sa.Column("strategy", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("playthroughs") as batch:
        batch.drop_column("strategy")
        batch.drop_column("preset_id")
