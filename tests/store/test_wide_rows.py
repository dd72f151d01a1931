"""The step's reads leave a resource's big columns on disk: a character read does not load the
imported file's bytes, and a world book's stamp comes from its covering index, not from the row
(SQLite stores `data_sha256` after `data`, so reading it by rowid walks the whole of `data`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import event

from tavern_tui.store.store import Store


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    opened = Store(db_url)
    yield opened
    opened.close()


def _statements(store: Store) -> list[str]:
    seen: list[str] = []

    def before(conn, cursor, statement, parameters, context, executemany):  # noqa: ANN001, ARG001
        seen.append(statement)

    for engine in {store.engine, store.write_engine}:
        event.listen(engine, "before_cursor_execute", before)
    return seen


def test_reading_a_character_leaves_the_imported_file_unread(store: Store) -> None:
    png = b"\x89PNG" + bytes(300_000)
    with store.unit_of_work() as uow:
        added = uow.characters.add(name="Seraphina", spec="chara_card_v2", spec_version="2.0", source_name="s.png",
                                   original=png, original_sha256="a" * 64, data='{"name": "Seraphina"}')
    seen = _statements(store)
    with store.unit_of_work(write=False) as uow:
        record = uow.characters.get(added.id)
        listed = uow.characters.all()
    assert record.name == "Seraphina" and [c.id for c in listed] == [added.id]
    reads = [s for s in seen if s.lstrip().upper().startswith("SELECT") and "characters" in s]
    assert len(reads) == 2 and not any("characters.original," in s or "characters.original\n" in s for s in reads)
    with store.unit_of_work(write=False) as uow:  # an export still gets the exact bytes
        assert uow.characters.original(added.id) == png


def test_a_world_book_stamp_is_read_from_the_covering_index(tmp_path: Path) -> None:
    # SQLite's planner and row layout, whatever database the suite runs on (PostgreSQL keeps long
    # values out of the row, and reads the stamp with the plain query).
    store = Store(f"sqlite:///{tmp_path / 'stamps.sqlite3'}")
    try:
        _stamp_from_the_index(store)
    finally:
        store.close()


def _stamp_from_the_index(store: Store) -> None:
    with store.unit_of_work() as uow:
        book = uow.world_books.add(name="lore", source_name="lore.json", original=b"raw",
                                   original_sha256="b" * 64, data='{"entries": {}}' + " " * 200_000)
    seen: list[tuple[str, object]] = []
    event.listen(store.engine, "before_cursor_execute",
                 lambda conn, cursor, statement, parameters, context, many: seen.append((statement, parameters)))
    with store.unit_of_work(write=False) as uow:
        stamps = uow.world_books.stamps([book.id])
    assert stamps[book.id].name == "lore" and len(stamps[book.id].data_sha256) == 64
    ((query, parameters),) = [s for s in seen if "data_sha256" in s[0]]
    with store.engine.connect() as conn:
        plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + query, parameters).fetchall()
    assert any("COVERING INDEX ix_world_books_stamp" in str(row[-1]) for row in plan), plan
