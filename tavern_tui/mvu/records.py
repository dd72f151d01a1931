"""MVU records in the session log: the `mvu` part of a `state/commit` event, and the fold that finds the record
each message holds.

Rules: seed 000 §8 and issue 18 item 1; MVU keeps a record per message and swipe
(`chat[i].variables[swipe_id]`, src/util.ts:12-32) and reads the latest message before a point whose shown
swipe holds one (`getLastValidVariable`). Here a swipe is a fork, so the surface of a session *is* one choice of
swipes: the record of a message is the commit naming it on that surface; the record a step starts from is the
one of the latest message on the surface that has one. Part body: `{"message": [session, seq], "base": [session,
seq] | null, "record": {stat_data, schema, display_data, delta_data, initialized_lorebooks}, "record_text": the
same record as JSON text in its own key order (bodies are stored with sorted keys), "init"?: true,
"changes": […], "refused": […]}`; `base` names the commit it was computed from (compare-and-set: a commit whose
base is not the record then in force is refused by the fold, as the writer refuses it on a stale read). A message may
hold a chain of commits (its reply's, then each state-tool update made while it asked for tools: ours, issue 19):
each later one names the one before as its base, and the newest is the message's record.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavern_tui.engine.events import Event, EventKind
from tavern_tui.engine.log import EDIT_SOURCE

__all__ = ["MVU_PART", "MvuHead", "commit_part", "counted_messages", "mvu_commits", "mvu_head", "shown_commits",
           "snapshot_variables"]

MVU_PART = "mvu"
_STATE_KIND = "state/commit"
_MESSAGES = (EventKind.ASSISTANT_MESSAGE, EventKind.USER_MESSAGE, EventKind.ASSISTANT_ATTEMPT)


@dataclass(frozen=True, slots=True)
class MvuHead:
    """The record in force at a point of a surface.

    Attributes:
        record: the record (JSON dict), None when the surface has none (no MVU material, or not initialised).
        commit: ref of the commit holding it; message: ref of the message it belongs to.
        part: the commit's whole `mvu` part (changes and refusals of the reply that made it).
    """

    record: dict[str, Any] | None
    commit: tuple[int, int] | None = None
    message: tuple[int, int] | None = None
    part: Mapping[str, Any] | None = None


def commit_part(message: tuple[int, int], base: tuple[int, int] | None, record: Mapping[str, Any], *,
                init: bool = False, changes: list[dict[str, Any]] | None = None,
                refused: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The `mvu` part of a commit (module docstring)."""
    part: dict[str, Any] = {"message": list(message), "base": list(base) if base else None, "record": dict(record),
                            # the log stores bodies with sorted keys; JavaScript's key order is part of MVU's output
                            # (JSON.stringify, YAML), so the record is also kept as text in its own order
                            "record_text": json.dumps(record, ensure_ascii=False, separators=(",", ":"))}
    if init:
        part["init"] = True
    part["changes"] = list(changes or [])
    part["refused"] = list(refused or [])
    return part


def _edits(events: Iterable[Event]) -> dict[tuple[int, int], list[tuple[int, int]]]:
    """Each edit on the surface (the person's surface replacement with a message) → the refs it rewrote."""
    return {event.ref: [(int(t[0]), int(t[1])) for t in event.body.get("targets") or ()] for event in events
            if event.kind == EventKind.SURFACE_REPLACED and event.source == EDIT_SOURCE
            and isinstance(event.body.get("message"), Mapping)}


def _rewritten(edits: Mapping[tuple[int, int], list[tuple[int, int]]], ref: tuple[int, int]) -> list[tuple[int, int]]:
    """The messages `ref` stands for through edits (itself first, then what each edit rewrote)."""
    found, stack = [ref], [ref]
    while stack:
        for target in edits.get(stack.pop(), ()):
            if target not in found:
                found.append(target)
                stack.append(target)
    return found


