"""Provides `EventLog`: the engine's `SessionLog` on SQLAlchemy Core (the append hot path)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Engine, and_, func, insert, or_, select

from tavern_tui.engine.events import Event, NewEvent, body_hash, canonical_json, parse_origin
from tavern_tui.errors import NotFound, StoreError
from tavern_tui.store.models import EventRow, SessionRow

EVENTS = EventRow.__table__
SESSIONS = SessionRow.__table__


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
        stored: list[Event] = []
        with self._engine.begin() as conn:
            last = conn.execute(
                select(func.max(EVENTS.c.seq)).where(EVENTS.c.session_id == session_id)
            ).scalar_one()
            if last is None and conn.execute(select(SESSIONS.c.id).where(SESSIONS.c.id == session_id)).first() is None:
                raise NotFound(f"session {session_id} does not exist")
            seq = int(last or 0)
            rows = []
            for new in events:
                seq += 1
                text = canonical_json(new.body)
                digest = body_hash(text)
                origin = new.origin.value if new.origin else None
                rows.append(dict(session_id=session_id, seq=seq, kind=str(new.kind), role=new.role, origin=origin,
                                 source=new.source, body=text, body_sha256=digest, created_at=now))
                stored.append(Event(session_id, seq, str(new.kind), new.role, new.origin, new.source, text, digest, now,
                                    json.loads(text)))
            try:
                conn.execute(insert(EVENTS), rows)
            except Exception as exc:
                raise StoreError(f"could not append to session {session_id}: {exc}") from exc
        return stored

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
            if last is None and conn.execute(select(SESSIONS.c.id).where(SESSIONS.c.id == session_id)).first() is None:
                raise NotFound(f"session {session_id} does not exist")
        return int(last or 0)
