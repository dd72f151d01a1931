"""Provides `surface_events` (a session's surface with the MVU commits it inherits across a fork) and
`MvuReading`: the record at a playthrough's head, the snapshot and stored-back texts a request is built
from (`MvuBound`), all computed, never committed.

Rules: `mvu.records` (how records live in the log) and the package's docstring (`service.mvu`): the head
record is the newest commit on the surface, else the initial record computed for display; previews read it,
never commit it; a fork at a reply inherits the commit made just after that reply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tavern_tui.assembly.memo import per_list
from tavern_tui.engine.events import Event, EventKind
from tavern_tui.engine.log import surface_of
from tavern_tui.engine.state import STATE_KIND
from tavern_tui.mvu import MVU_PART, mvu_head, snapshot_variables, update_variables
from tavern_tui.mvu.records import counted_messages, shown_commits
from tavern_tui.mvu.update import message_after_update
from tavern_tui.service.mvu.material import MvuMaterial, MvuPart, expander, has_material
from tavern_tui.service.mvu.views import MvuBound, MvuView, stat_hash
from tavern_tui.store.eventlog import EventLog


def surface_events(log: EventLog, session_id: int) -> list[Event]:
    """The session's surface, plus the MVU commits its ancestors made just after the fork point for a message
    on it (a reply's record is committed after the reply, so a fork at that reply inherits it), each placed
    after that ancestor's last event on the surface."""
    events = log.surface_events(session_id)
    cut = {sid: upto for sid, upto in log.ancestry(session_id) if upto is not None}
    if not cut:
        return events
    messages = {e.ref for e in events if e.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.USER_MESSAGE)}
    inherited: dict[int, list[Event]] = {}
    for event in log.events_of_kind([STATE_KIND], list(cut)):
        part = event.body.get(MVU_PART)
        if event.seq > (cut[event.session_id] or 0) and isinstance(part, dict) \
                and tuple(part.get("message") or ()) in messages:
            inherited.setdefault(event.session_id, []).append(event)
    if not inherited:
        return events
    last = {e.session_id: i for i, e in enumerate(events)}
    out: list[Event] = []
    for i, event in enumerate(events):
        out.append(event)
        if last.get(event.session_id) == i:
            out += inherited.pop(event.session_id, [])
    return out


