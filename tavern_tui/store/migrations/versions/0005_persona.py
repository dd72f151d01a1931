"""Persona document revisions, beliefs, their supporting messages, declines and consolidation marks.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "persona_revisions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("principal", sa.String(128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("lorebook", sa.String(512), nullable=False),
        sa.Column("entries", sa.Text(), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("principal", "version", name="uq_persona_revisions_principal_version"),
    )
    op.create_table(
        "beliefs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("principal", sa.String(128), nullable=False),
        sa.Column("statement", sa.Text(), nullable=False),
        sa.Column("key", sa.String(512), nullable=False),
        sa.Column("slot", sa.String(512), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("category", sa.String(32), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("sensitivity", sa.String(16), nullable=False),
        sa.Column("durable", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("superseded_by", sa.Integer(), nullable=True),
        sa.Column("promoted", sa.Boolean(), nullable=False),
        sa.Column("entry_id", sa.Integer(), nullable=True),
        sa.Column("nominated", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("kind IN ('direct', 'hypothesis')", name="ck_beliefs_kind_known"),
        sa.CheckConstraint("status IN ('active', 'superseded')", name="ck_beliefs_status_known"),
        sa.CheckConstraint("sensitivity IN ('low', 'normal', 'high')", name="ck_beliefs_sensitivity_known"),
    )
    op.create_index("ix_beliefs_principal_key", "beliefs", ["principal", "key"])
    op.create_index("ix_beliefs_slot", "beliefs", ["slot"])
    op.create_table(
        "belief_supports",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("belief_id", sa.Integer(), sa.ForeignKey("beliefs.id", name="fk_belief_supports_belief_id_beliefs"),
                  nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("quote", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("belief_id", "session_id", "seq", name="uq_belief_supports_message"),
    )
    op.create_index("ix_belief_supports_belief_id", "belief_supports", ["belief_id"])
    op.create_table(
        "belief_declines",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("principal", sa.String(128), nullable=False),
        sa.Column("key", sa.String(512), nullable=False),
        sa.Column("belief_id", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("principal", "key", name="uq_belief_declines_principal_key"),
    )
    op.create_table(
        "consolidation_marks",
        sa.Column("session_id", sa.Integer(), primary_key=True),
        sa.Column("seq", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("consolidation_marks")
    op.drop_table("belief_declines")
    op.drop_index("ix_belief_supports_belief_id", table_name="belief_supports")
    op.drop_table("belief_supports")
    op.drop_index("ix_beliefs_slot", table_name="beliefs")
    op.drop_index("ix_beliefs_principal_key", table_name="beliefs")
    op.drop_table("beliefs")
    op.drop_table("persona_revisions")
