"""The library (issue 20): opening drafts, archived chats and message search.

1. `opening_drafts` (item 1; seed 000 §7): a new playthrough is first an independent draft
   holding its character, chosen greeting and selections (strategy snapshot, preset, chat books,
   persona name). A draft has no session: the first send turns it into a playthrough.
2. `playthroughs.archived_at` (item 4): an archived chat is hidden from lists; nothing is deleted.
3. Message search (item 4), kept in step with the event log by the database itself, so no
   writer can forget it: on SQLite an FTS5 table `message_search` (rowid = the event's id) that
   an AFTER INSERT trigger on `events` fills for every message and edit (the log is append-only,
   so inserts are the only changes); existing events are indexed here. On PostgreSQL an
   expression GIN index over the same text (`to_tsvector('simple', …)`), which the database
   keeps in step on its own.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None


SEARCHED_KINDS = "('user/message', 'assistant/message', 'surface/replaced')"
"""The events whose text search finds: messages, and edits (their `message.content`)."""

SQLITE_TEXT = ("coalesce(json_extract({row}.body, '$.content'), json_extract({row}.body, '$.message.content'), '')")
POSTGRES_VECTOR = ("to_tsvector('simple', coalesce((body::jsonb)->>'content', "
                   "((body::jsonb)->'message')->>'content', ''))")
"""Kept identical to `store.search` (a query must name the indexed expression to use the index)."""


def upgrade() -> None:
    op.create_table(
        "opening_drafts",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("character_id", sa.Integer(),
                  sa.ForeignKey("characters.id", name="fk_opening_drafts_character_id_characters"), nullable=False),
        sa.Column("greeting_index", sa.Integer(), nullable=False),
        sa.Column("preset_id", sa.Integer(), nullable=True),
        sa.Column("strategy", sa.Text(), nullable=False),
        sa.Column("lore", sa.Text(), nullable=False),
        sa.Column("user_name", sa.String(512), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("greeting_index >= 0", name="ck_opening_drafts_greeting_nonnegative"),
    )
    op.create_index("ix_opening_drafts_character_id", "opening_drafts", ["character_id"])
    with op.batch_alter_table("playthroughs") as batch:
        batch.add_column(sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("CREATE VIRTUAL TABLE message_search USING fts5(content, content='', "
                   "tokenize='unicode61 remove_diacritics 2')")
        op.execute(f"""CREATE TRIGGER events_search_insert AFTER INSERT ON events
            WHEN NEW.kind IN {SEARCHED_KINDS} BEGIN
            INSERT INTO message_search(rowid, content) VALUES (NEW.id, {SQLITE_TEXT.format(row="NEW")});
            END""")
        op.execute(f"INSERT INTO message_search(rowid, content) SELECT id, {SQLITE_TEXT.format(row='events')} "
                   f"FROM events WHERE kind IN {SEARCHED_KINDS}")
    elif dialect == "postgresql":
        op.execute(f"CREATE INDEX ix_events_search ON events USING gin ({POSTGRES_VECTOR}) "
                   f"WHERE kind IN {SEARCHED_KINDS}")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        op.execute("DROP TRIGGER IF EXISTS events_search_insert")
        op.execute("DROP TABLE IF EXISTS message_search")
    elif dialect == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_events_search")
    with op.batch_alter_table("playthroughs") as batch:
        batch.drop_column("archived_at")
    op.drop_index("ix_opening_drafts_character_id", table_name="opening_drafts")
    op.drop_table("opening_drafts")