class MvuReading(MvuPart):
    """Reads MVU records (`MvuService`'s reading half)."""

    def __init__(self, material: MvuMaterial, surface: Callable[[int], list[Event]]) -> None:
        super().__init__(material, surface)
        # playthrough → (log version, head): previews rebuild the prompt on every keystroke, and the log's
        # version changes with every append (a binding changed meanwhile shows at the next event)
        self._heads: dict[int, tuple[Any, MvuView]] = {}
        self._texts: dict[int, tuple[Any, dict[tuple[int, int], str]]] = {}

    def head(self, playthrough_id: int, view: Any = None) -> MvuView:
        """The record at the head: the committed one, else the initial record computed now (not committed),
        else None (no MVU material). `view`: the playthrough's `PlaythroughView` when the caller has just
        read it (a step's assembly), saving the read.

        Raises:
            NotFound: no such playthrough.
        """
        view = view if view is not None else self.playthroughs.playthrough(playthrough_id)
        key = (self.ctx.store.events.version(), view.session_id)  # a swipe to a known sibling moves only the head
        cached = self._heads.get(playthrough_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        head = self._head(playthrough_id, view)
        self._heads[playthrough_id] = (key, head)
        return head

    def _head(self, playthrough_id: int, view: Any) -> MvuView:
        material = None
        if not self.has_commits(view.session_id):
            # No record yet: only the initial one could be shown, and only with MVU material.
            material = self.material.material(playthrough_id)
            if not has_material(material[1], material[3]):
                return MvuView(playthrough_id, None)
        events = self.surface_events(view.session_id)
        snapshot = getattr(self.ctx.store.events, "surface_snapshot", None)
        if snapshot is not None:
            # The inherited commits are no messages: the surface is the log's own, which the step derives
            # too (`assembly.memo.per_list` on the log's shared tuple: derived once for both).
            shared = snapshot(view.session_id)
            surface = per_list(shared, "surface_of", lambda: surface_of(shared))
        else:
            surface = surface_of(events)
        found = mvu_head(events, counted_messages(events, [m.ref for m in surface]))
        if found.record is not None:
            part = found.part or {}
            return MvuView(playthrough_id, found.record, True, found.message, list(part.get("changes") or []),
                           list(part.get("refused") or []), found.commit)
        planned = self.material.planned_init(playthrough_id, surface, material)
        if planned is None:
            return MvuView(playthrough_id, None)
        message, result = planned
        return MvuView(playthrough_id, result.record, False, message,
                       [c.to_json() for c in result.greeting.changes] if result.greeting else [],
                       [r.to_json() for r in result.greeting.refused] if result.greeting else [])

    def snapshot(self, playthrough_id: int, view: Any = None) -> dict[str, Any]:
        """The bound snapshot a step of the playthrough reads (`mvu.snapshot_variables` of the head record);
        `view` as for `head`."""
        return snapshot_variables(self.head(playthrough_id, view).record)

    def display_texts(self, playthrough_id: int) -> dict[tuple[int, int], str]:
        """`message_texts` of the playthrough's head session; {} without MVU state (no read of the log then).
        Only commits change how a message shows, so a chat without one needs neither its surface nor
        its books (finding an uncommitted initial record parses the bound books)."""
        session_id = self.playthroughs.playthrough(playthrough_id).session_id
        if not self.has_commits(session_id) or self.head(playthrough_id).record is None:
            return {}
        return self.message_texts(session_id)

    def message_texts(self, session_id: int) -> dict[tuple[int, int], str]:
        """`MvuBound.texts` for a session's surface: each assistant message a reply commit names (kept per log
        version: a transcript asks on every redraw)."""
        key = (self.ctx.store.events.version(), session_id)
        cached = self._texts.get(session_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        texts = self._message_texts(session_id)
        self._texts[session_id] = (key, texts)
        return texts

    def _message_texts(self, session_id: int) -> dict[tuple[int, int], str]:
        events = self.surface_events(session_id)
        surface = surface_of(events)
        commits = shown_commits(events, [m.ref for m in surface])
        out: dict[tuple[int, int], str] = {}
        for message in surface:
            head = commits.get(message.ref)
            if message.role == "assistant" and head is not None and not (head.part or {}).get("init"):
                text = message_after_update(message.content)
                if text != message.content:
                    out[message.ref] = text
        return out

    def bound(self, playthrough_id: int, pending: Sequence[str] = ()) -> MvuBound:
        """The state a request is built from: the head record, then the commands of `pending` (the person's
        messages this step sends, in order) applied to it, as MVU applies a sent message's commands before the
        generation (`MESSAGE_SENT` → `handleVariablesInMessage`, user messages included). Computed, never
        committed here (the reply's commit commits them first)."""
        view = self.playthroughs.playthrough(playthrough_id)
        head = self.head(playthrough_id, view)
        if head.record is None:
            return MvuBound()
        record = head.record
        applied: list[dict[str, Any]] = []
        if any(pending):
            macros = self.material.material(playthrough_id)[4]
            for index, text in enumerate(pending):
                outcome = update_variables(text, record, substitute=expander(macros))
                if outcome.commands:
                    record = outcome.record
                    applied.append({"input": index, "changes": [c.to_json() for c in outcome.changes],
                                    "refused": [r.to_json() for r in outcome.refused]})
        facts = {"commit": list(head.commit) if head.commit else None,
                 "message": list(head.message) if head.message else None, "committed": head.committed,
                 "stat_data_sha256": stat_hash(record), "pending": applied}
        return MvuBound(snapshot_variables(record), self.message_texts(view.session_id), facts)
