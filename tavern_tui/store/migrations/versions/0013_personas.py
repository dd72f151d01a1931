"""Several personas (issue 20 item 6).

1. `personas.principal`: the principal whose versioned document (`persona_revisions`), beliefs
   and declines are this persona's ("local" for the one persona there was before; new ones
   "persona:<id>"); `personas.is_default`: the persona new and unlocked chats play as.
2. The persona there already was becomes a row: principal "local", the default.
3. `opening_drafts.persona_id`: the persona document a draft was made with (None = the default).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-03
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("personas") as batch:
        batch.add_column(sa.Column("principal", sa.String(128), nullable=True))
        batch.add_column(sa.Column("is_default", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.create_unique_constraint("uq_personas_principal", ["principal"])
    with op.batch_alter_table("opening_drafts") as batch:
        batch.add_column(sa.Column("persona_id", sa.Integer(), nullable=True))
    bind = op.get_bind()
    name = bind.execute(sa.text("SELECT name FROM persona_revisions WHERE principal = 'local' "
                                "ORDER BY version DESC LIMIT 1")).scalar()
    now = datetime.now(UTC)
    personas = sa.table("personas", sa.column("name", sa.String), sa.column("description", sa.Text),
                        sa.column("data", sa.Text), sa.column("principal", sa.String),
                        sa.column("is_default", sa.Boolean), sa.column("created_at", sa.DateTime(timezone=True)),
                        sa.column("updated_at", sa.DateTime(timezone=True)))
    op.bulk_insert(personas, [{"name": name or "", "description": "", "data": "{}", "principal": "local",
                               "is_default": True, "created_at": now, "updated_at": now}])


def downgrade() -> None:
    op.execute("DELETE FROM personas WHERE principal = 'local'")
    with op.batch_alter_table("opening_drafts") as batch:
        batch.drop_column("persona_id")
    with op.batch_alter_table("personas") as batch:
        batch.drop_constraint("uq_personas_principal", type_="unique")
        batch.drop_column("is_default")
        batch.drop_column("principal")
