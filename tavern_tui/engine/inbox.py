"""Provides the durable inbox: `inbox/spliced` bodies, `PendingInputProjection` (the queue rebuilt
from them) and the claim a step makes before assembly.

Rules: seed 000 §1 ("insert/edit/cancel and claim record agent/inbox/spliced"; the queue is
rebuilt from those events; the claimed batch is obtained after the claim-delete event and before
system assembly) and §5 (insert, replace, cancel, steer, next-step and queued next-turn are
handled exactly from the splice's `target/start/removedCount/inserted/outcome`; a claim is a
delete splice whose outcome is not canceled). DESIGN.md "The inbox".

One queue per session surface (the session's own inbox events after its ancestors' through the
fork point). Steers (`next-step`) stand before every `next-turn` item, in the order queued: a
step boundary inside a turn claims the steers only, a new turn claims the whole queue.

Every splice is computed on the queue as read and appended with `append_if_unchanged`: when
another writer spliced the queue meanwhile, nothing is written and the splice is recomputed.
So two processes never claim the same item, and positional `start` is always the position in
the queue the splice was computed on.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from tavern_tui.engine.events import Event, EventKind, NewEvent, Origin, parse_origin
from tavern_tui.engine.log import starts_with
from tavern_tui.errors import NotFound, TavernError

NEXT_TURN = "next-turn"
"""Target: waits until the running reply settles; the next step (a new turn) claims it."""
NEXT_STEP = "next-step"
"""Target (a steer): claimed at the next step boundary of the running turn."""
TARGETS = (NEXT_TURN, NEXT_STEP)

QUEUED, CLAIMED, CANCELED, REPLACED, RESTORED, MOVED = ("queued", "claimed", "canceled", "replaced", "restored",
                                                         "moved")
"""Splice outcomes: an insert, a claim (delete, not canceled), a cancel (delete), an edit
(replace one item), an insert that puts back a claim a crash left unadmitted, and a delete of
items carried to the session the playthrough's head moved to (`move_pending`)."""
OUTCOMES = (QUEUED, CLAIMED, CANCELED, REPLACED, RESTORED, MOVED)

CLAIM_KEY = "claim"
"""Body key of an admitted `user/message`: the seq (in its session) of the claim it came from;
the admission resolves that claim."""

MAX_ATTEMPTS = 50
"""Compare-and-append retries before a splice gives up (each retry means another writer spliced)."""


_FOLDED = frozenset({str(EventKind.USER_MESSAGE), str(EventKind.INBOX_SPLICED)})
"""The event kinds `PendingInputProjection.apply` folds in."""


class InboxConflict(TavernError):
    """The queue kept changing under a splice (`MAX_ATTEMPTS` retries) or the item is gone."""


class ClaimPending(TavernError):
    """A claim made moments ago is not admitted yet: another process is opening a step."""


class _Replays:
    """The last surfaces replayed into a queue (of at least `SMALLEST` events), one per session,
    with their queues: a step replays its session's surface at the claim (~2,500 user messages
    on a 5,000-message chat, ~3.5 ms of the event loop), and between two steps only a dozen
    events are new, so the replay goes on from the last one when its events are a prefix of the
    new surface (the same objects: the log never changes an event, `engine.log.starts_with`)."""

    SIZE = 4
    SMALLEST = 200

    def __init__(self) -> None:
        self._last: dict[int, tuple[tuple[Event, ...], PendingInputProjection]] = {}
        self._lock = threading.Lock()  # the loop and worker threads replay at once

    def start(self, events: Sequence[Event], session_id: int) -> tuple[PendingInputProjection, int]:
        """(a queue to go on from, how many of `events` it has replayed)."""
        with self._lock:
            held = self._last.get(session_id)
        if held is not None and len(events) >= self.SMALLEST and starts_with(events, held[0]):
            return held[1].copy(), len(held[0])
        return PendingInputProjection(session_id), 0

    def keep(self, events: Sequence[Event], projection: PendingInputProjection) -> None:
        """Keep the replay of `events` (a copy: callers change their queue)."""
        if len(events) < self.SMALLEST:
            return
        with self._lock:
            self._last.pop(projection.session_id, None)
            self._last[projection.session_id] = (tuple(events), projection.copy())
            while len(self._last) > self.SIZE:
                del self._last[next(iter(self._last))]


