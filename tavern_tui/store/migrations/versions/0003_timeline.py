"""Timeline: sessions know their playthrough; playthroughs keep imported chat metadata.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("sessions", sa.Column("playthrough_id", sa.Integer(), nullable=True))
    op.create_index(op.f("ix_sessions_playthrough_id"), "sessions", ["playthrough_id"])
    op.add_column("playthroughs", sa.Column("meta", sa.Text(), nullable=False, server_default="{}"))
    # Before 0003 a playthrough had one session (its root, also its head).
    op.execute("UPDATE sessions SET playthrough_id = (SELECT p.id FROM playthroughs p "
               "WHERE p.root_session_id = sessions.id OR p.head_session_id = sessions.id ORDER BY p.id LIMIT 1)")


def downgrade() -> None:
    with op.batch_alter_table("playthroughs") as batch:
        batch.drop_column("meta")
    op.drop_index(op.f("ix_sessions_playthrough_id"), table_name="sessions")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("playthrough_id")
