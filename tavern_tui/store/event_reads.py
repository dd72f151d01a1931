"""Provides `SurfaceReads`: how `EventLog` reads a session's surface (its events across its fork
ancestry), its own events and counts, and the log's `version` that caches and read-only builds are
keyed by; plus the `events` row to `Event` mapping the log's readers share.

Rules: a fork is one session row pointing at its parent's seq (seed 000 §1.1), so a surface is the
chain of (session, upto) from the root down; sessions never re-parent, so the chain is cached.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from sqlalchemy import Engine, and_, bindparam, func, literal, or_, select, union_all

from tavern_tui.engine.events import MESSAGE_KINDS, Event, EventKind
from tavern_tui.errors import NotFound
from tavern_tui.store.list_reads import (
    COUNTED_KINDS,
    SYSTEM_PROMPT_SOURCE,
    make_event,
    surface_adjustment,
    walk_chain,
)
from tavern_tui.store.models import EventRow, SessionRow

__all__ = ["EVENTS", "SESSIONS", "SESSION_EXISTS", "SurfaceReads", "row_to_event"]

EVENTS = EventRow.__table__
SESSIONS = SessionRow.__table__

SESSION_EXISTS = select(SESSIONS.c.id).where(SESSIONS.c.id == bindparam("sid"))
"""Built once, as the append path's statements are: the session's id, when it exists."""

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
    """Turn an `events` row into an `Event` (`list_reads.make_event`: the body parsed from the stored text)."""
    return make_event(row.session_id, row.seq, row.kind, row.role, row.origin, row.source, row.body,
                      row.body_sha256, row.created_at)


class SurfaceReads:
    """The read side of `EventLog` (which sets these attributes up).

    Attributes:
        _engine: the engine reads go through.
        _lineage: session → (parent, fork seq); sessions never re-parent.
        _surfaces: whole surfaces by session, with the log version they were read at.
        _pin: `pinned_version`: this thread's version while a read-only build runs.
    """

    _engine: Engine
    _lineage: dict[int, tuple[int | None, int | None]]
    _surfaces: dict[int, tuple[tuple[int, int], tuple[Event, ...]]]
    _pin: threading.local

    def _chain(self, session_id: int, through_seq: int | None) -> list[tuple[int, int | None]]:
        """[(session, upto)] from the root down to `session_id` (`list_reads.walk_chain`)."""
        return walk_chain(session_id, through_seq, self._parent_of)

    def _parent_of(self, session_id: int) -> tuple[int | None, int | None]:
        """(parent, fork seq) of a session, read once. Raises NotFound."""
        if session_id not in self._lineage:
            with self._engine.connect() as conn:
                row = conn.execute(
                    select(SESSIONS.c.parent_id, SESSIONS.c.fork_seq).where(SESSIONS.c.id == session_id)
                ).first()
            if row is None:
                raise NotFound(f"session {session_id} does not exist")
            self._lineage[session_id] = (row.parent_id, row.fork_seq)
        return self._lineage[session_id]

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
        (`assembly.memo.per_list`: the step's surface and MVU's head derive the same messages).

        Once the version moved, only the session's own events after its newest one cached are
        read and added: the log is append-only, seqs are gapless and committed in order, and an
        ancestor's later events lie past the fork (never on this surface). A step on a
        5,000-message chat then reads its dozen new events, not the whole surface again, and the
        earlier events stay the same objects (`engine.log.surface_of` goes on from their fold)."""
        version = self.version()
        cached = self._surfaces.get(session_id)
        if cached is not None and cached[0] == version:
            return cached[1]
        if cached is not None:
            newest = next((e.seq for e in reversed(cached[1]) if e.session_id == session_id), 0)
            added = self.own_events(session_id, after=newest)
            events = cached[1] + tuple(added) if added else cached[1]
        else:
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

    def newest_seqs(self, session_ids: Sequence[int], kinds: Sequence[str]) -> dict[int, int]:
        """Each session's last seq of an event of these kinds (sessions with none left out), in one
        grouped read of the (session_id, kind, seq) index: which of many sessions have anything of
        a kind past a mark, without a read each."""
        if not session_ids:
            return {}
        query = (select(EVENTS.c.session_id, func.max(EVENTS.c.seq))
                 .where(EVENTS.c.session_id.in_(list(session_ids)), EVENTS.c.kind.in_(list(kinds)))
                 .group_by(EVENTS.c.session_id))
        with self._engine.connect() as conn:
            return {int(sid): int(seq) for sid, seq in conn.execute(query)}

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
            if last is None and conn.execute(SESSION_EXISTS, {"sid": session_id}).first() is None:
                raise NotFound(f"session {session_id} does not exist")
        return int(last or 0)

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

    def count_messages(self, session_id: int, replaced: Sequence[Event] | None = None) -> int:
        """How many chat messages (user, assistant, attempts, shown system lines) a session's
        surface holds across its forks, counted on the index: a summary counts once for what it
        replaced, a deleted message not at all.

        Args:
            replaced: the session's `surface/replaced` events when the caller has read them
                (`surface_events_of`); read here otherwise.
        """
        chain = self._chain(session_id, None)
        clauses = [and_(EVENTS.c.session_id == sid, EVENTS.c.seq <= upto) if upto is not None
                   else EVENTS.c.session_id == sid for sid, upto in chain]
        # System lines shown in the chat (an imported `is_system`), not the per-step system section.
        shown_system = and_(EVENTS.c.kind == str(EventKind.SYSTEM_MESSAGE), EVENTS.c.source != SYSTEM_PROMPT_SOURCE)
        with self._engine.connect() as conn:
            # Two counts, not one with OR: the message kinds are counted on the (session, kind,
            # seq) index alone; only the few system lines visit their rows for `source`.
            count = int(conn.execute(select(func.count()).select_from(EVENTS)
                                     .where(or_(*clauses), EVENTS.c.kind.in_(COUNTED_KINDS))).scalar_one())
            count += int(conn.execute(select(func.count()).select_from(EVENTS)
                                      .where(or_(*clauses), shown_system)).scalar_one())
        if replaced is None:
            replaced = self.surface_events_of(session_id, [EventKind.SURFACE_REPLACED])
        return count + surface_adjustment(replaced)

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
        self._pin.scope = object()
        try:
            yield self._pin.version
        finally:
            self._pin.version = self._pin.scope = None

    def pin_scope(self) -> object | None:
        """A token for the running `pinned_version` block on this thread (a new one per block), None
        outside one or once this thread appended in it: what a build derives from the log and the
        rows beside it may be kept under this token and reused within the same build only."""
        if getattr(self._pin, "version", None) is None:
            return None
        return getattr(self._pin, "scope", None)

    def _read_version(self) -> tuple[int, int]:
        with self._engine.connect() as conn:
            row = conn.execute(select(select(func.max(EVENTS.c.id)).scalar_subquery(),
                                      select(func.max(SESSIONS.c.id)).scalar_subquery())).one()
        return (int(row[0] or 0), int(row[1] or 0))
