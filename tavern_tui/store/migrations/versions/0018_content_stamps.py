"""Cheap reads on the step's path: the hash of a world book's or preset's stored content kept
beside it (a step finds its parsed copy without loading and hashing megabytes of JSON), and the
events index extended with `seq` (a chat's message count and a fork's bounded per-kind reads are
answered from the index alone, without visiting the rows).

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

_TABLES = ("world_books", "presets")


def upgrade() -> None:
    op.create_index("ix_events_session_kind_seq", "events", ["session_id", "kind", "seq"])
    op.drop_index("ix_events_session_kind", table_name="events")
    bind = op.get_bind()
    for table in _TABLES:
        op.add_column(table, sa.Column("data_sha256", sa.String(64), nullable=False, server_default=""))
        rows = sa.table(table, sa.column("id", sa.Integer), sa.column("data", sa.Text),
                        sa.column("data_sha256", sa.String))
        # One row at a time: a library may hold many books of several megabytes each.
        for (row_id,) in bind.execute(sa.select(rows.c.id)).all():
            data = bind.execute(sa.select(rows.c.data).where(rows.c.id == row_id)).scalar_one()
            digest = hashlib.sha256(data.encode("utf-8")).hexdigest()
            bind.execute(rows.update().where(rows.c.id == row_id).values(data_sha256=digest))


def downgrade() -> None:
    for table in _TABLES:
        # In place (SQLite >= 3.35): a batch copy would drop `world_books`, which bindings reference.
        op.drop_column(table, "data_sha256")
    op.create_index("ix_events_session_kind", "events", ["session_id", "kind"])
    op.drop_index("ix_events_session_kind_seq", table_name="events")
