"""Global regex scripts and card regex allowances (issue 18 item 3).

1. `regex_scripts`: SillyTavern regex scripts imported from its regex JSON files (the global
   list; run in id order).
2. `regex_allowances`: the cards whose own `extensions.regex_scripts` the person allowed, by
   the card file's hash (SillyTavern asks once per character and keeps `character_allowed_regex`).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "regex_scripts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("source_name", sa.String(1024), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_regex_scripts"),
    )
    op.create_table(
        "regex_allowances",
        sa.Column("character_sha256", sa.String(64), nullable=False),
        sa.Column("allowed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("character_sha256", name="pk_regex_allowances"),
    )


def downgrade() -> None:
    op.drop_table("regex_allowances")
    op.drop_table("regex_scripts")