@dataclass(frozen=True, slots=True)
class PendingItem:
    """One queued input.

    Attributes:
        id: stable id (kept across edits), 8 hex digits for new items.
        target: `NEXT_TURN` or `NEXT_STEP`.
        content: the text; origin: who wrote it (None = the person, the natural producer).
        ref: (session, seq) of the splice that put this text in the queue (insert or replace).
        queued_at: when it was first queued (an edit keeps it).
    """

    id: str
    target: str
    content: str
    origin: Origin | None
    ref: tuple[int, int]
    queued_at: datetime

    def message(self) -> dict[str, Any]:
        """The splice's `inserted` form: `{"id", "role", "content", "origin"}`."""
        return {"id": self.id, "role": "user", "content": self.content,
                "origin": (self.origin or Origin.CUSTOMER).value}


@dataclass(frozen=True, slots=True)
class OpenClaim:
    """A claim not yet resolved by its admission or a restore: `items` were taken at `ref`."""

    ref: tuple[int, int]
    items: tuple[PendingItem, ...]
    at: datetime


@dataclass(slots=True)
class PendingInputProjection:
    """The pending queue of one session surface, rebuilt from its `inbox/spliced` events.

    Attributes:
        session_id: the session whose own events the compare-and-append guards.
        items: the queue, steers first.
        inbox_seq: seq of the session's own newest inbox event (0: none); splices computed on
            this projection are appended only if it is still the newest.
        open_claims: claims whose batch has neither been admitted nor restored.
    """

    session_id: int
    items: list[PendingItem] = field(default_factory=list)
    inbox_seq: int = 0
    open_claims: list[OpenClaim] = field(default_factory=list)

    @classmethod
    def from_events(cls, events: Iterable[Event], session_id: int) -> PendingInputProjection:
        """Replay a surface's events (in surface order) into the queue.

        Old two-field bodies (`{"op": "insert", "messages"}` / `{"op": "claim", "count"}`,
        written back to back before this format) replay as an insert at the end and a claim of
        the first `count` items, already admitted.

        Raises:
            TavernError: a splice body that is neither format, naming the event and field.
        """
        events = events if isinstance(events, Sequence) else list(events)
        projection, done = _REPLAYS.start(events, session_id)
        apply, folded = projection.apply, _FOLDED
        for event in events[done:] if done else events:
            if event.kind in folded:  # `apply` ignores every other kind: no call for them
                apply(event)
        _REPLAYS.keep(events, projection)
        return projection

    def copy(self) -> PendingInputProjection:
        """A projection of its own with the same queue (its items and claims are immutable)."""
        return PendingInputProjection(self.session_id, list(self.items), self.inbox_seq, list(self.open_claims))

    def apply(self, event: Event) -> None:
        """Fold one event in: a splice changes the queue; an admitted `user/message` carrying
        `claim` resolves that claim. Other events are ignored."""
        if event.kind == EventKind.USER_MESSAGE:
            claim = event.body.get(CLAIM_KEY)
            if isinstance(claim, int):
                self.open_claims = [c for c in self.open_claims if c.ref != (event.session_id, claim)]
            return
        if event.kind != EventKind.INBOX_SPLICED:
            return
        if event.session_id == self.session_id:
            self.inbox_seq = max(self.inbox_seq, event.seq)
        body = event.body
        if "op" in body:
            self._apply_legacy(event)
            return
        start, removed, inserted, outcome, target = _fields(event)
        if start > len(self.items) or start + removed > len(self.items):
            raise TavernError(f"inbox/spliced at {event.session_id}:{event.seq}: start {start} + removedCount "
                              f"{removed} is past the queue's {len(self.items)} items")
        taken = self.items[start:start + removed]
        old = {item.id: item for item in taken}
        new = []
        for index, message in enumerate(inserted):
            ident = str(message.get("id") or f"{event.session_id}.{event.seq}.{index}")
            before = old.get(ident)
            new.append(PendingItem(ident, before.target if before and outcome == REPLACED else target,
                                   str(message.get("content", "")), _origin(message), event.ref,
                                   before.queued_at if before else event.created_at))
        self.items[start:start + removed] = new
        if outcome == CLAIMED:
            self.open_claims.append(OpenClaim(event.ref, tuple(taken), event.created_at))
        elif outcome == RESTORED:
            self.open_claims = []  # a restore puts back every claim left open before it

    def _apply_legacy(self, event: Event) -> None:
        body = event.body
        if body.get("op") == "insert":
            for index, message in enumerate(body.get("messages") or []):
                self.items.append(PendingItem(f"{event.session_id}.{event.seq}.{index}", NEXT_TURN,
                                              str(message.get("content", "")), None, event.ref, event.created_at))
        elif body.get("op") == "claim":
            del self.items[:int(body.get("count", 0))]  # admitted in the same opening (old format)
        else:
            raise TavernError(f"inbox/spliced at {event.session_id}:{event.seq}: unknown op {body.get('op')!r}")

    def find(self, item_id: str) -> int:
        """The queue position of `item_id`.

        Raises:
            NotFound: no pending item has that id (claimed, canceled or never queued).
        """
        for index, item in enumerate(self.items):
            if item.id == item_id:
                return index
        raise NotFound(f"no pending inbox item {item_id!r} (it was claimed or canceled, or never queued)")

    @property
    def steers(self) -> int:
        """How many items at the front are steers (`next-step`)."""
        return sum(1 for item in self.items if item.target == NEXT_STEP)


