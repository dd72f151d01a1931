"""Initial schema: resources, sessions, playthroughs and the append-only event log.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TZ = sa.DateTime(timezone=True)

APPEND_ONLY_SQLITE = [
    """CREATE TRIGGER events_no_update BEFORE UPDATE ON events
       BEGIN SELECT RAISE(ABORT, 'events are append-only: UPDATE refused'); END""",
    """CREATE TRIGGER events_no_delete BEFORE DELETE ON events
       BEGIN SELECT RAISE(ABORT, 'events are append-only: DELETE refused'); END""",
]

APPEND_ONLY_POSTGRES = [
    """CREATE FUNCTION tavern_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN RAISE EXCEPTION 'events are append-only: % refused', TG_OP; END $$""",
    """CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
       FOR EACH ROW EXECUTE FUNCTION tavern_events_append_only()""",
]


def _resource_table(name: str, *extra: sa.Column) -> None:
    op.create_table(
        name,
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("source_name", sa.String(1024), nullable=False),
        sa.Column("original", sa.LargeBinary(), nullable=False),
        sa.Column("original_sha256", sa.String(64), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        *extra,
        sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{name}")),
    )
    op.create_index(op.f(f"ix_{name}_original_sha256"), name, ["original_sha256"])


def upgrade() -> None:
    _resource_table(
        "characters",
        sa.Column("spec", sa.String(32), nullable=False),
        sa.Column("spec_version", sa.String(16), nullable=False),
    )
    _resource_table("world_books")
    _resource_table("presets")
    op.create_table(
        "personas",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(512), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_personas")),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("parent_id", sa.Integer(), nullable=True),
        sa.Column("fork_seq", sa.Integer(), nullable=True),
        sa.Column("created_at", TZ, nullable=False),
        sa.CheckConstraint("(parent_id IS NULL) = (fork_seq IS NULL)", name=op.f("ck_sessions_fork_pair")),
        sa.CheckConstraint("fork_seq IS NULL OR fork_seq >= 0", name=op.f("ck_sessions_fork_seq_nonnegative")),
        sa.ForeignKeyConstraint(["parent_id"], ["sessions.id"], name=op.f("fk_sessions_parent_id_sessions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sessions")),
    )
    op.create_index(op.f("ix_sessions_parent_id"), "sessions", ["parent_id"])
    op.create_table(
        "playthroughs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("character_id", sa.Integer(), nullable=False),
        sa.Column("title", sa.String(512), nullable=False),
        sa.Column("user_name", sa.String(512), nullable=False),
        sa.Column("root_session_id", sa.Integer(), nullable=False),
        sa.Column("head_session_id", sa.Integer(), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.Column("updated_at", TZ, nullable=False),
        sa.ForeignKeyConstraint(["character_id"], ["characters.id"],
                                name=op.f("fk_playthroughs_character_id_characters")),
        sa.ForeignKeyConstraint(["root_session_id"], ["sessions.id"],
                                name=op.f("fk_playthroughs_root_session_id_sessions")),
        sa.ForeignKeyConstraint(["head_session_id"], ["sessions.id"],
                                name=op.f("fk_playthroughs_head_session_id_sessions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_playthroughs")),
    )
    op.create_index(op.f("ix_playthroughs_character_id"), "playthroughs", ["character_id"])
    op.create_index(op.f("ix_playthroughs_updated_at"), "playthroughs", ["updated_at"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("role", sa.String(16), nullable=True),
        sa.Column("origin", sa.String(16), nullable=True),
        sa.Column("source", sa.String(64), nullable=True),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("body_sha256", sa.String(64), nullable=False),
        sa.Column("created_at", TZ, nullable=False),
        sa.CheckConstraint("seq >= 1", name=op.f("ck_events_seq_positive")),
        sa.CheckConstraint(
            "origin IS NULL OR origin IN ('customer', 'agent', 'engine', 'operator')",
            name=op.f("ck_events_origin_closed_set"),
        ),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], name=op.f("fk_events_session_id_sessions")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("session_id", "seq", name="uq_events_session_seq"),
    )
    op.create_index("ix_events_session_kind", "events", ["session_id", "kind"])
    dialect = op.get_bind().dialect.name
    statements = {"sqlite": APPEND_ONLY_SQLITE, "postgresql": APPEND_ONLY_POSTGRES}.get(dialect, [])
    for statement in statements:
        op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS events_no_update")
        op.execute("DROP TRIGGER IF EXISTS events_no_delete")
    elif dialect == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS events_append_only ON events")
        op.execute("DROP FUNCTION IF EXISTS tavern_events_append_only()")
    for table in ("events", "playthroughs", "sessions", "personas", "presets", "world_books", "characters"):
        op.drop_table(table)
