"""Provides `EventLog`: the engine's `SessionLog` on SQLAlchemy Core (the append hot path)."""

from __future__ import annotations

import functools
import json
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import Engine, and_, bindparam, func, insert, literal, or_, select, union_all
from sqlalchemy.exc import IntegrityError, OperationalError

from tavern_tui.engine.events import (
    MESSAGE_KINDS,
    Event,
    EventKind,
    NewEvent,
    Origin,
    body_hash,
    canonical_json,
    parse_origin,
)
from tavern_tui.engine.log import COMPOSER_SOURCE, SUMMARY_SOURCE
from tavern_tui.engine.timeline import SessionLink, VariantRow
from tavern_tui.errors import NotFound, StoreError
from tavern_tui.store.db import busy_error, is_busy
from tavern_tui.store.models import EventRow, SessionRow, as_utc

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
# Other databases have no BEGIN IMMEDIATE: lock the session's row first, so appends to one
# session queue up and `max(seq) + 1` cannot race. PostgreSQL: FOR NO KEY UPDATE, which still
# lets other transactions create forks that point at the session.
_LOCK_SESSION = _SESSION_EXISTS.with_for_update(key_share=True)
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


_NO_BOUND = 2**31 - 1
"""An upper seq bound no session reaches (for the unbounded last link of a chain): the largest
INTEGER, since PostgreSQL binds it as one (`:u::INTEGER`) and refuses anything larger."""
_TAIL_KINDS = [str(k) for k in (*MESSAGE_KINDS, EventKind.SURFACE_REPLACED)]


@functools.lru_cache(maxsize=32)
def _tail_statement(links: int):  # type: ignore[no-untyped-def]
    """UNION ALL of one backward index scan per chain link: session s_i through seq u_i, newest
    `lim` message/replacement events, tagged with the link's index."""
    parts = []
    for index in range(links):
        query = (select(EVENTS, literal(index).label("chain_index"))
                 .where(EVENTS.c.session_id == bindparam(f"s{index}"), EVENTS.c.seq <= bindparam(f"u{index}"),
                        EVENTS.c.kind.in_(_TAIL_KINDS))
                 .order_by(EVENTS.c.seq.desc()).limit(bindparam("lim")))
        parts.append(query.subquery().select())
    return union_all(*parts) if links > 1 else parts[0]


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
        created_at=as_utc(row.created_at),
        body=json.loads(row.body),
    )


