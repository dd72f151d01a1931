"""Provides `StepOptions`: how a step (or a turn with tools) runs, passed whole from `run_step`
to every stage instead of a long argument list.

Rules: DESIGN.md "One step" (stages with one job each, the same options for all of them).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from tavern_tui.engine.events import Event
from tavern_tui.engine.inbox import PendingItem
from tavern_tui.engine.limits import DEFAULT_MAX_STEPS
from tavern_tui.engine.step.lease import StepClaims
from tavern_tui.engine.step.types import ContextRefresh, Generation
from tavern_tui.engine.tooling import ToolRunner

if TYPE_CHECKING:  # the stages' modules import these options: hook types only for the checker
    from tavern_tui.engine.step.prestep import PreStepHook
    from tavern_tui.engine.step.request import RequestHook

CHECKPOINT_EVERY = 0.1
"""Seconds between `stream/checkpoint` events at most while text arrives (coalesced: one per
interval, never one per token); a hard kill loses at most this much of a reply. The write
cost per checkpoint is measured in benchmarks/checkpoint_cost.py."""

BoundaryClaim = Callable[[], Awaitable[tuple[Event | None, list[PendingItem]]]]
"""Claims the steers at a step boundary (`InboxService.claim_at_step_boundary`, off the loop):
(the claim event or None, the claimed items)."""


def utc_now() -> datetime:
    """Wall-clock time now, in UTC (the default `StepOptions.now`)."""
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class StepOptions:
    """How a step (or a turn with tools) runs: built once by the caller (`run_step`'s `options`,
    or its keywords) and passed down whole to the opening, the stream and the tool turn.

    Attributes:
        generation: what the step asks the model for (continue text, impersonation, …).
        checkpoint_every: seconds between `stream/checkpoint` events while streaming at most
            (coalesced). A checkpoint the database refuses (busy) is skipped: the text stays
            in memory and goes into the next one; the settlement retries until it lands.
        clock: monotonic seconds (injectable for tests).
        stale_after: seconds without activity after which an unsettled step counts as crashed
            (a live stream checkpoints at least every `checkpoint_every` plus the provider's
            read timeout); a fresher one means another process is replying.
        now: wall-clock UTC time, compared with event times (injectable for tests).
        claim: with no text, claim the inbox's pending batch as this step's input (a queued
            line answered after the running reply settled).
        claims: step ownership (`StepClaims`, the store's leases); the step's claim is held
            from its opening to its settlement. None: no lease, only the staleness check.
        tools: runs the tool calls of a turn; None for a step without tools.
        max_steps: requests a turn with tools makes at most.
        at_boundary: claims the steers at each step boundary of a turn; None claims them from
            the log directly.
        refresh: re-reads the runtime context before admission (the refresh stage); None: the
            assembler's proposed snapshot is admitted as it is.
        pre_step_hooks: the pre-step stage's hooks, in order: each accepts, replaces or rejects
            the proposed input (`prestep.PreStepHook`).
        request_hooks: the request stage's hooks, in order: each may set the call config
            (`request.RequestHook`), nothing else.
    """

    generation: Generation = Generation()
    checkpoint_every: float = CHECKPOINT_EVERY
    clock: Callable[[], float] = time.monotonic
    stale_after: float = 75.0
    now: Callable[[], datetime] = utc_now
    claim: bool = False
    claims: StepClaims | None = None
    tools: ToolRunner | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    at_boundary: BoundaryClaim | None = None
    refresh: ContextRefresh | None = None
    pre_step_hooks: tuple[PreStepHook, ...] = ()
    request_hooks: tuple[RequestHook, ...] = ()
