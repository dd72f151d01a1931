"""Provides the claim stage of a step's opening: the person's text queued in the inbox and the
pending batch claimed with it (one compare-and-append), or a tool turn's steers; then the
history the assembler sees.

Rules: seed 000 §5 (inbox: insert / replace / cancel / claim) and DESIGN.md "One step" (world
info scans durable history plus the claimed batch, before the input enters the log).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tavern_tui.engine.events import Event
from tavern_tui.engine.inbox import NEXT_TURN, ClaimPending, ClaimPlan, PendingItem, change_async
from tavern_tui.engine.log import AsyncSessionLog, SurfaceFold, SurfaceMessage, fold_surface
from tavern_tui.engine.step.errors import InboxEmpty, StepBusy
from tavern_tui.engine.step.options import StepOptions
from tavern_tui.engine.step.turn import TurnStep
from tavern_tui.engine.step.types import applied_context
from tavern_tui.engine.tooling import turn_transaction


@dataclass(frozen=True, slots=True)
class Claimed:
    """What the claim stage took and read.

    Attributes:
        event: the inbox's claim event, None when the step claimed nothing.
        batch: the claimed items, in order.
        history: the surface the assembler sees (a later tool-turn step's transaction left out).
        transaction: the turn's tool calls and results, sent as stored (`turn.with_transaction`).
        applied: the context identifiers that applied at the last step (`types.applied_context`);
            None when no step recorded them.
        events: the surface events `history` was derived from (the freeze extends them with what
            the opening stores next instead of reading the surface again).
        fold: the surface derived from `events` (the freeze goes on from it instead of deriving
            the whole surface again); None when not derived here.
    """

    event: Event | None
    batch: list[PendingItem] = field(default_factory=list)
    history: list[SurfaceMessage] = field(default_factory=list)
    transaction: list[SurfaceMessage] = field(default_factory=list)
    applied: tuple[str, ...] | None = None
    events: list[Event] = field(default_factory=list)
    fold: SurfaceFold | None = None


async def claim_input(log: AsyncSessionLog, session_id: int, text: str | None, options: StepOptions,
                      turn: TurnStep | None, surface: list[Event] | None) -> Claimed:
    """Claim the step's input: the steers a tool turn claimed at its boundary, or `text` and the
    inbox's pending batch (with `options.claim`, the batch alone); then read the history.
    `surface`: the events just read, reused by the claim when nothing was written since.

    Raises:
        StepBusy: another process's claim is not admitted yet.
        InboxEmpty: a claim found nothing pending.
    """
    claim_event: Event | None = None
    batch: list[PendingItem] = []
    stored: list[Event] = []
    if turn is not None and turn.steers is not None:
        claim_event, batch = turn.steers  # claimed at the turn's step boundary
    elif text is not None or options.claim:
        claim_event, batch, stored = await claim_inbox(log, session_id, text, options, surface)
    events = extended(surface, session_id, stored) if surface is not None and stored else None
    if events is None:  # something else was written since `surface` was read: read it again
        events = await log.surface_events(session_id)
    fold = fold_surface(events)
    history = fold.result()
    # A later step of a tool turn: a projection rebuilds history from text, so the turn's calls
    # and results go to the request as they are (`with_transaction`), not through the assembler.
    transaction = turn_transaction(history, turn.first) if turn is not None and turn.first is not None else []
    if transaction:
        kept = {m.ref for m in transaction}
        history = [m for m in history if m.ref not in kept]
    return Claimed(claim_event, batch, history, transaction, applied_context(events), events, fold)


def extended(surface: list[Event], session_id: int, stored: list[Event]) -> list[Event] | None:
    """The surface after the claim wrote `stored`, without reading it again: `surface` plus
    `stored` when they directly follow the session's newest event in it (nothing else was written
    in between); None when they do not (or the surface holds no event of the session itself).
    The step's opening reads the surface once this way (DESIGN.md "One step")."""
    # The session's own events come in seq order after its ancestors': the newest is the last one.
    newest = next((event.seq for event in reversed(surface) if event.session_id == session_id), None)
    if newest is None or stored[0].seq != newest + 1:
        return None
    if any(b.seq != a.seq + 1 for a, b in zip(stored, stored[1:], strict=False)):
        return None
    return surface + stored


async def claim_inbox(log: AsyncSessionLog, session_id: int, text: str | None, options: StepOptions,
                      surface: list[Event] | None) -> tuple[Event | None, list[PendingItem], list[Event]]:
    """Queue `text` (if any) and claim the pending batch, in one compare-and-append; a claim a
    crash left unadmitted (older than `options.stale_after`) is put back first, so it is in the batch.
    Returns (the claim event, the claimed items, every event the claim stored).

    Raises:
        StepBusy: another process's claim is not admitted yet (it is opening a step now).
        InboxEmpty: nothing to claim.
    """
    plan = ClaimPlan(session_id, NEXT_TURN, insert=text, stale_after=options.stale_after, now=options.now)
    try:
        stored, _ = await change_async(log, session_id, plan, surface)
    except ClaimPending as exc:
        raise StepBusy(str(exc)) from exc
    claim_event, batch = plan.claimed(stored)
    if claim_event is None:
        raise InboxEmpty("nothing is queued in this playthrough's inbox")
    return claim_event, batch, stored


def inbox_trace(claimed: Claimed) -> dict[str, Any]:
    """The trace's `inbox` field: the claim and, per claimed item, the splice that queued it
    (references only: queued text never enters a trace body)."""
    if claimed.event is None:
        return {}
    return {"inbox": {"claim": list(claimed.event.ref),
                      "items": [{"id": i.id, "ref": list(i.ref)} for i in claimed.batch]}}
