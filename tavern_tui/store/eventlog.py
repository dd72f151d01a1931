"""Provides `EventLog`: the engine's `SessionLog` on SQLAlchemy Core (the append hot path)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Engine, and_, bindparam, func, insert, or_, select
from sqlalchemy.exc import IntegrityError

from tavern_tui.engine.events import Event, NewEvent, body_hash, canonical_json, parse_origin
from tavern_tui.errors import NotFound, StoreError
from tavern_tui.store.models import EventRow, SessionRow

EVENTS = EventRow.__table__
SESSIONS = SessionRow.__table__

# Built once: the append path then skips statement construction (SQLAlchemy caches the compile).
_SESSION_EXISTS = select(SESSIONS.c.id).where(SESSIONS.c.id == bindparam("sid"))
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
_APPEND_SQLITE = (
    "INSERT INTO events (session_id, seq, kind, role, origin, source, body, body_sha256, created_at) "
    "SELECT :session_id, coalesce(max(seq), 0) + 1, :kind, :role, :origin, :source, :body, :body_sha256, :created_at "
    "FROM events WHERE session_id = :session_id RETURNING seq"
)


def _as_utc(value: datetime) -> datetime:
    # SQLite hands back naive datetimes; every time we store is UTC.
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def row_to_event(row) -> Event:  # type: ignore[no-untyped-def]
    """Turn an `events` row into an `Event` (the body is parsed from the stored text)."""
    return Event(
        session_id=row.session_id,
        seq=row.seq,
        kind=row.kind,
        role=row.role,
        origin=parse_origin(row.origin),
        source=row.source,
        body_text=row.body,
        body_sha256=row.body_sha256,
        created_at=_as_utc(row.created_at),
        body=json.loads(row.body),
    )


class EventLog:
    """Append-only session log in the database; implements `engine.log.SessionLog`.

    Every append is one transaction: the next seq is `max(seq) + 1` under the write lock
    (BEGIN IMMEDIATE in SQLite) and `(session_id, seq)` is unique, so seqs are gapless from 1.
    Nothing here updates or deletes an event.
    """

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._sqlite = engine.dialect.name == "sqlite" and sqlite3.sqlite_version_info >= (3, 35)  # RETURNING
        self._lineage: dict[int, tuple[int | None, int | None]] = {}  # sessions never re-parent

    def create_session(self, parent_id: int | None = None, fork_seq: int | None = None) -> int:
        """Insert a session row (a fork when `parent_id` is given) and return its id.

        Raises:
            ValueError: only one of `parent_id` / `fork_seq` given.
            NotFound: the parent session does not exist.
        """
        if (parent_id is None) != (fork_seq is None):
            raise ValueError("a fork needs both parent_id and fork_seq")
        with self._engine.begin() as conn:
            if parent_id is not None:
                exists = conn.execute(select(SESSIONS.c.id).where(SESSIONS.c.id == parent_id)).first()
                if exists is None:
                    raise NotFound(f"session {parent_id} does not exist")
            result = conn.execute(
                insert(SESSIONS).values(parent_id=parent_id, fork_seq=fork_seq, created_at=datetime.now(UTC))
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
        if not events:
            return []
        now = datetime.now(UTC)
        rows = []
        for new in events:
            text = canonical_json(new.body)
            rows.append((new, text, body_hash(text)))
        try:
            seqs = self._append_sqlite(session_id, rows, now) if self._sqlite else self._append_core(session_id, rows, now)
        except (IntegrityError, sqlite3.IntegrityError) as exc:
            with self._engine.connect() as conn:
                if conn.execute(_SESSION_EXISTS, {"sid": session_id}).first() is None:
                    raise NotFound(f"session {session_id} does not exist") from exc
            raise StoreError(f"could not append to session {session_id}: {getattr(exc, 'orig', exc)}") from exc
        return [Event(session_id, seq, str(new.kind), new.role, new.origin, new.source, text, digest, now, json.loads(text))
                for seq, (new, text, digest) in zip(seqs, rows)]

    @staticmethod
    def _params(session_id: int, new: NewEvent, text: str, digest: str, now: datetime) -> dict[str, object]:
        return {"session_id": session_id, "kind": str(new.kind), "role": new.role,
                "origin": new.origin.value if new.origin else None, "source": new.source, "body": text,
                "body_sha256": digest, "created_at": now}

    def _append_core(self, session_id: int, rows: list[tuple[NewEvent, str, str]], now: datetime) -> list[int]:
        with self._engine.begin() as conn:
            return [conn.execute(_APPEND, self._params(session_id, new, text, digest, now)).scalar_one()
                    for new, text, digest in rows]

    def _append_sqlite(self, session_id: int, rows: list[tuple[NewEvent, str, str]], now: datetime) -> list[int]:
        # The hot path, straight on the pooled driver connection: SQLAlchemy's per-transaction
        # overhead is ~5x the insert itself (benchmarks/event_append). Same SQL as `_APPEND`,
        # same datetime text SQLAlchemy's SQLite DateTime writes.
        pooled = self._engine.raw_connection()
        try:
            db = pooled.driver_connection
            stamp = now.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
            db.execute("BEGIN IMMEDIATE")
            try:
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

    def _chain(self, session_id: int, through_seq: int | None) -> list[tuple[int, int | None]]:
        """[(session, upto)] from the root down to `session_id`."""
        chain: list[tuple[int, int | None]] = []
        current: int | None = session_id
        upto = through_seq
        while current is not None:
            if current not in self._lineage:
                with self._engine.connect() as conn:
                    row = conn.execute(
                        select(SESSIONS.c.parent_id, SESSIONS.c.fork_seq).where(SESSIONS.c.id == current)
                    ).first()
                if row is None:
                    raise NotFound(f"session {current} does not exist")
                self._lineage[current] = (row.parent_id, row.fork_seq)
            chain.append((current, upto))
            current, upto = self._lineage[current]
        chain.reverse()
        return chain

    def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]:
        """Events visible from `session_id`, across its fork ancestry, in one query."""
        chain = self._chain(session_id, through_seq)
        order = {sid: index for index, (sid, _) in enumerate(chain)}
        clauses = [
            and_(EVENTS.c.session_id == sid, EVENTS.c.seq <= upto) if upto is not None else EVENTS.c.session_id == sid
            for sid, upto in chain
        ]
        with self._engine.connect() as conn:
            rows = conn.execute(select(EVENTS).where(or_(*clauses))).all()
        events = [row_to_event(row) for row in rows]
        events.sort(key=lambda e: (order[e.session_id], e.seq))
        return events

    def own_events(self, session_id: int, *, kinds: Sequence[str] | None = None) -> list[Event]:
        """The session's own events (no ancestry), optionally only some kinds, by seq."""
        query = select(EVENTS).where(EVENTS.c.session_id == session_id)
        if kinds:
            query = query.where(EVENTS.c.kind.in_(list(kinds)))
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(EVENTS.c.seq)).all()
        return [row_to_event(row) for row in rows]

    def head_seq(self, session_id: int) -> int:
        """The last seq the session holds (0 when empty).

        Raises:
            NotFound: no such session.
        """
        with self._engine.connect() as conn:
            last = conn.execute(select(func.max(EVENTS.c.seq)).where(EVENTS.c.session_id == session_id)).scalar_one()
            if last is None and conn.execute(_SESSION_EXISTS, {"sid": session_id}).first() is None:
                raise NotFound(f"session {session_id} does not exist")
        return int(last or 0)
