"""Provides `EventLog`: the engine's `SessionLog` on SQLAlchemy Core (the append hot path).

`EventLog` is the write side (sessions and appends) on top of its reads: `event_reads.SurfaceReads`
(surfaces, counts, the log's version) and `event_timeline.TimelineReads` (the timeline's reads).
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Engine, bindparam, func, insert, select
from sqlalchemy.exc import IntegrityError, OperationalError

from tavern_tui.engine.events import Event, NewEvent, body_hash, canonical_json
from tavern_tui.errors import NotFound, StoreError
from tavern_tui.store.db import busy_error, is_busy
from tavern_tui.store.event_reads import EVENTS, SESSION_EXISTS, SESSIONS, row_to_event
from tavern_tui.store.event_timeline import TimelineReads

__all__ = ["EVENTS", "SESSIONS", "EventLog", "row_to_event"]

# Built once: the append path then skips statement construction (SQLAlchemy caches the compile).
_COLUMNS = ["session_id", "seq", "kind", "role", "origin", "source", "body", "body_sha256", "created_at"]
# One statement per event: the next seq is computed inside the INSERT, under the write lock.
_APPEND = (
    insert(EVENTS)
    .from_select(
        _COLUMNS,
        select(
            bindparam("session_id", type_=EVENTS.c.session_id.type),
            func.coalesce(func.max(EVENTS.c.seq), 0) + 1,
            *(bindparam(name, type_=EVENTS.c[name].type) for name in _COLUMNS[2:]),
        ).where(EVENTS.c.session_id == bindparam("session_id")),
    )
    .returning(EVENTS.c.seq)
)
# Other databases have no BEGIN IMMEDIATE: lock the session's row first, so appends to one
# session queue up and `max(seq) + 1` cannot race. PostgreSQL: FOR NO KEY UPDATE, which still
# lets other transactions create forks that point at the session.
_LOCK_SESSION = SESSION_EXISTS.with_for_update(key_share=True)
_APPEND_SQLITE = (
    "INSERT INTO events (session_id, seq, kind, role, origin, source, body, body_sha256, created_at) "
    "SELECT :session_id, coalesce(max(seq), 0) + 1, :kind, :role, :origin, :source, :body, :body_sha256, :created_at "
    "FROM events WHERE session_id = :session_id RETURNING seq"
)

# The compare in `append_if_unchanged`: an own event of the kind after the seq the caller read.
_NEWER = (select(EVENTS.c.seq).where(EVENTS.c.session_id == bindparam("sid"), EVENTS.c.kind == bindparam("kind"),
                                     EVENTS.c.seq > bindparam("after")).limit(1))
_NEWER_SQLITE = "SELECT seq FROM events WHERE session_id = :sid AND kind = :kind AND seq > :after LIMIT 1"


class _Changed(Exception):
    """`append_if_unchanged`'s compare failed inside the transaction (rolled back)."""


