"""Events found by kind across every session (migration 0019) on whichever database `blank_db_url`
gives: the (kind, session_id, seq) index exists at head and goes again on the way down; on SQLite a
kind-only read (the global variables, the trace list) searches it instead of scanning the table."""

from __future__ import annotations

from sqlalchemy import inspect, text

from tavern_tui.store.db import current_revision, make_engine, upgrade
from tests.store.test_preset_binding_migration import _downgrade


def test_the_kind_index_is_there_at_head_and_a_kind_only_read_uses_it(blank_db_url: str) -> None:
    engine = make_engine(blank_db_url)
    try:
        upgrade(engine)
        indexes = {ix["name"]: ix["column_names"] for ix in inspect(engine).get_indexes("events")}
        assert indexes["ix_events_kind_session_seq"] == ["kind", "session_id", "seq"]
        if engine.dialect.name == "sqlite":
            with engine.connect() as conn:
                plan = " ".join(str(row[-1]) for row in conn.execute(text(
                    "EXPLAIN QUERY PLAN SELECT * FROM events WHERE kind IN ('state/commit', 'assistant/attempt') "
                    "ORDER BY session_id, seq")))
            assert "USING INDEX ix_events_kind_session_seq" in plan
        _downgrade(engine, "0018")
        assert current_revision(engine) == "0018"
        assert "ix_events_kind_session_seq" not in {ix["name"] for ix in inspect(engine).get_indexes("events")}
    finally:
        engine.dispose()