def _fields(event: Event) -> tuple[int, int, list[dict[str, Any]], str, str]:
    body = event.body
    where = f"inbox/spliced at {event.session_id}:{event.seq}"
    start, removed, inserted = body.get("start"), body.get("removedCount"), body.get("inserted")
    outcome, target = body.get("outcome"), body.get("target")
    if not isinstance(start, int) or start < 0:
        raise TavernError(f"{where}: field 'start' must be a whole number >= 0, not {start!r}")
    if not isinstance(removed, int) or removed < 0:
        raise TavernError(f"{where}: field 'removedCount' must be a whole number >= 0, not {removed!r}")
    if not isinstance(inserted, list) or not all(isinstance(m, dict) for m in inserted):
        raise TavernError(f"{where}: field 'inserted' must be a list of messages")
    if outcome not in OUTCOMES:
        raise TavernError(f"{where}: field 'outcome' must be one of {', '.join(OUTCOMES)}, not {outcome!r}")
    if target not in TARGETS:
        raise TavernError(f"{where}: field 'target' must be one of {', '.join(TARGETS)}, not {target!r}")
    return start, removed, inserted, outcome, target


def _origin(message: dict[str, Any]) -> Origin | None:
    """A queued message's origin; None for the person (the natural producer of role user, seed 001)."""
    origin = parse_origin(message.get("origin"))
    return None if origin == Origin.CUSTOMER else origin


def splice(target: str, start: int, removed: int, inserted: Sequence[dict[str, Any]], outcome: str) -> NewEvent:
    """One `inbox/spliced` event with exactly the seed's fields (role user when it inserts).

    Raises:
        ValueError: a target or outcome outside the closed sets.
    """
    if target not in TARGETS or outcome not in OUTCOMES:
        raise ValueError(f"bad splice target {target!r} or outcome {outcome!r}")
    body = {"target": target, "start": start, "removedCount": removed, "inserted": [dict(m) for m in inserted],
            "outcome": outcome}
    return NewEvent(EventKind.INBOX_SPLICED, "user" if inserted else None, body)


def new_message(text: str, origin: Origin | None = None) -> dict[str, Any]:
    """An `inserted` message for new text, with a fresh id."""
    return {"id": uuid.uuid4().hex[:8], "role": "user", "content": text, "origin": (origin or Origin.CUSTOMER).value}


def insert_splice(queue: PendingInputProjection, messages: Sequence[dict[str, Any]], target: str) -> NewEvent:
    """Queue `messages`: a steer after the last steer, a next-turn item at the end."""
    start = queue.steers if target == NEXT_STEP else len(queue.items)
    return splice(target, start, 0, messages, QUEUED)


def replace_splice(queue: PendingInputProjection, item_id: str, text: str) -> NewEvent:
    """Edit a pending item in place (same id, target and queue time). Raises NotFound."""
    index = queue.find(item_id)
    item = queue.items[index]
    return splice(item.target, index, 1, [{**item.message(), "content": text}], REPLACED)


def cancel_splice(queue: PendingInputProjection, item_id: str) -> NewEvent:
    """Take a pending item out for good; it never reaches the model. Raises NotFound."""
    index = queue.find(item_id)
    return splice(queue.items[index].target, index, 1, [], CANCELED)


def claim_splice(queue: PendingInputProjection, target: str) -> NewEvent | None:
    """The claim of a step: a new turn (`NEXT_TURN`) takes the whole queue, a step boundary
    (`NEXT_STEP`) only the steers at its front. None when there is nothing to take."""
    count = len(queue.items) if target == NEXT_TURN else queue.steers
    return splice(target, 0, count, [], CLAIMED) if count else None


