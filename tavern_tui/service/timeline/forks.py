"""Provides what a fork or a branch playthrough takes from where it starts: `carry_replacements`
(the edits and deletes the head shows, copied into a new fork), `inherited_meta` and `branch_title`
(a branch playthrough's meta and title) and `inherit` (the preset, strategy, world books and group
it keeps). `TimelineService.fork` and `TimelineService.branch_playthrough` use them.

Rules: seed 000 §1.1 and DESIGN.md "The session log": a fork is a new session; nothing of its
parent is rewritten, edits are carried as new `surface/replaced` events. Seed 000 §3
`agent/created`: a child inherits its parent's strategy selection; each inherited thing is a copy.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from tavern_tui.engine.events import NewEvent
from tavern_tui.engine.log import EDIT_SOURCE, replacement_event
from tavern_tui.engine.timeline import Ref, Timeline
from tavern_tui.service.playthroughs import MAX_TITLE

if TYPE_CHECKING:
    from tavern_tui.store.eventlog import EventLog


def inherited_meta(parent_meta: str, parent_id: int, ref: Ref) -> dict[str, Any]:
    """A branch's meta: a copy of its parent's (the strategy snapshot, the persona pin, the
    call parameters left out, an imported chat's header and chat_metadata; not the imported
    file's name and hash) with where it branched from. An unreadable parent meta gives just the branch point."""
    try:
        meta = json.loads(parent_meta or "{}")
    except ValueError:
        meta = {}
    meta = dict(meta) if isinstance(meta, dict) else {}
    # The imported file's name and hash stay the parent's alone: a re-import finds the parent.
    meta = {k: v for k, v in meta.items() if k not in ("source", "sha256")}
    meta.update({"branch_of": parent_id, "from": list(ref)})
    return meta


def branch_title(parent_title: str, mark: str = " (branch)") -> str:
    """A branch playthrough's title: its parent's, marked once, cut with "…" to fit `MAX_TITLE`."""
    base = parent_title.removesuffix(mark)
    return (base if len(base) + len(mark) <= MAX_TITLE else base[:MAX_TITLE - len(mark) - 1] + "…") + mark


def carry_replacements(log: EventLog, session_id: int, at: Ref, timeline: Timeline) -> None:
    """Copy into a new fork the edits and deletes the head shows that were made after the
    fork point but concern messages up to `at` (an edit of an edit follows its first edit)."""
    bounds = dict(log.ancestry(session_id))
    candidates = {}
    for replacement in timeline.replacements.values():
        rsid, rseq = replacement.ref
        upto = bounds.get(rsid, -1) if rsid in bounds else -1
        if upto is None or (upto is not None and upto >= rseq):
            continue  # already on the fork's surface
        candidates[replacement.ref] = replacement
    if not candidates:
        return
    rows = {r.ref: r for r in log.variant_rows({sid: None for sid in {ref[0] for ref in candidates}})}
    kept = set(timeline.path_to(at))
    moved: dict[Ref, Ref] = {}  # a carried edit's ref → its copy's ref in the (empty) fork
    events: list[NewEvent] = []
    for ref in sorted(candidates, key=lambda r: rows[r].order if r in rows else 0):
        replacement = candidates[ref]
        if not set(replacement.targets) <= kept:
            continue
        kept.add(ref)  # a later edit of this edit targets its ref…
        moved[ref] = (session_id, len(events) + 1)  # …which in the fork is the copy's
        row = rows.get(ref)
        targets = [moved.get(target, target) for target in replacement.targets]
        events.append(replacement_event(targets, replacement.message, row.origin if row else None,
                                        row.source if row and row.source else EDIT_SOURCE))
    if events:
        log.append(session_id, events)


def inherit(uow: Any, parent: Any, child_id: int) -> None:
    """Copy onto a new branch playthrough what its parent plays with: the preset, the
    applied strategy's name (its exact snapshot is in the meta `inherited_meta` copied), the
    chat-bound world books, in their order, and the group it plays (a group chat's branch is
    the same group's). Runs in the caller's transaction."""
    group_id = uow.groups.group_of(parent.id)
    if group_id is not None:
        uow.groups.attach(child_id, group_id)
    uow.playthroughs.set_preset(child_id, parent.preset_id)
    uow.playthroughs.set_strategy(child_id, parent.strategy)
    for book_id in uow.bindings.books_for("playthrough", parent.id):
        uow.bindings.bind(book_id, "playthrough", child_id)
