"""Provides `run_step`: one step, or a turn with tools, holding the step's lease from its
opening to its settlement.

Rules: DESIGN.md "One step" (one step at a time per playthrough; work after settle runs once
the lease is released, which is the caller's: `run_step` frees it when it ends).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import replace
from typing import Any

from tavern_tui.engine.log import AsyncSessionLog, SessionLog
from tavern_tui.engine.step.lease import Lease, heartbeat_every
from tavern_tui.engine.step.options import StepOptions
from tavern_tui.engine.step.single import run_single
from tavern_tui.engine.step.tools import tool_turn
from tavern_tui.engine.step.turn import TOOL_GENERATIONS
from tavern_tui.engine.step.types import Assembler
from tavern_tui.engine.step.updates import StepUpdate
from tavern_tui.engine.stream import Provider


async def run_step(
    log: SessionLog | AsyncSessionLog,
    session_id: int,
    provider: Provider,
    assemble: Assembler,
    text: str | None,
    *,
    options: StepOptions | None = None,
    **overrides: Any,
) -> AsyncGenerator[StepUpdate, None]:
    """Run one step (`single.run_single`) holding the step's claim (`options.claims`, when given)
    from its opening to its settlement: a second step in the playthrough meanwhile gets
    `StepBusy`, and a killed owner's claim is taken over by the next step at once. With
    `options.tools` (and a generation in `TOOL_GENERATIONS`), the whole turn holds it
    (`tools.tool_turn`: calls, results and the next steps, at most `options.max_steps` requests,
    steers claimed at each boundary by `options.at_boundary`).

    Args:
        log, session_id, provider, assemble, text: as `single.run_single`.
        options: how the step runs (`StepOptions`); None for the defaults.
        overrides: `StepOptions` fields by name, over `options` (`stale_after=75`, `claim=True`).

    Yields and raises as `single.run_single` (and `tools.tool_turn`); a keyword that is not a
    `StepOptions` field raises `TypeError` when the first update is asked for.
    """
    options = replace(options or StepOptions(), **overrides) if overrides else options or StepOptions()
    lease = Lease(options.claims, heartbeat_every(options.stale_after))
    if options.tools is not None and options.generation.type in TOOL_GENERATIONS:
        steps = tool_turn(log, session_id, provider, assemble, text, options, lease, options.tools)
    else:
        steps = run_single(log, session_id, provider, assemble, text, options, lease)
    try:
        async with aclosing(steps):
            async for update in steps:
                yield update
    finally:
        await lease.release()
