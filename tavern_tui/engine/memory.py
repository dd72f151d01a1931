"""Provides `MemoryLog`, an in-memory `SessionLog` for tests and previews (no database)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from tavern_tui.engine.events import Event, NewEvent, body_hash, canonical_json
from tavern_tui.errors import NotFound


class MemoryLog:
    """A `SessionLog` held in dicts; same append and fork semantics as the store."""

    def __init__(self) -> None:
        self._events: dict[int, list[Event]] = {}
        self._parents: dict[int, tuple[int | None, int | None]] = {}

    def create_session(self, parent_id: int | None = None, fork_seq: int | None = None,
                       playthrough_id: int | None = None) -> int:
        """Create a session; a fork when `parent_id` is given (then `fork_seq` is required)."""
        if (parent_id is None) != (fork_seq is None):
            raise ValueError("a fork needs both parent_id and fork_seq")
        if parent_id is not None and parent_id not in self._events:
            raise NotFound(f"session {parent_id} does not exist")
        session_id = len(self._events) + 1
        self._events[session_id] = []
        self._parents[session_id] = (parent_id, fork_seq)
        return session_id

    def append(self, session_id: int, events: Sequence[NewEvent]) -> list[Event]:
        """Append with the next gapless seqs."""
        if session_id not in self._events:
            raise NotFound(f"session {session_id} does not exist")
        own = self._events[session_id]
        stored = []
        for new in events:
            text = canonical_json(new.body)
            event = Event(session_id, len(own) + 1, new.kind, new.role, new.origin, new.source,
                          text, body_hash(text), datetime.now(UTC), json.loads(text))
            own.append(event)
            stored.append(event)
        return stored

    def append_if_unchanged(self, session_id: int, events: Sequence[NewEvent], kind: str,
                            after_seq: int) -> list[Event] | None:
        """Append only when the session holds no own event of `kind` after `after_seq` (else None)."""
        if session_id not in self._events:
            raise NotFound(f"session {session_id} does not exist")
        if any(e.kind == kind and e.seq > after_seq for e in self._events[session_id]):
            return None
        return self.append(session_id, events)

    def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]:
        """Ancestors' events through each fork point, then the session's own."""
        if session_id not in self._events:
            raise NotFound(f"session {session_id} does not exist")
        chain: list[tuple[int, int | None]] = []
        current: int | None = session_id
        limit = through_seq
        while current is not None:
            chain.append((current, limit))
            parent, fork_seq = self._parents[current]
            current, limit = parent, fork_seq
        result: list[Event] = []
        for sid, upto in reversed(chain):
            result.extend(e for e in self._events[sid] if upto is None or e.seq <= upto)
        return result

    def head_seq(self, session_id: int) -> int:
        """The last seq the session holds (0 when empty)."""
        if session_id not in self._events:
            raise NotFound(f"session {session_id} does not exist")
        return len(self._events[session_id])
