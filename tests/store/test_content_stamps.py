"""Content stamps (migration 0018) on whichever database `blank_db_url` gives: a world book's and a
preset's `data_sha256` is the SHA-256 of their stored `data` (filled in for rows from before, and
kept current by every write), the events index covers (session, kind, seq), and going back down
leaves the rows as they were."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine

from tavern_tui.store.db import current_revision, head_revision, make_engine, upgrade
from tavern_tui.store.store import Store
from tests.store.test_preset_binding_migration import _downgrade

BOOK = json.dumps({"entries": {"0": {"uid": 0, "key": ["ada"], "content": "Ada is a scout."}}}, sort_keys=True)


def _insert(engine: Engine, table: str, name: str, data: str) -> int:
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO {table} (name, source_name, original, original_sha256, data, created_at) "
                          "VALUES (:name, :file, :raw, :sha, :data, :at)"),
                     {"name": name, "file": f"{name}.json", "raw": name.encode(), "sha": name.ljust(64, "0"),
                      "data": data, "at": datetime.now(UTC)})
        return int(conn.execute(text(f"SELECT id FROM {table} WHERE name = :name"), {"name": name}).scalar_one())


def _stamp(engine: Engine, table: str, row: int) -> str:
    with engine.connect() as conn:
        return str(conn.execute(text(f"SELECT data_sha256 FROM {table} WHERE id = :id"), {"id": row}).scalar_one())


def _event_indexes(engine: Engine) -> dict[str, list[str | None]]:
    return {ix["name"]: ix["column_names"] for ix in inspect(engine).get_indexes("events") if ix["name"]}


def test_rows_from_before_get_the_hash_of_their_data_and_a_downgrade_drops_it(blank_db_url: str) -> None:
    engine = make_engine(blank_db_url)
    try:
        upgrade(engine, "0017")
        book = _insert(engine, "world_books", "lore", BOOK)
        preset = _insert(engine, "presets", "preset", '{"temperature": 1}')
        assert _event_indexes(engine)["ix_events_session_kind"] == ["session_id", "kind"]

        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert _stamp(engine, "world_books", book) == hashlib.sha256(BOOK.encode()).hexdigest()
        assert _stamp(engine, "presets", preset) == hashlib.sha256(b'{"temperature": 1}').hexdigest()
        indexes = _event_indexes(engine)
        assert indexes["ix_events_session_kind_seq"] == ["session_id", "kind", "seq"]
        assert "ix_events_session_kind" not in indexes

        _downgrade(engine, "0017")
        assert "data_sha256" not in {c["name"] for c in inspect(engine).get_columns("world_books")}
        assert _event_indexes(engine)["ix_events_session_kind"] == ["session_id", "kind"]
        with engine.connect() as conn:
            assert conn.execute(text("SELECT data FROM world_books WHERE id = :id"), {"id": book}).scalar_one() == BOOK
    finally:
        engine.dispose()


def test_writes_keep_the_stamp_current_and_a_stamp_never_carries_the_data(blank_db_url: str) -> None:
    store = Store(blank_db_url)
    try:
        with store.unit_of_work() as uow:
            added = uow.world_books.add(name="lore", source_name="lore.json", original=b"raw",
                                        original_sha256="f" * 64, data=BOOK)
        assert added.data_sha256 == hashlib.sha256(BOOK.encode()).hexdigest()
        edited = BOOK.replace("scout", "pilot")
        with store.unit_of_work() as uow:
            uow.world_books.replace_data(added.id, name="lore 2", data=edited)
        with store.unit_of_work(write=False) as uow:
            stamps = uow.world_books.stamps([added.id, added.id + 99])
            assert uow.world_books.data_of(added.id) == edited
        assert list(stamps) == [added.id]  # a missing id is left out
        stamp = stamps[added.id]
        assert (stamp.name, stamp.data_sha256) == ("lore 2", hashlib.sha256(edited.encode()).hexdigest())
        assert not hasattr(stamp, "data")
    finally:
        store.close()
