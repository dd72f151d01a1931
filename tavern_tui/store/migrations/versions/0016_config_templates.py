"""Configuration templates: a playthrough's selection intent (strategy snapshot, preset, chat-lore
books, persona) kept under a name, to start new playthroughs from.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "config_templates",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_config_templates")),
        sa.UniqueConstraint("name", name=op.f("uq_config_templates_name")),
    )


def downgrade() -> None:
    op.drop_table("config_templates")