class EventLog:
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
                if conn.execute(_SESSION_EXISTS, {"sid": session_id}).first() is None:
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
        """Events visible from `session_id`, across its fork ancestry, in one query.

        A whole surface (`through_seq` None) is kept with the log's `version` it was read at
        and served again (as a new list) while the version is unchanged: a step's preview, its
        variables and its inbox read the same 5,000-message surface in turn, and each read
        decodes every body (the `prompt_build` benchmark: two extra reads cost ~200 ms). The
        version is read first, so an append racing the read only makes the entry older."""
        if through_seq is None:
            return list(self.surface_snapshot(session_id))
        return self._read_surface(session_id, through_seq)

    def surface_snapshot(self, session_id: int) -> tuple[Event, ...]:
        """`surface_events(session_id)` as the cached tuple itself: the same object while the log's
        version is unchanged, so readers in different services can share what they derive from it
        (`assembly.memo.per_list`: the step's surface and MVU's head derive the same messages)."""
        version = self.version()
        cached = self._surfaces.get(session_id)
        if cached is not None and cached[0] == version:
            return cached[1]
        events = tuple(self._read_surface(session_id, None))
        if len(self._surfaces) >= 8:
            self._surfaces.clear()
        self._surfaces[session_id] = (version, events)
        return events

    def _read_surface(self, session_id: int, through_seq: int | None) -> list[Event]:
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

    def own_events(self, session_id: int, *, kinds: Sequence[str] | None = None, after: int = 0) -> list[Event]:
        """The session's own events (no ancestry) with seq > `after`, optionally only some kinds, by seq."""
        query = select(EVENTS).where(EVENTS.c.session_id == session_id)
        if after:
            query = query.where(EVENTS.c.seq > after)
        if kinds:
            query = query.where(EVENTS.c.kind.in_(list(kinds)))
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(EVENTS.c.seq)).all()
        return [row_to_event(row) for row in rows]

    def surface_events_of(self, session_id: int, kinds: Sequence[str]) -> list[Event]:
        """`surface_events` of only these kinds, in surface order: one query on the
        (session_id, kind) index, so a kind that is rare costs little however long the chat."""
        chain = self._chain(session_id, None)
        order = {sid: index for index, (sid, _) in enumerate(chain)}
        clauses = [and_(EVENTS.c.session_id == sid, EVENTS.c.seq <= upto) if upto is not None
                   else EVENTS.c.session_id == sid for sid, upto in chain]
        with self._engine.connect() as conn:
            rows = conn.execute(select(EVENTS).where(or_(*clauses), EVENTS.c.kind.in_([str(k) for k in kinds]))).all()
        events = [row_to_event(row) for row in rows]
        events.sort(key=lambda e: (order[e.session_id], e.seq))
        return events

    def newest_own_events(self, session_id: int, limit: int, before: int | None = None) -> list[Event]:
        """The session's own newest `limit` events (no ancestry) with seq < `before` (None: all),
        newest first: one backward scan of the (session_id, seq) index that stops after `limit`
        rows, so the cost does not grow with the session's length."""
        query = select(EVENTS).where(EVENTS.c.session_id == session_id)
        if before is not None:
            query = query.where(EVENTS.c.seq < before)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(EVENTS.c.seq.desc()).limit(limit)).all()
        return [row_to_event(row) for row in rows]

    def all_session_ids(self) -> list[int]:
        """Every session id, ascending."""
        with self._engine.connect() as conn:
            return [int(i) for i in conn.execute(select(SESSIONS.c.id).order_by(SESSIONS.c.id)).scalars()]

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

    # -- timeline and bounded reads ---------------------------------------------------------

    def ancestry(self, session_id: int) -> list[tuple[int, int | None]]:
        """[(session, upto)] from the root down to `session_id` (upto None = all its events).

        Raises:
            NotFound: no such session.
        """
        return self._chain(session_id, None)

    def playthrough_sessions(self, playthrough_id: int, root_session_id: int) -> list[SessionLink]:
        """The playthrough's sessions plus the ancestors of its root (a branched playthrough
        starts inside another tree), each with its fork pointer."""
        with self._engine.connect() as conn:
            rows = conn.execute(select(SESSIONS.c.id, SESSIONS.c.parent_id, SESSIONS.c.fork_seq,
                                       SESSIONS.c.playthrough_id)
                                .where(SESSIONS.c.playthrough_id == playthrough_id)).all()
        links = {r.id: SessionLink(r.id, r.parent_id, r.fork_seq, r.playthrough_id) for r in rows}
        for sid, _ in self._chain(root_session_id, None):
            if sid not in links:
                parent, fork_seq = self._lineage[sid]
                links[sid] = SessionLink(sid, parent, fork_seq, None)
        return sorted(links.values(), key=lambda link: link.id)

    def variant_rows(self, bounds: dict[int, int | None], *, bodies: bool = False) -> list[VariantRow]:
        """Message and `surface/replaced` events of sessions (each through its bound, None =
        all), for the timeline; bodies only when asked (the tree pane's previews)."""
        if not bounds:
            return []
        kinds = [str(k) for k in (*MESSAGE_KINDS, EventKind.SURFACE_REPLACED)]
        columns = [EVENTS.c.id, EVENTS.c.session_id, EVENTS.c.seq, EVENTS.c.kind, EVENTS.c.role, EVENTS.c.origin,
                   EVENTS.c.source, EVENTS.c.body if bodies else literal(None)]
        unbounded = [sid for sid, upto in bounds.items() if upto is None]
        clauses = [EVENTS.c.session_id.in_(unbounded)] if unbounded else []
        clauses += [and_(EVENTS.c.session_id == sid, EVENTS.c.seq <= upto) for sid, upto in bounds.items()
                    if upto is not None]
        with self._engine.connect() as conn:
            rows = conn.execute(select(*columns).where(or_(*clauses), EVENTS.c.kind.in_(kinds))).all()
        origins = {None: None, **{o.value: o for o in Origin}}
        result = [VariantRow(order, sid, seq, kind, role, origins[origin], source, json.loads(body) if bodies else None)
                  for order, sid, seq, kind, role, origin, source, body in rows]
        if not bodies:
            # Replacement bodies hold the targets the overlay needs: read just those.
            wanted = [(r.session_id, r.seq) for r in result if r.kind == EventKind.SURFACE_REPLACED]
            if wanted:
                texts = self.bodies(wanted)
                result = [VariantRow(r.order, r.session_id, r.seq, r.kind, r.role, r.origin, r.source,
                                     texts[r.ref]) if r.ref in texts else r for r in result]
        return result

    def playthrough_of(self, session_id: int) -> int | None:
        """The playthrough whose timeline a session belongs to (None: none, or no such session)."""
        with self._engine.connect() as conn:
            return conn.execute(select(SESSIONS.c.playthrough_id).where(SESSIONS.c.id == session_id)).scalar()

    def events_at(self, refs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Event]:
        """The stored events at these refs (missing ones left out), as stored now."""
        if not refs:
            return {}
        found: dict[tuple[int, int], Event] = {}
        with self._engine.connect() as conn:
            for start in range(0, len(refs), 400):  # bounded statements for long traces
                chunk = refs[start:start + 400]
                clauses = [and_(EVENTS.c.session_id == sid, EVENTS.c.seq == seq) for sid, seq in chunk]
                for row in conn.execute(select(EVENTS).where(or_(*clauses))).all():
                    found[(row.session_id, row.seq)] = row_to_event(row)
        return found

    def events_of_kind(self, kinds: Sequence[str], session_ids: Sequence[int] | None = None) -> list[Event]:
        """Events of some kinds (in some sessions, or everywhere), by session then seq."""
        query = select(EVENTS).where(EVENTS.c.kind.in_(list(kinds)))
        if session_ids is not None:
            query = query.where(EVENTS.c.session_id.in_(list(session_ids)))
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(EVENTS.c.session_id, EVENTS.c.seq)).all()
        return [row_to_event(row) for row in rows]

    def kind_refs(self, kinds: Sequence[str]) -> list[tuple[int, int, str]]:
        """(session, seq, kind) of every event of some kinds, by session then seq, without reading bodies."""
        query = select(EVENTS.c.session_id, EVENTS.c.seq, EVENTS.c.kind).where(EVENTS.c.kind.in_(list(kinds)))
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(EVENTS.c.session_id, EVENTS.c.seq)).all()
        return [(int(r.session_id), int(r.seq), str(r.kind)) for r in rows]

    def version(self) -> tuple[int, int]:
        """(newest event id, newest session id): changes whenever anything is appended or forked
        anywhere, so a cached timeline keyed by it is never stale. Inside `pinned_version` on
        this thread: the version read when it began (no query)."""
        pinned = getattr(self._pin, "version", None)
        if pinned is not None:
            return pinned
        return self._read_version()

    @contextmanager
    def pinned_version(self) -> Iterator[tuple[int, int]]:
        """Read `version` once and answer it on this thread until the block ends (nested blocks
        share the outer one's), or until this thread appends or forks.

        For a read-only build (a preview, the gauge): its dozen cache checks (surface,
        variables, counts, titles, MVU head, timeline) each cost a query otherwise (~0.7 ms
        each on a loaded box; `benchmarks/prompt_build`). The build then reads the log as of
        one version; an append by another process meanwhile shows at the next build, as it
        would had it landed a moment later. Yields the pinned version."""
        if getattr(self._pin, "version", None) is not None:
            yield self._pin.version
            return
        self._pin.version = self._read_version()
        try:
            yield self._pin.version
        finally:
            self._pin.version = None

    def _read_version(self) -> tuple[int, int]:
        with self._engine.connect() as conn:
            row = conn.execute(select(select(func.max(EVENTS.c.id)).scalar_subquery(),
                                      select(func.max(SESSIONS.c.id)).scalar_subquery())).one()
        return (int(row[0] or 0), int(row[1] or 0))

    def bodies(self, refs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], dict]:
        """Parsed bodies of the events at these refs (missing refs are left out)."""
        return {ref: event.body for ref, event in self.events_at(refs).items()}

    def tail_events(self, session_id: int, limit: int, through_seq: int | None = None) -> tuple[list[Event], bool]:
        """The newest `limit` message and `surface/replaced` events of a session's surface (across
        its forks), oldest first, in one bounded query: per ancestor, an index scan from its fork
        point backwards that stops after `limit` rows. The first system section of a step is
        among them when in range (callers that show the chat drop it).

        Returns:
            (events, complete): complete is True when nothing older exists.
        """
        chain = self._chain(session_id, through_seq)
        # Bounds as parameters: one statement per chain length, built once (building it costs
        # more than running it).
        params: dict[str, object] = {"lim": limit + 1}
        for index, (sid, upto) in enumerate(chain):
            params[f"s{index}"] = sid
            params[f"u{index}"] = upto if upto is not None else _NO_BOUND
        with self._engine.connect() as conn:
            rows = conn.execute(_tail_statement(len(chain)), params).all()
        rows.sort(key=lambda r: (r.chain_index, r.seq))
        complete = len(rows) <= limit
        return [row_to_event(row) for row in rows[-limit:]], complete

    def count_messages(self, session_id: int) -> int:
        """How many chat messages (user, assistant, attempts, shown system lines) a session's
        surface holds across its forks, counted on the index: a summary counts once for what it
        replaced, a deleted message not at all."""
        chain = self._chain(session_id, None)
        kinds = [str(EventKind.USER_MESSAGE), str(EventKind.ASSISTANT_MESSAGE), str(EventKind.ASSISTANT_ATTEMPT)]
        clauses = [and_(EVENTS.c.session_id == sid, EVENTS.c.seq <= upto) if upto is not None
                   else EVENTS.c.session_id == sid for sid, upto in chain]
        # System lines shown in the chat (an imported `is_system`), not the per-step system section.
        shown_system = and_(EVENTS.c.kind == str(EventKind.SYSTEM_MESSAGE), EVENTS.c.source != "system-prompt")
        with self._engine.connect() as conn:
            count = int(conn.execute(select(func.count()).select_from(EVENTS)
                                     .where(or_(*clauses), or_(EVENTS.c.kind.in_(kinds), shown_system))).scalar_one())
            # A summary shows as one message in place of its targets (issue 16): 1 − len(targets) each.
            summaries = conn.execute(select(EVENTS.c.body).where(
                or_(*clauses), EVENTS.c.kind == str(EventKind.SURFACE_REPLACED),
                EVENTS.c.source == SUMMARY_SOURCE)).scalars().all()
            # An impersonated line that went into the composer (one target each) was never shown.
            composed = int(conn.execute(select(func.count()).select_from(EVENTS).where(
                or_(*clauses), EVENTS.c.kind == str(EventKind.SURFACE_REPLACED),
                EVENTS.c.source == COMPOSER_SOURCE)).scalar_one())
            # Edits and deletes: a delete (no replacement message) takes its targets off the surface.
            edits = conn.execute(select(EVENTS.c.body).where(
                or_(*clauses), EVENTS.c.kind == str(EventKind.SURFACE_REPLACED),
                EVENTS.c.source.not_in([SUMMARY_SOURCE, COMPOSER_SOURCE]))).scalars().all()
        for body in summaries:
            targets = json.loads(body).get("targets") or []
            count += 1 - len(targets)
        for body in edits:
            change = json.loads(body)
            if change.get("message") is None:
                count -= len(change.get("targets") or [])
        return count - composed
