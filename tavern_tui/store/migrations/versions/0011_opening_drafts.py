"""Opening drafts (issue 20 item 1; seed 000 §7): a new playthrough is first an independent
draft holding its character, chosen greeting and selections (strategy snapshot, preset, chat
books, persona name). A draft has no session: the first send turns it into a playthrough.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "opening_drafts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("character_id", sa.Integer(),
                  sa.ForeignKey("characters.id", name="fk_opening_drafts_character_id_characters"), nullable=False),
        sa.Column("greeting_index", sa.Integer(), nullable=False),
        sa.Column("preset_id", sa.Integer(), nullable=True),
        sa.Column("strategy", sa.Text(), nullable=False),
        sa.Column("lore", sa.Text(), nullable=False),
        sa.Column("user_name", sa.String(512), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("greeting_index >= 0", name="ck_opening_drafts_greeting_nonnegative"),
    )
    op.create_index("ix_opening_drafts_character_id", "opening_drafts", ["character_id"])


def downgrade() -> None:
    op.drop_index("ix_opening_drafts_character_id", table_name="opening_drafts")
    op.drop_table("opening_drafts")
