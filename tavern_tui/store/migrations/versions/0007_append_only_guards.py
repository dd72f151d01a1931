"""Append-only guards beyond the event log: persona revisions and saved strategy versions refuse
UPDATE and DELETE at the database (as `events` has since 0001), and on PostgreSQL a TRUNCATE of
any of the three is refused too (row-level triggers do not fire on TRUNCATE).

Why: a persona revision is the history the owner reviews (seed 002 ADR-0079: the document is
append-only, the newest revision is the document) and a strategy version is what a trace's
snapshot names (issue 5: saved versions never change). The repositories never update or delete
them; these triggers make that a property of the database, whoever writes to it.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

GUARDED = ("persona_revisions", "strategies")


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in GUARDED:
            for verb in ("UPDATE", "DELETE"):
                op.execute(f"""CREATE TRIGGER {table}_no_{verb.lower()} BEFORE {verb} ON {table}
                    BEGIN SELECT RAISE(ABORT, '{table} is append-only: {verb} refused'); END""")
    elif dialect == "postgresql":
        op.execute("""CREATE FUNCTION tavern_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP; END $$""")
        for table in GUARDED:
            op.execute(f"""CREATE TRIGGER {table}_append_only BEFORE UPDATE OR DELETE ON {table}
                FOR EACH ROW EXECUTE FUNCTION tavern_append_only()""")
        for table in ("events", *GUARDED):
            op.execute(f"""CREATE TRIGGER {table}_no_truncate BEFORE TRUNCATE ON {table}
                FOR EACH STATEMENT EXECUTE FUNCTION tavern_append_only()""")


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "sqlite":
        for table in GUARDED:
            for verb in ("update", "delete"):
                op.execute(f"DROP TRIGGER IF EXISTS {table}_no_{verb}")
    elif dialect == "postgresql":
        for table in ("events", *GUARDED):
            op.execute(f"DROP TRIGGER IF EXISTS {table}_no_truncate ON {table}")
        for table in GUARDED:
            op.execute(f"DROP TRIGGER IF EXISTS {table}_append_only ON {table}")
        op.execute("DROP FUNCTION IF EXISTS tavern_append_only()")