def counted_messages(events: Sequence[Event], shown: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """The message refs whose records count on a surface: the shown messages (`shown`), and for a
    message shown edited (the person's surface replacement with a message, source "edit") the message
    it rewrote, through any chain of edits. MVU keeps a message's variables through an edit of its
    text: it re-reads only messages sent or received (MagVarUpdate `initResponse`: MESSAGE_SENT,
    MESSAGE_RECEIVED), so an edit neither rolls the state back nor applies the edited commands.
    A deleted message's record stops counting (its variables go with it)."""
    return _counted(_edits(events), shown)


def _counted(edits: Mapping[tuple[int, int], list[tuple[int, int]]],
             shown: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """`counted_messages` with the surface's edits already read."""
    counted: set[tuple[int, int]] = set()
    for ref in shown:
        counted.update(_rewritten(edits, ref) if edits else (ref,))
    return counted


def shown_commits(events: Sequence[Event], shown: Sequence[tuple[int, int]]) -> dict[tuple[int, int], MvuHead]:
    """Every shown message holding a record, by its shown ref: its own, or for a message shown edited
    the record of the message it rewrote (`counted_messages`)."""
    edits = _edits(events)  # read once for both the counted set and each shown message's chain
    commits = mvu_commits(events, _counted(edits, shown))
    out: dict[tuple[int, int], MvuHead] = {}
    for ref in shown:
        held = next((commits[m] for m in (_rewritten(edits, ref) if edits else (ref,)) if m in commits), None)
        if held is not None:
            out[ref] = held
    return out


def _record_of(part: Mapping[str, Any]) -> dict[str, Any]:
    """A commit's record in its own key order (`record_text`), else as stored."""
    text = part.get("record_text")
    if isinstance(text, str):
        try:
            loaded = json.loads(text)
        except ValueError:
            loaded = None
        if isinstance(loaded, dict):
            return loaded
    return dict(part["record"])


def _fold(events: Iterable[Event], visible: set[tuple[int, int]] | None
          ) -> tuple[dict[tuple[int, int], int], dict[tuple[int, int], tuple[Event, Mapping[str, Any]]]]:
    """(message ref → position on the surface, message ref → its accepted commit and part)."""
    order: dict[tuple[int, int], int] = {}
    by_message: dict[tuple[int, int], tuple[Event, Mapping[str, Any]]] = {}
    accepted: list[tuple[int, tuple[int, int]]] = []  # (message order, message ref), as commits were accepted

    def in_force(limit: int) -> tuple[int, int] | None:
        """The commit of the latest message before `limit` holding one (the base a commit must name)."""
        best: tuple[int, tuple[int, int]] | None = None
        for position, message in reversed(accepted):
            if position < limit and (visible is None or message in visible) and (best is None or position > best[0]):
                best = (position, message)
                if position == limit - 1:
                    break
        return by_message[best[1]][0].ref if best else None

    for index, event in enumerate(events):
        if event.kind in _MESSAGES:
            order[event.ref] = index
            continue
        if event.kind != _STATE_KIND:
            continue
        part = event.body.get(MVU_PART)
        if not isinstance(part, Mapping) or not isinstance(part.get("record"), Mapping):
            continue
        message = tuple(part.get("message") or ())
        if len(message) != 2 or message not in order:
            continue
        base = tuple(part["base"]) if part.get("base") else None
        own = by_message.get(message)  # type: ignore[call-overload]
        # A later commit on the same message (a state tool's update, after the reply's own) names
        # that message's commit as its base; any other names the record in force before the message.
        if not part.get("init") and base != in_force(order[message]) \
                and (own is None or base != own[0].ref):  # type: ignore[index]
            continue  # computed from a record no longer in force: refused (compare-and-set)
        by_message[message] = (event, part)  # type: ignore[index]
        accepted.append((order[message], message))  # type: ignore[arg-type,index]
    return order, by_message


def mvu_head(events: Iterable[Event], visible: set[tuple[int, int]] | None = None,
             before: tuple[int, int] | None = None) -> MvuHead:
    """The record of the latest message (of `visible`, when given: the surface's shown messages) holding one,
    among the `events` of a surface in order; `before`: only messages before that message ref count."""
    order, by_message = _fold(events, visible)
    candidates = [m for m in by_message if (visible is None or m in visible)
                  and (before is None or before not in order or order[m] < order[before])]
    if not candidates:
        return MvuHead(None)
    message = max(candidates, key=lambda m: order[m])
    event, part = by_message[message]
    return MvuHead(_record_of(part), event.ref, message, part)  # type: ignore[arg-type]


def mvu_commits(events: Iterable[Event], visible: set[tuple[int, int]] | None = None
                ) -> dict[tuple[int, int], MvuHead]:
    """Every message of the surface holding a record (accepted commits only), by message ref."""
    _order, by_message = _fold(events, visible)
    return {message: MvuHead(_record_of(part), event.ref, message, part)  # type: ignore[arg-type]
            for message, (event, part) in by_message.items() if visible is None or message in visible}


def snapshot_variables(record: Mapping[str, Any] | None) -> dict[str, Any]:
    """What templates and `getvar`-style reads see of a record: the message variables MVU keeps,
    `{"stat_data", "schema", "display_data", "delta_data", "initialized_lorebooks"}` (a deep copy; {} for no
    record). Pure: the scripts/templates code binds it next to the chat and global variables."""
    return copy.deepcopy(dict(record)) if record else {}
