"""Provides the turn with tools: a step; when its reply asks for tools, each call runs and its
`tool/result` is stored; the steers queued meanwhile are claimed; then the next step. `tool_turn`
runs the steps; `_answer_calls` is the stage between two of them (the results, the steers).

Rules: seed 000 §1 ("tool-call → tool-role tool/result → perhaps the next step") and §5
(next-step items are claimed between steps).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_tui.engine.inbox import NEXT_STEP, ClaimPending, ClaimPlan, change_async
from tavern_tui.engine.log import AsyncSessionLog, SessionLog, awaited_log, until_done
from tavern_tui.engine.step.lease import Lease
from tavern_tui.engine.step.options import StepOptions
from tavern_tui.engine.step.settle import settling
from tavern_tui.engine.step.single import run_single
from tavern_tui.engine.step.turn import Steers, TurnStep
from tavern_tui.engine.step.types import Assembler, Generation
from tavern_tui.engine.step.updates import StepSettled, StepStarted, StepUpdate, ToolResultStored, TurnLimitReached
from tavern_tui.engine.stream import Provider, ToolCall
from tavern_tui.engine.tooling import ToolOutcome, ToolRunner, pending_calls, result_event, result_summary


async def tool_turn(log: SessionLog | AsyncSessionLog, session_id: int, provider: Provider, assemble: Assembler,
                    text: str | None, options: StepOptions, lease: Lease | None,
                    tools: ToolRunner) -> AsyncGenerator[StepUpdate, None]:
    """A turn with tools (seed 000 §1: "tool-call → tool-role tool/result → perhaps the next
    step"): a step; when its reply asks for tools, each call runs (`tools.run`) and its
    `tool/result` is stored; the steers queued meanwhile are claimed (`options.at_boundary`); then
    the next step, its own request and trace linked to the turn's first. At most
    `options.max_steps` requests: the calls of the last are answered "not run" naming the limit
    (`TurnLimitReached`).

    A cancel keeps what settled: the stored reply with its calls and the results already
    stored; each call not run yet gets a "cancelled" result, so no call is left unanswered.
    Arguments, other yields and errors as `single.run_single`.
    """
    alog = awaited_log(log)
    limit = max(1, options.max_steps)
    turn = TurnStep(1, await tools.offered())
    step_text, step_options = text, options
    while True:
        settled: StepSettled | None = None
        started: StepStarted | None = None
        steps = run_single(log, session_id, provider, assemble, step_text, step_options,
                           lease if turn.step == 1 else None, turn)
        async with aclosing(steps):
            async for update in steps:
                if isinstance(update, StepStarted):
                    started = update
                elif isinstance(update, StepSettled):
                    settled = update
                yield update
        if settled is None or not settled.calls or started is None:
            return
        reached = _limit_reached(limit) if turn.step >= limit else None
        boundary = _Boundary()
        async with aclosing(_answer_calls(alog, session_id, tools, settled.calls, reached, options,
                                          boundary)) as answers:
            async for answer in answers:
                yield answer
        if reached is not None:
            return
        turn = TurnStep(turn.step + 1, await tools.offered(), turn.first or started.trace, started.trace,
                        tuple(boundary.results), boundary.steers)
        step_text = None  # no continue text, no one-off instruction, nothing more to claim
        step_options = replace(options, generation=Generation(options.generation.type), claim=False)


@dataclass(slots=True)
class _Boundary:
    """What a step's calls leave for the next step (`_answer_calls` fills it in): the stored
    results' summaries, in order, and the steers claimed at the boundary."""

    results: list[dict[str, Any]] = field(default_factory=list)
    steers: Steers | None = None


async def _answer_calls(log: AsyncSessionLog, session_id: int, tools: ToolRunner, calls: tuple[ToolCall, ...],
                        reached: TurnLimitReached | None, options: StepOptions,
                        boundary: _Boundary) -> AsyncGenerator[ToolResultStored | TurnLimitReached, None]:
    """The stage between two steps of `tool_turn`: each of the settled reply's `calls` run (or,
    with the turn's limit `reached`, answered "not run", then `reached` yielded) and its
    `tool/result` stored and yielded; then the steers queued meanwhile claimed (`_claim_steers`).
    The results' summaries and the steers go in `boundary`. A cancel, or a consumer that stops
    early, first answers each call not run yet "cancelled" (`_answer_cancelled`)."""
    done: set[str] = set()
    try:
        for call in calls:
            outcome = _not_run(reached) if reached is not None else await _run_call(tools, call)
            stored = (await settling(log, session_id, [result_event(call, outcome)]))[0]
            done.add(call.id)
            boundary.results.append(result_summary(stored.ref, stored.body))
            yield ToolResultStored(stored, call, outcome)
        if reached is not None:
            yield reached
            return
        boundary.steers = await _claim_steers(log, session_id, options)
    except (asyncio.CancelledError, GeneratorExit):
        await until_done(_answer_cancelled(log, session_id, pending_calls(calls, done)))
        raise


def _limit_reached(limit: int) -> TurnLimitReached:
    """The turn made `limit` requests: the calls of its last reply are not run, and it says why."""
    return TurnLimitReached(limit, f"this turn reached its limit of {limit} requests ([tools] max_steps = {limit}); "
                                   "the tool calls of its last reply were not run")


def _not_run(reached: TurnLimitReached) -> ToolOutcome:
    """The result of a call the turn's limit left unrun, naming the limit."""
    return ToolOutcome(f"not run: {reached.message}", "limit", {"reason": reached.message, "limit": reached.limit})


async def _run_call(tools: ToolRunner, call: ToolCall) -> ToolOutcome:
    """`tools.run(call)`; a runner that raises anyway gives an error result, never a lost turn."""
    try:
        return await tools.run(call)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - a tool's failure is the model's to read
        reason = f"the tool failed: {type(exc).__name__}: {exc}"[:500]
        return ToolOutcome(json.dumps({"error": reason}), "error", {"reason": reason})


async def _answer_cancelled(log: AsyncSessionLog, session_id: int, calls: list[ToolCall]) -> None:
    """One "cancelled" `tool/result` per call not run when the turn was cancelled."""
    if calls:
        why = "the turn was cancelled before this call ran"
        await settling(log, session_id, [result_event(c, ToolOutcome(f"not run: {why}", "cancelled",
                                                                      {"reason": why})) for c in calls])


async def _claim_steers(log: AsyncSessionLog, session_id: int, options: StepOptions) -> Steers | None:
    """The steers queued while the step ran, claimed at its boundary (seed 000 §5: next-step
    items are claimed between steps; `options.at_boundary`, else from the log); None when there
    are none, or another process's claim is still being admitted (they wait for the next
    boundary or turn)."""
    try:
        if options.at_boundary is not None:
            claim_event, batch = await options.at_boundary()
        else:
            plan = ClaimPlan(session_id, NEXT_STEP, stale_after=options.stale_after, now=options.now)
            stored, _ = await change_async(log, session_id, plan)
            claim_event, batch = plan.claimed(stored)
    except ClaimPending:
        return None
    return (claim_event, batch) if claim_event is not None and batch else None
