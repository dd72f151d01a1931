"""The "preset" world-book binding scope (migration 0015) on whichever database `blank_db_url`
gives (SQLite, or PostgreSQL with TAVERN_TEST_PG_URL): a database from before it refuses the scope,
upgrading to head keeps its bindings and accepts preset ones, and going back down removes only
the preset bindings."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from tavern_tui.store.db import current_revision, head_revision, make_engine, upgrade
from tavern_tui.store.store import Store


def _resource(engine: Engine, table: str, name: str) -> int:
    with engine.begin() as conn:
        conn.execute(text(f"INSERT INTO {table} (name, source_name, original, original_sha256, data, created_at) "
                          "VALUES (:name, :file, :raw, :sha, '{}', :at)"),
                     {"name": name, "file": f"{name}.json", "raw": name.encode(), "sha": name.ljust(64, "0"),
                      "at": datetime.now(UTC)})
        return int(conn.execute(text(f"SELECT id FROM {table} WHERE name = :name"), {"name": name}).scalar_one())


def _bind(engine: Engine, book: int, scope: str, target: int | None) -> None:
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO world_book_bindings (world_book_id, scope, target_id, created_at) "
                          "VALUES (:book, :scope, :target, :at)"),
                     {"book": book, "scope": scope, "target": target, "at": datetime.now(UTC)})


def _bindings(engine: Engine) -> list[tuple[int, str, int | None]]:
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT world_book_id, scope, target_id FROM world_book_bindings ORDER BY id"))
        return [(int(b), str(s), t) for b, s, t in rows]


def _downgrade(engine: Engine, revision: str) -> None:
    from alembic import command

    from tavern_tui.store.db import _alembic_config

    config = _alembic_config()  # the one upgrade() uses
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, revision)


def test_a_database_from_before_the_preset_scope_upgrades_and_takes_preset_bindings(blank_db_url: str) -> None:
    engine = make_engine(blank_db_url)
    try:
        upgrade(engine, "0014")
        book = _resource(engine, "world_books", "lore")
        preset = _resource(engine, "presets", "preset")
        _bind(engine, book, "global", None)
        with pytest.raises(IntegrityError):  # the scope is unknown before 0015
            _bind(engine, book, "preset", preset)

        upgrade(engine)
        assert current_revision(engine) == head_revision()
        assert _bindings(engine) == [(book, "global", None)]
        _bind(engine, book, "preset", preset)
        with pytest.raises(IntegrityError):  # a preset binding names its preset, as the other scopes do
            _bind(engine, book, "preset", None)
        assert _bindings(engine) == [(book, "global", None), (book, "preset", preset)]
    finally:
        engine.dispose()

    store = Store(blank_db_url)  # the repository reads the upgraded rows
    try:
        with store.unit_of_work(write=False) as uow:
            assert uow.bindings.books_for_many([("preset", preset), ("global", None)]) == [[book], [book]]
    finally:
        store.close()

    engine = make_engine(blank_db_url)
    try:
        _downgrade(engine, "0014")  # the preset bindings go, the others stay
        assert current_revision(engine) == "0014"
        assert _bindings(engine) == [(book, "global", None)]
        upgrade(engine)
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()
