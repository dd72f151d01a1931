"""Group chats: groups (members, turn order, card mode) and the group a playthrough plays.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "groups",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("members", sa.Text(), nullable=False, server_default="[]"),
        sa.Column("strategy", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("generation_mode", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("allow_self_responses", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("join_prefix", sa.Text(), nullable=False, server_default=""),
        sa.Column("join_suffix", sa.Text(), nullable=False, server_default=""),
        sa.Column("data", sa.Text(), nullable=False, server_default="{}"),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_groups")),
    )
    # No foreign key, as for preset_id: SQLite cannot add one to a table in place.
    op.add_column("playthroughs", sa.Column("group_id", sa.Integer(), nullable=True))
    op.create_index(op.f("ix_playthroughs_group_id"), "playthroughs", ["group_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_playthroughs_group_id"), table_name="playthroughs")
    with op.batch_alter_table("playthroughs") as batch:
        batch.drop_column("group_id")
    op.drop_table("groups")
