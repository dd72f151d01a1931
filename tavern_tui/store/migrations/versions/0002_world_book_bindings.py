"""World-book bindings: global, character, playthrough (chat lore) and persona scopes.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "world_book_bindings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("world_book_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("target_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("scope IN ('global', 'character', 'playthrough', 'persona')",
                           name=op.f("ck_world_book_bindings_scope_known")),
        sa.CheckConstraint("(scope = 'global') = (target_id IS NULL)",
                           name=op.f("ck_world_book_bindings_target_matches_scope")),
        sa.ForeignKeyConstraint(["world_book_id"], ["world_books.id"],
                                name=op.f("fk_world_book_bindings_world_book_id_world_books")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_world_book_bindings")),
        sa.UniqueConstraint("world_book_id", "scope", "target_id", name="uq_world_book_bindings_book_scope_target"),
    )
    op.create_index(op.f("ix_world_book_bindings_world_book_id"), "world_book_bindings", ["world_book_id"])


def downgrade() -> None:
    op.drop_table("world_book_bindings")
