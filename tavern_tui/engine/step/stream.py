"""Provides the stream stage of a step: `Reply`, which takes the provider's events as they
arrive, keeps the text and reasoning in memory, checkpoints them coalesced, and records the
provider's retries and config adjustments.

Rules: DESIGN.md "One step" (a crash or cancel mid-stream loses nothing already received) and
seed 000 §3 (rejected parameters dropped or renamed, named in the trace), §4 (a trace record per
provider request, retries included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from tavern_tui.engine.events import Event, EventKind, NewEvent
from tavern_tui.engine.log import AsyncSessionLog
from tavern_tui.engine.step.options import StepOptions
from tavern_tui.engine.step.timing import StreamTiming
from tavern_tui.engine.step.types import CONFIG_ADJUSTED
from tavern_tui.engine.stream import (
    Attempts,
    ConfigAdjusted,
    Finished,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCalls,
    Usage,
)
from tavern_tui.engine.trace import TRACE_REQUEST
from tavern_tui.errors import StoreError


class Reply:
    """One step's reply as it streams: what arrived, what is checkpointed, and the context
    settled with it (`timing`, `config`, `attempts`, `continues`).

    Built just after the request is sent: `timing.submitted` and the first/stream stages count
    from then.
    """

    def __init__(self, log: AsyncSessionLog, session_id: int, trace_event: Event, options: StepOptions,
                 stages: dict[str, float]) -> None:
        self.log, self.session_id, self.trace_event, self.options = log, session_id, trace_event, options
        self.context: dict[str, Any] = {}
        if options.generation.continues is not None:
            self.context["continues"] = list(options.generation.continues)
        self.clock = StreamTiming(stages, options.now)  # the request goes out now
        self.timing: dict[str, Any] = self.clock.timing
        self.context["timing"] = self.timing
        self.stages = self.clock.stages
        self.attempts: list[dict[str, Any]] = []  # this stream's HTTP attempts (`Attempts` events)
        self.retries_recorded = False
        self.parts: list[str] = []
        self.reasoning: list[str] = []
        self.checkpointed = (0, 0)  # how much of parts/reasoning is already in checkpoints
        self.last_checkpoint = options.clock()
        self.usage: Usage | None = None
        self.finished: Finished | None = None
        self.calls: tuple[ToolCall, ...] = ()

    @property
    def text(self) -> str:
        """The reply's text as it settles (a continue's original, then what arrived)."""
        return self.options.generation.settle_text("".join(self.parts))

    @property
    def thought(self) -> str:
        """The reasoning that arrived."""
        return "".join(self.reasoning)

    async def take(self, event: object) -> bool:
        """Keep one stream event; True when it is a delta to hand on (checkpointed first, so what
        the caller has seen is durable)."""
        if isinstance(event, Attempts):
            self.attempts = [dict(a) for a in event.records]
        if not self.retries_recorded:  # the stream started: every earlier attempt is known now
            self.retries_recorded = True  # first: a cancel during the append must not repeat it
            await self.record_retries()
        if isinstance(event, Attempts):
            return False
        if isinstance(event, TextDelta):
            self.parts.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self.reasoning.append(event.text)
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, ToolCalls):
            self.calls = event.calls  # complete: the provider yields them once, at the end
            self.clock.first_byte()  # a reply that only calls tools has no text to time it by
        elif isinstance(event, Finished):
            self.finished = event
        elif isinstance(event, ConfigAdjusted):
            await self._adjusted(event)
        if not isinstance(event, (TextDelta, ReasoningDelta)):
            return False
        self.clock.first_byte()
        await self._checkpoint()
        return True

    async def _adjusted(self, event: ConfigAdjusted) -> None:
        # The provider dropped or renamed rejected parameters (seed 000 §3): keep requested vs
        # effective and each omission with the step, for the trace.
        adjusted = {"requested": event.requested, "effective": event.effective, "omitted": event.omitted}
        await self.log.append(self.session_id, [NewEvent(CONFIG_ADJUSTED, None, adjusted)])
        self.context["config"] = {"effective": event.effective, "omitted": event.omitted}

    async def _checkpoint(self) -> None:
        """A `stream/checkpoint` of what arrived since the last one, at most every `checkpoint_every`."""
        clock = self.options.clock
        if clock() - self.last_checkpoint < self.options.checkpoint_every:
            return
        body = {"content": "".join(self.parts[self.checkpointed[0]:]),
                "reasoning": "".join(self.reasoning[self.checkpointed[1]:])}
        try:
            await self.log.append(self.session_id, [NewEvent(EventKind.STREAM_CHECKPOINT, None, body)])
            self.checkpointed = (len(self.parts), len(self.reasoning))
        except StoreError:
            pass  # locked out: the text stays in memory and goes into the next checkpoint
        self.last_checkpoint = clock()

    def cut_off(self) -> bool:
        """Neither a finish_reason nor [DONE]: the connection closed mid-reply."""
        return self.finished is None or (self.finished.finish_reason is None and not self.finished.saw_done)

    def finish(self) -> None:
        """The stream ended: the stream stage's time, the last byte's, and the stream's attempts
        (status, config, omissions; never credentials) go with the settled reply, for the trace."""
        self.clock.finish()
        if self.attempts:
            self.context["attempts"] = [dict(a) for a in self.attempts]

    async def record_retries(self) -> None:
        """One more `trace/request` record per retry the provider made (seed 000 §4: a trace
        record per provider request, retries included): the same message references and hashes,
        the attempt's own call config and omissions, `attempt` n and `retry_of` the first record.
        Nothing is written when the first request was the only one. The attempts are the
        stream's own (`Attempts` events), never the provider's shared state."""
        if len(self.attempts) < 2:
            return
        await self.log.append(self.session_id,
                              retry_records(self.trace_event, self.attempts, self.options.now().isoformat()))


def retry_records(first: Event, attempts: Sequence[Mapping[str, Any]], submitted_at: str) -> list[NewEvent]:
    """One more `trace/request` record per retry after the first request (seed 000 §4: a trace
    record per provider request, retries included), for a step's stream (`Reply.record_retries`)
    and a request outside a step alike (a compaction's summary request).

    Args:
        first: the stored trace record of the first request; each retry's record is its body (the
            same message references and hashes) less `timing` and `attempts` (the whole
            request's, kept with the first alone), with the attempt's own call config and
            omissions, `attempt` n (from 2) and `retry_of` the first record's ref.
        attempts: the stream's HTTP attempts (`Attempts.records`), the first request's first.
        submitted_at: ISO time stamped on the retries' records.

    Returns:
        The records to append, in attempt order; empty when the first request was the only one.
    """
    body = {key: value for key, value in first.body.items() if key not in ("timing", "attempts")}
    return [NewEvent(TRACE_REQUEST, None, {
        **body, "attempt": n, "retry_of": list(first.ref), "config": dict(attempt.get("config") or {}),
        "omitted": dict(attempt.get("omitted") or {}), "submitted_at": submitted_at})
        for n, attempt in enumerate(attempts[1:], start=2)]
