"""A playthrough a draft's first send prepared is associated only once that send is admitted
(`playthroughs.opening_draft`): until then it is the draft's, not listed, and the draft stays.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("playthroughs", sa.Column("opening_draft", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("playthroughs") as batch:
        batch.drop_column("opening_draft")