def restore_splices(queue: PendingInputProjection) -> list[NewEvent]:
    """Put back what open claims took (a crash between claim and admission): steers at the
    front, next-turn items before the ones queued since, each group as one splice."""
    taken = [item for claim in queue.open_claims for item in claim.items]
    steers = [i.message() for i in taken if i.target == NEXT_STEP]
    turns = [i.message() for i in taken if i.target == NEXT_TURN]
    events = []
    if steers:
        events.append(splice(NEXT_STEP, 0, 0, steers, RESTORED))
    if turns:
        events.append(splice(NEXT_TURN, queue.steers + len(steers), 0, turns, RESTORED))
    if not events and queue.open_claims:  # an empty claim: resolve it all the same
        events.append(splice(NEXT_TURN, 0, 0, [], RESTORED))
    return events


class GuardedLog(Protocol):
    """What the inbox needs of a `SessionLog`: its surface and a compare-and-append."""

    def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]: ...

    def append_if_unchanged(self, session_id: int, events: Sequence[NewEvent], kind: str,
                            after_seq: int) -> list[Event] | None: ...


def projection(log: GuardedLog, session_id: int) -> PendingInputProjection:
    """The session's pending queue, rebuilt from its surface now (restart-safe).

    Every queue and claim comes from an `inbox/spliced` event, so a log that can read one kind
    (`surface_events_of`, the store) is first asked for those alone: a chat that never queued
    anything (most, and every imported one) is answered without reading its whole surface."""
    reader = getattr(log, "surface_events_of", None)
    if reader is not None and not reader(session_id, [EventKind.INBOX_SPLICED]):
        return PendingInputProjection(session_id)
    return PendingInputProjection.from_events(log.surface_events(session_id), session_id)


def change(log: GuardedLog, session_id: int,
           plan: Callable[[PendingInputProjection], Sequence[NewEvent]]) -> tuple[list[Event], PendingInputProjection]:
    """Compute splices on the queue as read and append them only if no inbox event came in
    between; retry on a conflict.

    Args:
        plan: the events for a queue (may raise, e.g. NotFound; an empty list writes nothing).

    Returns:
        (the stored events, the queue they were computed on).

    Raises:
        InboxConflict: the queue changed `MAX_ATTEMPTS` times in a row.
    """
    for _ in range(MAX_ATTEMPTS):
        queue = projection(log, session_id)
        events = list(plan(queue))
        if not events:
            return [], queue
        stored = log.append_if_unchanged(session_id, events, str(EventKind.INBOX_SPLICED), queue.inbox_seq)
        if stored is not None:
            return stored, queue
    raise InboxConflict(f"the inbox of session {session_id} kept changing; try again")


class ClaimPlan:
    """The splices of a step's claim, for `change`: open claims older than `stale_after` are
    restored first, then `insert` (new text) is queued, then the claim (`claim_splice`).
    After a run, `taken` holds the items the claim takes, in queue order.

    Raises (when called):
        ClaimPending: an open claim is fresher than `stale_after` (another process is between
            its claim and its admission), or one is open and `stale_after` is None.
    """

    def __init__(self, session_id: int, target: str = NEXT_TURN, *, insert: str | None = None,
                 stale_after: float | None = None, now: Callable[[], datetime] | None = None) -> None:
        self.session_id, self.target, self.insert = session_id, target, insert
        self.stale_after, self.now = stale_after, now
        self.taken: list[PendingItem] = []

    def __call__(self, queue: PendingInputProjection) -> list[NewEvent]:
        events: list[NewEvent] = []
        if queue.open_claims:
            newest = max(c.at for c in queue.open_claims)
            if (self.stale_after is None or self.now is None
                    or (self.now() - newest).total_seconds() < self.stale_after):
                raise ClaimPending("another tavern window or command is starting a reply in this playthrough")
            events += restore_splices(queue)
        working = PendingInputProjection(self.session_id, list(queue.items), queue.inbox_seq)
        for event in events:  # the restores apply before the insert and claim are computed
            _apply_new(working, event)
        if self.insert is not None:
            event = insert_splice(working, [new_message(self.insert)], NEXT_TURN)
            events.append(event)
            _apply_new(working, event)
        claim = claim_splice(working, self.target)
        self.taken = working.items[:claim.body["removedCount"]] if claim else []
        return events + ([claim] if claim else [])

    def claimed(self, stored: Sequence[Event]) -> tuple[Event | None, list[PendingItem]]:
        """(the claim among `stored` or None, the items it took): items this plan queued get
        the ref and time of the stored splice that queued them."""
        claim = stored[-1] if stored and stored[-1].body.get("outcome") == CLAIMED else None
        if claim is None:
            return None, []
        where = {str(m.get("id")): e for e in stored for m in e.body.get("inserted", ())}
        items = []
        for item in self.taken:
            if item.ref[1] == 0 and item.id in where:
                event = where[item.id]
                item = PendingItem(item.id, item.target, item.content, item.origin, event.ref, event.created_at)
            items.append(item)
        return claim, items


