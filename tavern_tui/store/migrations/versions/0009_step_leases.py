"""Step leases and unique imports (issue 23 items 4 and 5).

1. The `step_leases` table. Taking a step is one insert into it (its primary key is the
   playthrough), so two steps started together cannot both stream; the row names its owner
   (pid, host, process start time, heartbeat) so a dead owner loses it on the next open
   instead of after a timeout.
2. `original_sha256` of characters, world books and presets becomes unique (the by-hash
   duplicate check raced on PostgreSQL: 13 rows for 6 files). Existing duplicates are merged
   first, nothing lost: per hash the oldest row is kept, every reference to a copy (a
   playthrough's character or preset, a world-book binding) moves to it (a binding that would
   then repeat is dropped), and the copy is deleted when its data is the kept row's; a copy
   whose data differs (it was edited since) stays as its own resource under a new hash,
   sha256("<hash>:<id>"), since its bytes no longer identify it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01
"""

from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
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
    bind = op.get_bind()
    for table in RESOURCES:
        _merge_duplicates(bind, table)
        op.drop_index(f"ix_{table}_original_sha256", table_name=table)
        op.create_index(f"ix_{table}_original_sha256", table, ["original_sha256"], unique=True)


RESOURCES = ("characters", "world_books", "presets")

# Where each resource's id is referenced (table, column, extra condition).
_REFERENCES = {
    "characters": [("playthroughs", "character_id", ""),
                   ("world_book_bindings", "target_id", " AND scope = 'character'")],
    "world_books": [("world_book_bindings", "world_book_id", "")],
    "presets": [("playthroughs", "preset_id", "")],
}


def _merge_duplicates(bind: sa.engine.Connection, table: str) -> None:
    """Merge rows of `table` that share an `original_sha256` into the oldest (see the module text)."""
    groups = bind.execute(sa.text(f"SELECT original_sha256 FROM {table} GROUP BY original_sha256 "
                                  "HAVING count(*) > 1")).scalars().all()
    for digest in groups:
        rows = bind.execute(sa.text(f"SELECT id, data FROM {table} WHERE original_sha256 = :d ORDER BY id"),
                            {"d": digest}).all()
        keeper, keeper_data = rows[0]
        for copy_id, data in rows[1:]:
            if data != keeper_data:
                renamed = hashlib.sha256(f"{digest}:{copy_id}".encode()).hexdigest()
                bind.execute(sa.text(f"UPDATE {table} SET original_sha256 = :h WHERE id = :i"),
                             {"h": renamed, "i": copy_id})
                continue
            for ref_table, column, condition in _REFERENCES[table]:
                if ref_table == "world_book_bindings":
                    # A binding the move would repeat (same book, scope and target) is dropped first.
                    other = "target_id" if column == "world_book_id" else "world_book_id"
                    bind.execute(sa.text(
                        f"DELETE FROM world_book_bindings WHERE {column} = :copy{condition} AND EXISTS ("
                        f"SELECT 1 FROM world_book_bindings AS kept WHERE kept.{column} = :keep "
                        f"AND kept.scope = world_book_bindings.scope "
                        f"AND kept.{other} IS NOT DISTINCT FROM world_book_bindings.{other})"
                        if bind.dialect.name == "postgresql" else
                        f"DELETE FROM world_book_bindings WHERE {column} = :copy{condition} AND EXISTS ("
                        f"SELECT 1 FROM world_book_bindings AS kept WHERE kept.{column} = :keep "
                        f"AND kept.scope = world_book_bindings.scope "
                        f"AND kept.{other} IS world_book_bindings.{other})"), {"copy": copy_id, "keep": keeper})
                bind.execute(sa.text(f"UPDATE {ref_table} SET {column} = :keep WHERE {column} = :copy{condition}"),
                             {"keep": keeper, "copy": copy_id})
            bind.execute(sa.text(f"DELETE FROM {table} WHERE id = :i"), {"i": copy_id})


def downgrade() -> None:
    for table in RESOURCES:
        op.drop_index(f"ix_{table}_original_sha256", table_name=table)
        op.create_index(f"ix_{table}_original_sha256", table, ["original_sha256"], unique=False)
    op.drop_table("step_leases")
