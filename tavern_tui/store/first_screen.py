"""Provides `read_first_screen`: what the TUI's first screen lists (the characters, and which one
was played last), read with the standard library's `sqlite3` before SQLAlchemy and the rest of
the store are imported, so the home screen paints while the service opens behind it.

It reads only an embedded SQLite file already at the newest schema (`revision.head_revision`),
read-only; where that file does not exist yet (a first start) the list is empty. It answers None
for anything else (another database, a schema to migrate, any SQLite error): the caller then
opens the service first, as every command does.
The card fields a list shows are taken with SQLite's JSON functions from the stored normalised
card (`ParsedCard.to_dict`), so no card is parsed in Python; `service.first_screen` turns the
rows into the views `LibraryService` gives (a test compares the two on the corpus).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tavern_tui.store.revision import head_revision
from tavern_tui.store.times import as_utc

_PREFIXES = ("sqlite:///", "sqlite+pysqlite:///")

# The columns of `LibraryService._character_view`, from the stored card: creator, tags (JSON
# text), alternate greetings, and the embedded book's entries (NULL when there is no book or an
# empty one, as `card.character_book` is falsy then).
_CHARACTERS = """
SELECT id, name, spec, source_name, created_at, revision,
       json_extract(data, '$.data.creator'), json_extract(data, '$.data.tags'),
       json_array_length(data, '$.data.alternate_greetings'),
       CASE WHEN json_type(data, '$.data.character_book') = 'object'
                 AND json_extract(data, '$.data.character_book') != '{}'
            THEN coalesce(json_array_length(data, '$.data.character_book.entries'), 0) END,
       json_extract(data, '$.data.description')
FROM characters WHERE archived_at IS NULL ORDER BY name, id
"""

# `PlaythroughRepository.list(None, 1)`: the most recently played, then the newest id.
_LAST_PLAYED = """
SELECT character_id FROM playthroughs WHERE archived_at IS NULL AND opening_draft IS NULL
ORDER BY updated_at DESC, id DESC LIMIT 1
"""


@dataclass(frozen=True, slots=True)
class CharacterRow:
    """One character as the first screen lists it (`created_at` in UTC, as the repositories give it)."""

    id: int
    name: str
    spec: str
    source_name: str
    created_at: datetime
    revision: int
    creator: object
    tags_json: str | None
    alternate_greetings: int | None
    book_entries: int | None
    description: object


@dataclass(frozen=True, slots=True)
class FirstScreenRows:
    """The characters not archived, by name then id, and the id of the last played one (None
    before any playthrough)."""

    characters: tuple[CharacterRow, ...]
    last_played: int | None


def sqlite_file(url: str) -> Path | None:
    """The file of a plain SQLite URL (`sqlite:///relative`, `sqlite:////absolute`), or None for
    any other URL (another database, in memory, query options)."""
    prefix = next((p for p in _PREFIXES if url.startswith(p)), None)
    if prefix is None or "?" in url:
        return None
    database = url[len(prefix):]
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser()


def read_first_screen(url: str) -> FirstScreenRows | None:
    """The first screen's rows from the database at `url`, or None when it cannot be read this
    way (see the module text). Never writes and never raises for a database it cannot read."""
    path = sqlite_file(url)
    if path is None:
        return None
    if not path.exists():
        return FirstScreenRows((), None)  # a first start: nothing imported yet (the service creates the file)
    if not path.is_file():
        return None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=1.0)
    except sqlite3.Error:
        return None
    try:
        versions = conn.execute("SELECT version_num FROM alembic_version").fetchall()
        if [v for (v,) in versions] != [head_revision()]:
            return None
        characters = tuple(CharacterRow(row[0], row[1], row[2], row[3], as_utc(datetime.fromisoformat(row[4])),
                                        *row[5:]) for row in conn.execute(_CHARACTERS))
        last = conn.execute(_LAST_PLAYED).fetchone()
    except sqlite3.Error:
        return None
    finally:
        conn.close()
    return FirstScreenRows(characters, int(last[0]) if last else None)
