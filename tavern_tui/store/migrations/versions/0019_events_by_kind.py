"""Events found by kind across every session: an index on (kind, session_id, seq). The profile's
global variables (every state commit and cut-short attempt, re-read after each append), the
trace list and the other cross-chat reads asked for a kind with no session, which scanned the
whole events table with its bodies (88-165 ms on 110k events; 0.1 ms with the index).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_events_kind_session_seq", "events", ["kind", "session_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_events_kind_session_seq", table_name="events")