class EventLog(TimelineReads):
    """Append-only session log in the database; implements `engine.log.SessionLog`.

    Every append is one transaction: the next seq is `max(seq) + 1` under the write lock
    (BEGIN IMMEDIATE in SQLite, a lock on the session's row elsewhere) and `(session_id, seq)`
    is unique, so seqs are gapless from 1.
    Nothing here updates or deletes an event.
    """

    def __init__(self, engine: Engine, write_engine: Engine | None = None) -> None:
        self._engine = engine
        self._write = write_engine or engine
        self._sqlite = engine.dialect.name == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)  # RETURNING
        self._lineage: dict[int, tuple[int | None, int | None]] = {}  # sessions never re-parent
        # Whole surfaces by session, with the log version they were read at (`surface_events`).
        self._surfaces: dict[int, tuple[tuple[int, int], tuple[Event, ...]]] = {}
        self._pin = threading.local()  # `pinned_version`: this thread's version while a read-only build runs

    def create_session(self, parent_id: int | None = None, fork_seq: int | None = None,
                       playthrough_id: int | None = None) -> int:
        """Insert a session row (a fork when `parent_id` is given) and return its id.

        A fork is one row: nothing of the parent is copied (seed 000 §1.1).

        Raises:
            ValueError: only one of `parent_id` / `fork_seq` given.
            NotFound: the parent session does not exist.
        """
        if (parent_id is None) != (fork_seq is None):
            raise ValueError("a fork needs both parent_id and fork_seq")
        self._pin.version = None  # this thread changes the log: its version is read again
        with self._write.begin() as conn:
            if parent_id is not None:
                exists = conn.execute(select(SESSIONS.c.id).where(SESSIONS.c.id == parent_id)).first()
                if exists is None:
                    raise NotFound(f"session {parent_id} does not exist")
            result = conn.execute(
                insert(SESSIONS).values(parent_id=parent_id, fork_seq=fork_seq, playthrough_id=playthrough_id,
                                        created_at=datetime.now(UTC))
            )
            session_id = int(result.inserted_primary_key[0])
        self._lineage[session_id] = (parent_id, fork_seq)
        return session_id

    def append(self, session_id: int, events: Sequence[NewEvent]) -> list[Event]:
        """Append `events` in one transaction with the next gapless seqs.

        Raises:
            NotFound: no such session.
            StoreError: the database refused the insert.
        """
        return self._append(session_id, events, None)

    def _append(self, session_id: int, events: Sequence[NewEvent], guard: tuple[str, int] | None) -> list[Event]:
        if not events:
            return []
        self._pin.version = None  # this thread changes the log: its version is read again
        now = datetime.now(UTC)
        rows = []
        for new in events:
            text = canonical_json(new.body)
            rows.append((new, text, body_hash(text)))
        try:
            seqs = (self._append_sqlite(session_id, rows, now, guard) if self._sqlite
                    else self._append_core(session_id, rows, now, guard))
        except (OperationalError, sqlite3.OperationalError) as exc:
            if is_busy(exc):
                raise busy_error(exc) from exc
            raise
        except (IntegrityError, sqlite3.IntegrityError) as exc:
            with self._engine.connect() as conn:
                if conn.execute(SESSION_EXISTS, {"sid": session_id}).first() is None:
                    raise NotFound(f"session {session_id} does not exist") from exc
            raise StoreError(f"could not append to session {session_id}: {getattr(exc, 'orig', exc)}") from exc
        return [Event(session_id, seq, str(new.kind), new.role, new.origin, new.source, text, digest, now,
                      json.loads(text))
                for seq, (new, text, digest) in zip(seqs, rows)]

    def append_if_unchanged(self, session_id: int, events: Sequence[NewEvent], kind: str,
                            after_seq: int) -> list[Event] | None:
        """Append `events` only when the session holds no own event of `kind` with seq >
        `after_seq`, checked in the same write transaction (the inbox's compare-and-append:
        two processes computing a splice on the same queue, only the first one lands).

        Returns:
            The stored events, or None when such an event exists (nothing is written).

        Raises:
            NotFound / StoreError: as `append`.
        """
        try:
            return self._append(session_id, events, (kind, after_seq))
        except _Changed:
            return None

    @staticmethod
    def _params(session_id: int, new: NewEvent, text: str, digest: str, now: datetime) -> dict[str, object]:
        return {"session_id": session_id, "kind": str(new.kind), "role": new.role,
                "origin": new.origin.value if new.origin else None, "source": new.source, "body": text,
                "body_sha256": digest, "created_at": now}

    def _append_core(self, session_id: int, rows: list[tuple[NewEvent, str, str]], now: datetime,
                     guard: tuple[str, int] | None = None) -> list[int]:
        with self._write.begin() as conn:
            if conn.execute(_LOCK_SESSION, {"sid": session_id}).first() is None:
                raise NotFound(f"session {session_id} does not exist")
            if guard is not None and conn.execute(_NEWER, {"sid": session_id, "kind": guard[0],
                                                           "after": guard[1]}).first() is not None:
                raise _Changed
            return [conn.execute(_APPEND, self._params(session_id, new, text, digest, now)).scalar_one()
                    for new, text, digest in rows]

    def _append_sqlite(self, session_id: int, rows: list[tuple[NewEvent, str, str]], now: datetime,
                       guard: tuple[str, int] | None = None) -> list[int]:
        # The hot path, straight on the pooled driver connection: SQLAlchemy's per-transaction
        # overhead is ~5x the insert itself (benchmarks/event_append). Same SQL as `_APPEND`,
        # same datetime text SQLAlchemy's SQLite DateTime writes.
        pooled = self._engine.raw_connection()
        try:
            db = pooled.driver_connection
            stamp = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
            db.execute("BEGIN IMMEDIATE")
            try:
                if guard is not None and db.execute(_NEWER_SQLITE, {"sid": session_id, "kind": guard[0],
                                                                    "after": guard[1]}).fetchone() is not None:
                    raise _Changed
                seqs = []
                for new, text, digest in rows:
                    p = self._params(session_id, new, text, digest, now)
                    p["created_at"] = stamp
                    seqs.append(db.execute(_APPEND_SQLITE, p).fetchone()[0])
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
            return seqs
        finally:
            pooled.close()