def claim_batch(log: GuardedLog, session_id: int, target: str = NEXT_TURN, *, insert: str | None = None,
                stale_after: float | None = None,
                now: Callable[[], datetime] | None = None) -> tuple[Event | None, list[PendingItem]]:
    """Claim the batch a step answers (`ClaimPlan`) in one compare-and-append.

    Returns:
        (the claim event or None when nothing was pending, the claimed items in queue order).

    Raises:
        ClaimPending: as `ClaimPlan`; InboxConflict: as `change`.
    """
    plan = ClaimPlan(session_id, target, insert=insert, stale_after=stale_after, now=now)
    stored, _ = change(log, session_id, plan)
    return plan.claimed(stored)


def move_pending(log: GuardedLog, old_session: int, new_session: int) -> list[PendingItem]:
    """Carry the pending queue along when a playthrough's head moves from `old_session` to
    `new_session` (a swipe, a branch, a jump in the tree): the items the new session does not
    already see (it may inherit them through its fork point) are queued there with the same
    ids, steers first, then the old session's queue is emptied with one `moved` splice (in that
    order: a crash in between leaves a copy behind, never a loss).

    Returns:
        The items carried (already seen ones included), in queue order.

    Raises:
        InboxConflict: as `change`.
    """
    pending = projection(log, old_session).items
    if not pending or old_session == new_session:
        return []

    def carry(queue: PendingInputProjection) -> list[NewEvent]:
        seen = {item.id for item in queue.items}
        steers = [i.message() for i in pending if i.target == NEXT_STEP and i.id not in seen]
        turns = [i.message() for i in pending if i.target == NEXT_TURN and i.id not in seen]
        events = [splice(NEXT_STEP, queue.steers, 0, steers, QUEUED)] if steers else []
        if turns:
            events.append(splice(NEXT_TURN, len(queue.items) + len(steers), 0, turns, QUEUED))
        return events

    change(log, new_session, carry)
    change(log, old_session, lambda q: [splice(NEXT_TURN, 0, len(q.items), [], MOVED)] if q.items else [])
    return pending


class AsyncGuardedLog(Protocol):
    """`GuardedLog`, awaited (`engine.log.ThreadedLog` adapts a synchronous one)."""

    async def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]: ...

    async def append_if_unchanged(self, session_id: int, events: Sequence[NewEvent], kind: str,
                                  after_seq: int) -> list[Event] | None: ...


async def change_async(log: AsyncGuardedLog, session_id: int,
                       plan: Callable[[PendingInputProjection], Sequence[NewEvent]],
                       surface: Sequence[Event] | None = None) -> tuple[list[Event], PendingInputProjection]:
    """`change` on an awaited log; `surface`: the session's surface just read (saves the first read)."""
    for _ in range(MAX_ATTEMPTS):
        events_now = surface if surface is not None else await log.surface_events(session_id)
        surface = None
        queue = PendingInputProjection.from_events(events_now, session_id)
        events = list(plan(queue))
        if not events:
            return [], queue
        stored = await log.append_if_unchanged(session_id, events, str(EventKind.INBOX_SPLICED), queue.inbox_seq)
        if stored is not None:
            return stored, queue
    raise InboxConflict(f"the inbox of session {session_id} kept changing; try again")


def _apply_new(queue: PendingInputProjection, new: NewEvent) -> None:
    """Apply a not-yet-stored splice to a working copy (ids and times are provisional)."""
    body = new.body
    start, removed = body["start"], body["removedCount"]
    now = queue.items[0].queued_at if queue.items else datetime.min
    items = [PendingItem(str(m["id"]), body["target"], str(m["content"]), _origin(m), (queue.session_id, 0), now)
             for m in body["inserted"]]
    queue.items[start:start + removed] = items


_REPLAYS = _Replays()
