"""Provides `TimelineReads`: the reads the timeline and traces make of `EventLog` across sessions:
a playthrough's sessions and fork pointers, the message variants of a tree, events by ref or by
kind. Bounded reads: each is one query (or a few, in fixed-size chunks), whatever the chat's length.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import and_, literal, or_, select

from tavern_tui.engine.events import MESSAGE_KINDS, Event, EventKind, Origin
from tavern_tui.engine.timeline import SessionLink, VariantRow
from tavern_tui.store.event_reads import EVENTS, SESSIONS, SurfaceReads, row_to_event

__all__ = ["TimelineReads"]


class TimelineReads(SurfaceReads):
    """The timeline's reads of `EventLog`."""

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

    def bodies(self, refs: Sequence[tuple[int, int]]) -> dict[tuple[int, int], dict]:
        """Parsed bodies of the events at these refs (missing refs are left out)."""
        return {ref: event.body for ref, event in self.events_at(refs).items()}
