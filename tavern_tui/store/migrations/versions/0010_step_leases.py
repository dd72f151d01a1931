"""Step leases: the `step_leases` table (issue 23 item 4). Taking a step is one insert into it
(its primary key is the playthrough), so two steps started together cannot both stream; the
row names its owner (pid, host, process start time, heartbeat) so a dead owner loses it on
the next open instead of after a timeout.

Revision ID: 0010
Revises: 0007
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "step_leases",
        sa.Column("scope", sa.String(64), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("token", sa.String(64), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("started", sa.String(32), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("scope", name="pk_step_leases"),
    )


def downgrade() -> None:
    op.drop_table("step_leases")
