"""Provides `first_screen`: the home screen's first list (the characters and the last played one)
read before the service opens, so the TUI paints while SQLAlchemy, the store and the services load
behind it (start-up: performance-anchors §7 B7, the first screen's data in one short query).

A light module of the service package: it imports the views and `store.first_screen` (the
standard library's `sqlite3`), nothing that loads SQLAlchemy. Its views are those
`LibraryService.characters()` and `LibraryService.last_played_character()` give for the same
database (tests compare them on the corpus).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tavern_tui.store.first_screen import CharacterRow, read_first_screen
from tavern_tui.views import CharacterView


@dataclass(frozen=True, slots=True)
class FirstScreen:
    """The home screen's first list: the characters not archived, by name, and the id of the
    character played last (None before any playthrough)."""

    characters: tuple[CharacterView, ...]
    last_played: int | None


def _view(row: CharacterRow) -> CharacterView:
    tags = json.loads(row.tags_json) if row.tags_json else []
    return CharacterView(row.id, row.name, row.spec, str(row.creator or ""),
                         tuple(str(t) for t in tags),
                         1 + (row.alternate_greetings or 0), row.book_entries, row.source_name,
                         row.created_at,
                         str(row.description or ""), False, row.revision or 0)


def first_screen(db_url: str) -> FirstScreen | None:
    """The first list of the database at `db_url` (empty when its file does not exist yet), or
    None when it cannot be read before the service opens (not an embedded SQLite file at the
    newest schema, or unreadable): the caller then opens the service first. Never writes."""
    rows = read_first_screen(db_url)
    if rows is None:
        return None
    return FirstScreen(tuple(_view(r) for r in rows.characters), rows.last_played)
