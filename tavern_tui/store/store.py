"""Provides `Store`: opens the database (migrating it) and hands out repositories and the event log."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import insert
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from tavern_tui.engine.events import NewEvent, body_hash, canonical_json
from tavern_tui.store.books import PresetRepository, WorldBookRepository
from tavern_tui.store.db import busy_error, is_busy, make_engine, upgrade, write_engine
from tavern_tui.store.eventlog import EventLog
from tavern_tui.store.groups import GroupRepository
from tavern_tui.store.leases import StepLeases
from tavern_tui.store.models import EventRow, SessionRow
from tavern_tui.store.openings import DraftRepository, OpeningRepository, RegexRepository
from tavern_tui.store.persona import BeliefRepository, PersonaRepository, StrategyRepository
from tavern_tui.store.repositories import (
    BindingRepository,
    CharacterRepository,
    PlaythroughRecord,
    PlaythroughRepository,
)
from tavern_tui.store.search import MessageSearch
from tavern_tui.store.templates import TemplateRepository


@dataclass(frozen=True, slots=True)
class PlannedSession:
    """A session an import creates: `parent` is an earlier planned session's key (None for the
    root), `fork_seq` the inclusive fork point in it."""

    key: str
    parent: str | None = None
    fork_seq: int | None = None


@dataclass(frozen=True)
class UnitOfWork:
    """Repositories bound to one transaction."""

    characters: CharacterRepository
    playthroughs: PlaythroughRepository
    world_books: WorldBookRepository
    bindings: BindingRepository
    presets: PresetRepository
    personas: PersonaRepository
    beliefs: BeliefRepository
    strategies: StrategyRepository
    drafts: DraftRepository
    regex: RegexRepository
    openings: OpeningRepository
    templates: TemplateRepository
    groups: GroupRepository


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
        self.write_engine = write_engine(self.engine)
        self._sessions = sessionmaker(self.write_engine, expire_on_commit=False)
        self._read_sessions = sessionmaker(self.engine, expire_on_commit=False)
        self.events = EventLog(self.engine, self.write_engine)
        self.claims = StepLeases(self.engine, self.write_engine)
        self.search = MessageSearch(self.engine)
        self._watch: sqlite3.Connection | None = None  # `data_version`'s own connection, never written through
        self._watch_lock = threading.Lock()

    def data_version(self) -> int | None:
        """A number that changes whenever anything is committed to the database, by this process or
        another (SQLite's `PRAGMA data_version` on a connection of its own that never writes, so
        every commit is another connection's), or None where it cannot be told (not a SQLite file:
        in memory, another database). Read in microseconds: what was derived from the database
        (a request built ahead of its step) is still exact while it has not changed."""
        database = self.engine.url.database
        if self.engine.dialect.name != "sqlite" or not database or database == ":memory:" or "mode=memory" in database:
            return None
        with self._watch_lock:
            try:
                if self._watch is None:
                    self._watch = sqlite3.connect(database, check_same_thread=False,
                                                  uri=database.startswith("file:"))
                return int(self._watch.execute("PRAGMA data_version").fetchone()[0])
            except sqlite3.Error:
                return None

    @contextmanager
    def unit_of_work(self, *, write: bool = True) -> Iterator[UnitOfWork]:
        """One transaction: commits when the block ends, rolls back when it raises.

        Args:
            write: a write transaction (SQLite `BEGIN IMMEDIATE`: it waits for another writer
                up to the busy timeout). False for a read: deferred, no lock, a WAL snapshot,
                so it never waits for a writer.

        Raises:
            StoreError: the busy timeout ran out waiting for another process's write lock.
        """
        session: Session = (self._sessions if write else self._read_sessions)()
        try:
            with session.begin():
                yield UnitOfWork(CharacterRepository(session), PlaythroughRepository(session),
                                 WorldBookRepository(session), BindingRepository(session), PresetRepository(session),
                                 PersonaRepository(session), BeliefRepository(session), StrategyRepository(session),
                                 DraftRepository(session), RegexRepository(session), OpeningRepository(session),
                                 TemplateRepository(session), GroupRepository(session))
        except OperationalError as exc:
            if is_busy(exc):
                raise busy_error(exc) from exc
            raise
        finally:
            session.close()

    def import_playthrough(self, *, character_id: int, user_name: str, title: str, meta: str,
                           sessions: Sequence[PlannedSession], events: Sequence[tuple[str, NewEvent]],
                           head: str, played_at: datetime | None = None,
                           group_id: int | None = None) -> PlaythroughRecord:
        """Create a whole playthrough (its session tree and events) in one transaction: a
        failure stores none of it. Events are inserted in the order given (siblings of the
        timeline sort by it); each session's seqs run gaplessly from 1. `played_at`: when it
        was last played (an imported chat's newest message; default now). `group_id`: the group
        it plays (an imported group chat), in the same transaction.

        Raises:
            KeyError: an event or parent names a session not planned before it.
            NotFound: no group `group_id` (nothing is kept).
            StoreError / SQLAlchemyError: the database refused it (nothing is kept).
        """
        now = datetime.now(UTC)
        session: Session = self._sessions()
        try:
            with session.begin():
                ids: dict[str, int] = {}
                for planned in sessions:
                    row = SessionRow(parent_id=ids[planned.parent] if planned.parent else None,
                                     fork_seq=planned.fork_seq, created_at=now)
                    session.add(row)
                    session.flush()
                    ids[planned.key] = row.id
                seqs: dict[str, int] = {}
                rows = []
                for key, new in events:
                    seqs[key] = seqs.get(key, 0) + 1
                    text = canonical_json(new.body)
                    rows.append({"session_id": ids[key], "seq": seqs[key], "kind": str(new.kind), "role": new.role,
                                 "origin": new.origin.value if new.origin else None, "source": new.source,
                                 "body": text, "body_sha256": body_hash(text), "created_at": now})
                if rows:
                    session.execute(insert(EventRow), rows)
                repo = PlaythroughRepository(session)
                record = repo.add(character_id=character_id, title=title, user_name=user_name,
                                  session_id=ids[sessions[0].key], meta=meta)
                repo.adopt(list(ids.values()), record.id)
                record = repo.set_head(record.id, ids[head])
                if group_id is not None:
                    GroupRepository(session).attach(record.id, group_id)
                return repo.touch(record.id, played_at) if played_at is not None else record
        finally:
            session.close()

    def close(self) -> None:
        """Release connections."""
        with self._watch_lock:
            if self._watch is not None:
                self._watch.close()
                self._watch = None
        self.engine.dispose()
