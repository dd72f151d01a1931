"""Imports are unique by file hash (issue 23 item 5): migration 0010 merges the duplicates earlier
races left (references moved, nothing lost) and makes `original_sha256` unique; processes
importing the same folders at once store each file once (insert-or-get). SQLite, and PostgreSQL
with TAVERN_TEST_PG_URL (`-m any_database`)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from tavern_tui.store.db import make_engine, upgrade


def test_migration_0009_merges_duplicate_imports_keeping_every_reference(blank_db_url: str) -> None:
    engine = make_engine(blank_db_url)
    now = datetime.now(UTC)
    try:
        upgrade(engine, "0007")
        with engine.begin() as conn:
            for i, (digest, data) in enumerate([("a" * 64, '{"v":1}'), ("a" * 64, '{"v":1}'), ("a" * 64, '{"v":2}'),
                                                ("b" * 64, '{"w":1}')], start=1):
                conn.execute(text("INSERT INTO characters (id, name, spec, spec_version, source_name, original, "
                                  "original_sha256, data, created_at) VALUES (:i, 'C', 'v2', '2.0', 'c.png', :o, :h, "
                                  ":d, :t)"), {"i": i, "o": b"png", "h": digest, "d": data, "t": now})
                conn.execute(text("INSERT INTO world_books (id, name, source_name, original, original_sha256, data, "
                                  "created_at) VALUES (:i, 'B', 'b.json', :o, :h, '{}', :t)"),
                             {"i": i, "o": b"{}", "h": "c" * 64, "t": now})
            conn.execute(text("INSERT INTO sessions (id, created_at) VALUES (1, :t), (2, :t)"), {"t": now})
            for pid, character in ((1, 2), (2, 3)):  # one on a same-data copy, one on the edited copy
                conn.execute(text("INSERT INTO playthroughs (id, character_id, title, user_name, root_session_id, "
                                  "head_session_id, created_at, updated_at) VALUES (:p, :c, '', 'U', :p, :p, :t, :t)"),
                             {"p": pid, "c": character, "t": now})
            # Bindings: book 1 and its copy 2 both bound to character 1 (one repeats after the
            # merge); copy 3 bound globally.
            for bid, book, scope, target in ((1, 1, "character", 1), (2, 2, "character", 1), (3, 3, "global", None)):
                conn.execute(text("INSERT INTO world_book_bindings (id, world_book_id, scope, target_id, created_at) "
                                  "VALUES (:i, :b, :s, :t, :at)"), {"i": bid, "b": book, "s": scope, "t": target,
                                                                    "at": now})
        upgrade(engine)
        with engine.connect() as conn:
            characters = conn.execute(text("SELECT id, original_sha256, data FROM characters ORDER BY id")).all()
            playthroughs = conn.execute(text("SELECT id, character_id FROM playthroughs ORDER BY id")).all()
            books = conn.execute(text("SELECT id FROM world_books ORDER BY id")).scalars().all()
            bindings = conn.execute(text("SELECT world_book_id, scope, target_id FROM world_book_bindings "
                                         "ORDER BY id")).all()
        with engine.begin() as conn:  # the index now refuses a second row with a hash already stored
            try:
                conn.execute(text("INSERT INTO characters (name, spec, spec_version, source_name, original, "
                                  "original_sha256, data, created_at) VALUES ('C', 'v2', '', 'c', :o, :h, '{}', :t)"),
                             {"o": b"x", "h": "b" * 64, "t": now})
                refused = False
            except Exception as exc:  # noqa: BLE001 - the driver's IntegrityError
                refused = "unique" in str(exc).lower()
                conn.rollback()
    finally:
        engine.dispose()
    import hashlib

    edited = hashlib.sha256(f"{'a' * 64}:3".encode()).hexdigest()
    assert [tuple(r) for r in characters] == [(1, "a" * 64, '{"v":1}'), (3, edited, '{"v":2}'),
                                              (4, "b" * 64, '{"w":1}')]
    assert [tuple(r) for r in playthroughs] == [(1, 1), (2, 3)]  # moved to the kept row; the edit keeps its own
    assert books == [1]
    assert [tuple(r) for r in bindings] == [(1, "character", 1), (1, "global", None)]
    assert refused


_IMPORTER = """
import sys
from tavern_tui.config import Settings
from tavern_tui.service import Tavern
tavern = Tavern(Settings(db_url=sys.argv[1]))
try:
    results = tavern.imports.import_paths(sys.argv[2:])
    bad = [r.error for r in results if r.error]
    print("errors:", bad)
    sys.exit(1 if bad else 0)
finally:
    tavern.close()
"""


def test_processes_importing_the_same_folders_at_once_store_each_file_once(db_url: str, corpus_dir: Path) -> None:
    folders = [str(corpus_dir / "cards"), str(corpus_dir / "worldbooks"), str(corpus_dir / "presets")]
    upgrade_engine = make_engine(db_url)
    try:
        upgrade(upgrade_engine)  # the schema first: this test is about the imports racing
    finally:
        upgrade_engine.dispose()
    for _round in range(2):
        processes = [subprocess.Popen([sys.executable, "-c", _IMPORTER, db_url, *folders], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True) for _ in range(4)]
        outcomes = [p.communicate(timeout=300) + (p.returncode,) for p in processes]
        assert [code for _out, _err, code in outcomes] == [0] * 4, outcomes
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            counts = {t: conn.execute(text(f"SELECT count(*), count(DISTINCT original_sha256) FROM {t}")).one()
                      for t in ("characters", "world_books", "presets")}
    finally:
        engine.dispose()
    # shared/corpus: 6 cards, 4 world books, 4 presets (SOURCES.md), each stored once.
    assert {t: tuple(c) for t, c in counts.items()} == {"characters": (6, 6), "world_books": (4, 4),
                                                        "presets": (4, 4)}
