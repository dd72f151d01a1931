"""Provides what `run_step` yields: `StepStarted`, the provider's deltas, `StepSettled`, and in a
turn with tools `ToolResultStored` and `TurnLimitReached` (`StepUpdate` names them all).

Rules: seed 000 §1 (a step, then tool-call → tool/result → perhaps the next step).
"""

from __future__ import annotations

from dataclasses import dataclass

from tavern_tui.engine.events import Event
from tavern_tui.engine.step.types import Generation
from tavern_tui.engine.stream import ChatRequest, ReasoningDelta, TextDelta, ToolCall, Usage
from tavern_tui.engine.tooling import ToolOutcome


@dataclass(frozen=True, slots=True)
class StepStarted:
    """The step's input is in the log; the request is about to be sent.

    Attributes:
        user: the stored `user/message`, None when the step had no new input (regenerate,
            swipe, continue, impersonate).
        request: the exact request handed to the provider.
        generation: what the step asks for.
    """

    user: Event | None
    request: ChatRequest
    generation: Generation = Generation()
    claimed: tuple[Event, ...] = ()
    """Every `user/message` admitted from the claimed batch, in order (`user` is the last)."""
    trace: tuple[int, int] | None = None
    """(session, seq) of this step's `trace/request` record."""


@dataclass(frozen=True, slots=True)
class StepSettled:
    """The reply is settled as `assistant/message` (complete) in `event`; `calls` are the tool
    calls it made (stored in its body's `tool_calls`), empty for a plain reply."""

    event: Event
    usage: Usage | None
    calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolResultStored:
    """A call of the turn ran (or was refused, failed, timed out) and its `tool/result` is stored."""

    event: Event
    call: ToolCall
    outcome: ToolOutcome


@dataclass(frozen=True, slots=True)
class TurnLimitReached:
    """The turn made `limit` requests and the last reply still asked for tools: those calls were
    answered "not run" and the turn ends there (the limit is named when hit)."""

    limit: int
    message: str


StepUpdate = StepStarted | TextDelta | ReasoningDelta | StepSettled | ToolResultStored | TurnLimitReached
"""What `run_step` yields, in order: StepStarted, deltas…, StepSettled; in a turn with tools,
then one ToolResultStored per call and the next step's StepStarted…, or TurnLimitReached."""
