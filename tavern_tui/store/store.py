"""Provides `Store`: opens the database (migrating it) and hands out repositories and the event log."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy.orm import Session, sessionmaker

from tavern_tui.store.db import make_engine, upgrade
from tavern_tui.store.eventlog import EventLog
from tavern_tui.store.repositories import (
    BindingRepository,
    CharacterRepository,
    PlaythroughRepository,
    WorldBookRepository,
)


@dataclass(frozen=True)
class UnitOfWork:
    """Repositories bound to one transaction."""

    characters: CharacterRepository
    playthroughs: PlaythroughRepository
    world_books: WorldBookRepository
    bindings: BindingRepository


class Store:
    """The database behind the service.

    Args:
        url: SQLAlchemy URL (SQLite file by default; PostgreSQL by URL).

    Raises:
        StoreError: bad URL, or a database newer than this version.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        upgrade(self.engine)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.events = EventLog(self.engine)

    @contextmanager
    def unit_of_work(self) -> Iterator[UnitOfWork]:
        """One transaction: commits when the block ends, rolls back when it raises."""
        session: Session = self._sessions()
        try:
            with session.begin():
                yield UnitOfWork(CharacterRepository(session), PlaythroughRepository(session),
                                 WorldBookRepository(session), BindingRepository(session))
        finally:
            session.close()

    def close(self) -> None:
        """Release connections."""
        self.engine.dispose()
