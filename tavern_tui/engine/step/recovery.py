"""Provides the recovery of a step a crash left open: finding it (`open_step`), settling it
(`recover_interrupted`), and the opening's first stage, which recovers a dead owner's step or
refuses while a live one streams.

Rules: DESIGN.md "One step" (a crash or cancel mid-stream loses nothing already received):
what the step's `stream/checkpoint` events hold becomes one `assistant/attempt`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from tavern_tui.engine.events import INTERRUPTED_REASON, Event, EventKind, NewEvent
from tavern_tui.engine.log import SUMMARY_SOURCE, AsyncSessionLog, SessionLog
from tavern_tui.engine.step.errors import StepBusy
from tavern_tui.engine.step.lease import Claim, StepClaims
from tavern_tui.engine.step.options import StepOptions, utc_now
from tavern_tui.engine.step.settle import attempt_event
from tavern_tui.engine.tooling import INTERRUPTED_CALL, ToolOutcome, result_event, unanswered_calls


@dataclass(frozen=True, slots=True)
class OpenStep:
    """A step that sent a request and has not settled: live elsewhere, or left by a crash.

    Attributes:
        checkpoints: its `stream/checkpoint` events (what arrived before the last one).
        last_activity: time of its newest event (header or checkpoint).
    """

    checkpoints: list[Event]
    last_activity: datetime


def open_step(log: SessionLog, session_id: int) -> OpenStep | None:
    """The session's unsettled step, if any: a `request/header` after the last settlement.

    Only the session's own events count, so a log that offers `newest_own_events` (the store
    does) is read backwards from the head in growing batches until a header or a settlement
    decides it (opening a 5,000-message chat must not read its whole surface); other logs are
    read whole."""
    reader = getattr(log, "newest_own_events", None)
    if reader is None:
        return open_step_in(log.surface_events(session_id), session_id)
    checkpoints: list[Event] = []
    before: int | None = None
    batch = 32
    while True:
        events = reader(session_id, batch, before)
        decided, step = _newest_first(events, checkpoints)
        if decided:
            return step
        if len(events) < batch:
            return None  # the session's start: no header after any settlement
        before = events[-1].seq
        batch = min(batch * 4, 4096)


def _settles(event: Event) -> bool:
    """Whether `event` settles the step before it (see `open_step_in`)."""
    if event.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.ASSISTANT_ATTEMPT, EventKind.USER_MESSAGE):
        return True
    return (event.kind == EventKind.SURFACE_REPLACED and event.source == SUMMARY_SOURCE
            and bool(event.body.get("request")))


def _newest_first(events: Iterable[Event], checkpoints: list[Event]) -> tuple[bool, OpenStep | None]:
    """Read a session's own events newest first, collecting `checkpoints` on the way: (whether a
    header or a settlement decided it, the open step). Checkpoints come after their header, and a
    settlement after the header closes the step (see `_settles`), so the newest of the two decides."""
    for event in events:
        if event.kind == EventKind.STREAM_CHECKPOINT:
            checkpoints.append(event)
        elif event.kind == EventKind.REQUEST_HEADER:
            checkpoints.reverse()
            last = checkpoints[-1] if checkpoints else event
            return True, OpenStep(checkpoints, last.created_at)
        elif _settles(event):
            return True, None
    return False, None


def open_step_in(surface: list[Event], session_id: int) -> OpenStep | None:
    """`open_step` on the session's surface events, already read: read from the head backwards
    until a header or a settlement decides it (a step's opening calls it on the event loop, and a
    5,000-message surface read forwards cost milliseconds there)."""
    own = (event for event in reversed(surface) if event.session_id == session_id)
    return _newest_first(own, [])[1]


def recover_interrupted(log: SessionLog, session_id: int, *, stale_after: float = 75.0,
                        now: Callable[[], datetime] = utc_now, claims: StepClaims | None = None) -> Event | None:
    """Settle a step a crash left open: what its checkpoints hold becomes one `assistant/attempt`
    (body `recovered: true` and an `error` saying why; empty when nothing had arrived).
    Idempotent.

    With `claims`, the step's lease decides: when no live owner holds it (its owner died, or
    never claimed), the step is settled at once; a live owner's step is left alone. Without,
    a step quiet for `stale_after` seconds is settled, a fresher one left alone.

    Returns:
        The attempt appended, or None when nothing was settled.
    """
    if claims is None:
        recovered = recovery(open_step(log, session_id), stale_after, now)
        return log.append(session_id, [recovered])[0] if recovered is not None else None
    step = open_step(log, session_id)
    if step is None:
        return None
    try:
        claim = claims.claim(session_id, stale_after)
    except StepBusy:
        return None
    try:
        recovered = recovery(open_step(log, session_id), -1.0, now)
        return log.append(session_id, [recovered])[0] if recovered is not None else None
    finally:
        claims.release(claim.token)


def recovery(step: OpenStep | None, stale_after: float, now: Callable[[], datetime]) -> NewEvent | None:
    """The attempt that settles `step` when it has been quiet for `stale_after` seconds, else None."""
    if step is None or (now() - step.last_activity).total_seconds() < stale_after:
        return None
    text = "".join(str(e.body.get("content", "")) for e in step.checkpoints)
    thought = "".join(str(e.body.get("reasoning", "")) for e in step.checkpoints)
    why = {"category": "interrupted", "message": f"{INTERRUPTED_REASON}; the text that had arrived is kept",
           "status": None}
    return attempt_event(text, thought, {"recovered": True, "error": why})


async def recover_or_refuse(log: AsyncSessionLog, session_id: int, options: StepOptions,
                            held: Claim | None) -> tuple[list[Event], bool]:
    """The opening's first stage: settle an unsettled step left by a dead owner, or refuse while
    a live one streams; then answer the tool calls a crash left without results.

    Returns:
        (the surface events read first, whether a step was recovered).

    Raises:
        StepBusy: another live process is streaming in this session (nothing is written).
    """
    surface = await log.surface_events(session_id)
    step = open_step_in(surface, session_id)
    # Holding the lease, an unsettled step is its dead owner's: settle it now, not after a timeout.
    recovered = recovery(step, -1.0 if held is not None else options.stale_after, options.now)
    if recovered is not None:
        await log.append(session_id, [recovered])
    elif step is not None:
        raise StepBusy("a reply is being written in this playthrough by another tavern window or command; "
                       "wait for it or stop it there")
    # A crash between a reply's tool calls and their results: answer them before anything is sent.
    await _answer_interrupted(log, session_id, surface)
    return surface, recovered is not None


async def _answer_interrupted(log: AsyncSessionLog, session_id: int, surface: list[Event]) -> None:
    """One "interrupted" `tool/result` per call a crash left without one (`unanswered_calls`)."""
    orphans = unanswered_calls([e for e in surface if e.session_id == session_id])
    if orphans:
        await log.append(session_id, [result_event(c, ToolOutcome(f"not run: {INTERRUPTED_CALL}", "cancelled",
                                                                   {"reason": INTERRUPTED_CALL})) for c in orphans])
