"""Provides the world-book and preset repositories and their records: imported resources whose
normalised JSON (`data`) can be megabytes, so the step's path reads their stamps (id, name, content
hash) and loads `data` only for a book it has not parsed yet. They flush, never commit."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session, defer

from tavern_tui.errors import NotFound
from tavern_tui.store.models import Preset, WorldBook
from tavern_tui.store.repositories import flush_unique
from tavern_tui.store.times import as_utc


@dataclass(frozen=True, slots=True)
class WorldBookRecord:
    """A stored world book (`data`: its SillyTavern World Info JSON as canonical text), or a
    preset (`data`: the preset's SillyTavern JSON)."""

    id: int
    name: str
    source_name: str
    original_sha256: str
    data: str
    created_at: datetime
    data_sha256: str = ""
    """SHA-256 of `data` (hex), stored with it."""


@dataclass(frozen=True, slots=True)
class WorldBookStamp:
    """What names a stored book's (or preset's) content without loading it: a parsed copy cached
    under (id, name, data_sha256) is current."""

    id: int
    name: str
    data_sha256: str


def _world_book(row: WorldBook | Preset) -> WorldBookRecord:
    return WorldBookRecord(row.id, row.name, row.source_name, row.original_sha256, row.data, as_utc(row.created_at),
                           row.data_sha256)


def content_sha256(data: str) -> str:
    """SHA-256 (hex) of a resource's normalised JSON text, as stored in `data_sha256`."""
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


class WorldBookRepository:
    """World books: add, find by file hash or name, list, replace the normalised data (an edit).
    `PresetRepository` is the same over presets."""

    model: type[WorldBook] | type[Preset] = WorldBook
    what = "world book"
    stamp_index: bool = True
    """Whether the table has a covering index of (id, name, data_sha256) (`ix_world_books_stamp`;
    presets: small rows, none)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, *, name: str, source_name: str, original: bytes, original_sha256: str, data: str) -> WorldBookRecord:
        """Insert a world book and return it (flushed, not committed)."""
        row = self.model(name=name, source_name=source_name, original=original, original_sha256=original_sha256,
                         data=data, data_sha256=content_sha256(data), created_at=datetime.now(UTC))
        self._session.add(row)
        flush_unique(self._session, self.what, original_sha256)
        return _world_book(row)

    def by_sha256(self, digest: str) -> WorldBookRecord | None:
        """The book imported from a file with these exact bytes, if any."""
        row = self._session.scalars(self._select().where(self.model.original_sha256 == digest)).first()
        return _world_book(row) if row else None

    def get(self, book_id: int) -> WorldBookRecord:
        """One book. Raises NotFound."""
        row = self._session.get(self.model, book_id, options=[defer(self.model.original)])
        if row is None:
            raise NotFound(f"no {self.what} with id {book_id}")
        return _world_book(row)

    def get_many(self, book_ids: list[int]) -> dict[int, WorldBookRecord]:
        """The books with these ids (missing ids are left out), by id."""
        if not book_ids:
            return {}
        rows = self._session.scalars(self._select().where(self.model.id.in_(book_ids)))
        return {row.id: _world_book(row) for row in rows}

    def stamps(self, book_ids: list[int]) -> dict[int, WorldBookStamp]:
        """The stamps of the books with these ids (missing ids left out), by id: one indexed
        read of three short columns, whatever the books' size."""
        if not book_ids:
            return {}
        model = self.model
        key: Any = model.id
        if self.stamp_index and self._session.get_bind().dialect.name == "sqlite":
            # By rowid SQLite walks the row past `data` to the hash; `id + 0` is no rowid key, so
            # the planner scans the covering stamp index instead (one entry a book).
            key = model.id + 0
        rows = self._session.execute(select(model.id, model.name, model.data_sha256).where(key.in_(book_ids)))
        return {row.id: WorldBookStamp(row.id, row.name, row.data_sha256) for row in rows}

    def data_of(self, book_id: int) -> str:
        """A book's stored `data` alone. Raises NotFound."""
        data = self._session.scalar(select(self.model.data).where(self.model.id == book_id))
        if data is None:
            raise NotFound(f"no {self.what} with id {book_id}")
        return data

    def _select(self) -> Select[tuple[WorldBook | Preset]]:
        """The model's rows without the original file's bytes (only an export reads those)."""
        return select(self.model).options(defer(self.model.original))

    def by_name(self, name: str) -> list[WorldBookRecord]:
        """Books whose name equals `name`, case-insensitively, newest first."""
        query = self._select().where(func.lower(self.model.name) == name.lower()).order_by(self.model.id.desc())
        return [_world_book(row) for row in self._session.scalars(query)]

    def names(self) -> list[str]:
        """Every stored name (for "did you mean" hints), without loading the records."""
        return list(self._session.scalars(select(self.model.name).distinct()))

    def all(self) -> list[WorldBookRecord]:
        """Every book, by name."""
        query = self._select().order_by(self.model.name, self.model.id)
        return [_world_book(r) for r in self._session.scalars(query)]

    def replace_data(self, book_id: int, *, name: str, data: str) -> WorldBookRecord:
        """Store an edited book (name and normalised JSON); the original file bytes stay. Raises NotFound."""
        row = self._session.get(self.model, book_id)
        if row is None:
            raise NotFound(f"no {self.what} with id {book_id}")
        row.name = name
        row.data = data
        row.data_sha256 = content_sha256(data)
        self._session.flush()
        return _world_book(row)


class PresetRepository(WorldBookRepository):
    """Chat-completion presets: the same operations as world books (`data` is the preset as
    SillyTavern JSON, connection fields left out)."""

    model = Preset
    what = "preset"
    stamp_index = False
