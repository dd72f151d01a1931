"""Characters as a library (issue 20 item 5): archiving and card revisions.

1. `characters.archived_at`: an archived character is hidden from the lists; nothing is deleted
   (its playthroughs, drafts and original file stay).
2. `characters.revision` and `character_revisions`: an edited card is a new revision. The
   imported file's bytes (`characters.original`) never change; `characters.data` is the newest
   revision's normalised card (what every step reads from the next step on) and
   `character_revisions` keeps every revision's card, 0 (as imported) included, added only.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("characters") as batch:
        batch.add_column(sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("revision", sa.Integer(), nullable=False, server_default="0"))
    op.create_table(
        "character_revisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("character_id", sa.Integer(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["character_id"], ["characters.id"],
                                name="fk_character_revisions_character_id_characters"),
        sa.PrimaryKeyConstraint("id", name="pk_character_revisions"),
        sa.UniqueConstraint("character_id", "revision", name="uq_character_revisions_character_id"),
    )


def downgrade() -> None:
    op.drop_table("character_revisions")
    with op.batch_alter_table("characters") as batch:
        batch.drop_column("revision")
        batch.drop_column("archived_at")
