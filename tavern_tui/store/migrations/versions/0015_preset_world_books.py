"""World books bound to a preset: a binding's scope may be "preset" (its target a preset id), so a
book travels with the preset a playthrough uses, beside the chat, persona, character and global
bindings.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_SCOPES_BEFORE = "scope IN ('global', 'character', 'playthrough', 'persona')"
_SCOPES_AFTER = "scope IN ('global', 'character', 'playthrough', 'persona', 'preset')"


def upgrade() -> None:
    with op.batch_alter_table("world_book_bindings") as batch:
        batch.drop_constraint(op.f("ck_world_book_bindings_scope_known"), type_="check")
        batch.create_check_constraint(op.f("ck_world_book_bindings_scope_known"), _SCOPES_AFTER)


def downgrade() -> None:
    op.execute("DELETE FROM world_book_bindings WHERE scope = 'preset'")
    with op.batch_alter_table("world_book_bindings") as batch:
        batch.drop_constraint(op.f("ck_world_book_bindings_scope_known"), type_="check")
        batch.create_check_constraint(op.f("ck_world_book_bindings_scope_known"), _SCOPES_BEFORE)
