"""Provides one step without the turn around it: the opening, then the stream (`_stream`: the
deltas as they arrive, a stop or failure settled as an attempt), then the settlement, each awaited
to its end.

Rules: DESIGN.md "One step"; a cancel or a provider error mid-stream keeps what arrived as
`assistant/attempt`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from contextlib import aclosing

from tavern_tui.engine.log import AsyncSessionLog, SessionLog, awaited_log, until_done
from tavern_tui.engine.step.errors import StepFailed
from tavern_tui.engine.step.lease import Lease
from tavern_tui.engine.step.opening import open_request
from tavern_tui.engine.step.options import StepOptions
from tavern_tui.engine.step.settle import Author, settle_attempt, settle_cut_off, settle_early_cancel, settle_reply
from tavern_tui.engine.step.stream import Reply
from tavern_tui.engine.step.turn import TurnStep
from tavern_tui.engine.step.types import Assembler
from tavern_tui.engine.step.updates import StepStarted, StepUpdate
from tavern_tui.engine.stream import ChatRequest, Provider, ReasoningDelta, TextDelta
from tavern_tui.errors import ProviderError


async def run_single(log: SessionLog | AsyncSessionLog, session_id: int, provider: Provider, assemble: Assembler,
                     text: str | None, options: StepOptions, lease: Lease | None,
                     turn: TurnStep | None = None) -> AsyncGenerator[StepUpdate, None]:
    """Run one step for the user's `text` and stream its progress.

    Every log call is awaited, one after another, each complete before the next (a cancel
    waits for the call under way): with a database log the event loop never runs SQL.

    Args:
        log: the session log: an `AsyncSessionLog`, or a synchronous `SessionLog` (the store's
            `EventLog`, a test's `MemoryLog`), which is wrapped in `ThreadedLog` so each call
            runs in a worker thread.
        session_id: the session to extend.
        provider: streams the completion.
        assemble: builds the system section and config from history + the claimed batch
            (called on the event loop).
        text: what the person submitted, queued in the inbox and claimed with whatever was
            pending before it (one batch, one `user/message` each, in order); None for a step
            without new input (regenerate, swipe, continue, impersonate) unless `options.claim`.
        options: how it runs (`StepOptions`; its `tools`, `max_steps`, `at_boundary` and
            `claims` are the turn's and `run_step`'s, unused here).
        lease: the step's lease, taken first thing in the opening (`run_step`); with one, an
            unsettled step found then is recovered at once (its owner lost the lease).
        turn: this step's place in a turn with tools (`tools.tool_turn`): the tools offered, the
            turn's first trace, the steers claimed at the boundary; None for a lone step.

    Yields:
        `StepStarted`, then `TextDelta`/`ReasoningDelta` as they arrive, then `StepSettled`.

    Raises:
        StepBusy: another process is streaming a reply in this session, or is between its
            inbox claim and its admission (nothing is written).
        InboxEmpty: `options.claim` and nothing is pending (nothing is written).
        StepFailed: the provider failed, or the stream was cut off (no `finish_reason` and no
            `[DONE]`); the partial reply is stored as `assistant/attempt`.
        asyncio.CancelledError: the caller cancelled; the partial reply is stored first. A
            cancel before the request is sent lets the step's opening writes finish, then
            stores an empty cancelled attempt (no `StepStarted` is yielded), so no step is
            left open.
    """
    alog = awaited_log(log)
    author = Author.of(provider, options.generation)
    # The opening runs to its end even if cancelled meanwhile: half of it would leave a header
    # without a settlement (the session then looks busy) or an input without its step.
    opened, early_cancel = await until_done(open_request(alog, session_id, provider, assemble, text, options,
                                                         lease, turn))
    if early_cancel is None:
        yield StepStarted(opened.user_event, opened.request, options.generation, opened.claimed,
                          opened.trace_event.ref)
    reply = Reply(alog, session_id, opened.trace_event, options, opened.stages)
    if early_cancel is not None:
        await until_done(settle_early_cancel(reply, author))
        raise early_cancel
    # aclosing: a consumer that stops early closes the stream stage (and the provider's response) at once.
    async with aclosing(_stream(reply, author, provider, opened.request)) as deltas:
        async for delta in deltas:
            yield delta
    yield await settle_reply(reply, author, provider, opened.model, offers_tools=turn is not None)


async def _stream(reply: Reply, author: Author, provider: Provider,
                  request: ChatRequest) -> AsyncGenerator[TextDelta | ReasoningDelta, None]:
    """The stream stage of `run_single`: the provider's deltas as they arrive (each kept by
    `reply` first), then the stream checked complete.

    Raises:
        StepFailed: the provider failed, or the stream was cut off; what arrived is stored as
            `assistant/attempt`.
        asyncio.CancelledError / GeneratorExit: a cancel, or a consumer that stopped early; what
            arrived is stored as a cancelled attempt first.
    """
    try:
        # aclosing: a consumer that stops early closes the provider's HTTP response at once.
        async with aclosing(provider.stream(request)) as stream:
            async for event in stream:
                if await reply.take(event) and isinstance(event, TextDelta | ReasoningDelta):
                    yield event
    except (asyncio.CancelledError, GeneratorExit) as stop:
        # A cancel while the attempt is written waits for it; raised after it, unless this
        # already is one.
        _, cancel = await until_done(settle_attempt(reply, author, {"cancelled": True}))
        if cancel is not None and isinstance(stop, GeneratorExit):
            raise cancel from None
        raise
    except ProviderError as exc:
        error = {"category": exc.category, "message": str(exc), "status": exc.status}
        attempt, cancel = await until_done(settle_attempt(reply, author, {"error": error}))
        if cancel is not None:
            raise cancel from exc
        raise StepFailed(exc, attempt) from exc
    reply.finish()
    if reply.cut_off():
        raise await settle_cut_off(reply, author)
