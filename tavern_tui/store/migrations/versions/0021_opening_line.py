"""An opening draft keeps the first line typed into it (`opening_drafts.line`): going back to the
list, another screen or a restart leaves it in the draft's message box, as a chat's unsent text is
kept (`composer_drafts`).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("opening_drafts", sa.Column("line", sa.Text(), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("opening_drafts") as batch:
        batch.drop_column("line")
