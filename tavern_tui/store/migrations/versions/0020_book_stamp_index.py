"""A world book's stamp (id, name, content hash) read from an index. `data_sha256` was added after
the book's megabytes of `data`, so SQLite walked the whole overflow chain of `data` to reach it on
every step's book check (3-8 ms a step for a 4.7 MB book; 0.01 ms from a covering index, which
`WorldBookRepository.stamps` names for SQLite: its planner prefers the rowid).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_world_books_stamp", "world_books", ["id", "name", "data_sha256"])


def downgrade() -> None:
    op.drop_index("ix_world_books_stamp", table_name="world_books")
