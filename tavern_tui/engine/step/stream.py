"""Provides the stream stage of a step: `Reply`, which takes the provider's events as they
arrive, keeps the text and reasoning in memory, checkpoints them coalesced, and records the
provider's retries and config adjustments.

Rules: DESIGN.md "One step" (a crash or cancel mid-stream loses nothing already received) and
seed 000 §3 (rejected parameters dropped or renamed, named in the trace), §4 (a trace record per
provider request, retries included).
"""

from __future__ import annotations

import time
from typing import Any

from tavern_tui.engine.events import Event, EventKind, NewEvent
from tavern_tui.engine.log import AsyncSessionLog
from tavern_tui.engine.step.options import StepOptions
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
        self.timing: dict[str, Any] = {"submitted": options.now().isoformat()}
        self.context["timing"] = self.timing
        self.stages = self.timing["stages"] = dict(stages)
        self.sent_at = time.perf_counter()  # the request goes out now; first_byte and stream count from here
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
        elif isinstance(event, Finished):
            self.finished = event
        elif isinstance(event, ConfigAdjusted):
            await self._adjusted(event)
        if not isinstance(event, (TextDelta, ReasoningDelta)):
            return False
        if "first_byte" not in self.timing:
            self.timing["first_byte"] = self.options.now().isoformat()
            self.stages["first_byte"] = round((time.perf_counter() - self.sent_at) * 1000, 1)
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
        if "first_byte" in self.stages:
            self.stages["stream"] = round((time.perf_counter() - self.sent_at) * 1000 - self.stages["first_byte"], 1)
        self.timing["last_byte"] = self.options.now().isoformat()
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
        first, now = self.trace_event.body, self.options.now
        await self.log.append(self.session_id, [NewEvent(TRACE_REQUEST, None, {
            **first, "attempt": n, "retry_of": list(self.trace_event.ref), "config": dict(attempt.get("config") or {}),
            "omitted": dict(attempt.get("omitted") or {}), "submitted_at": now().isoformat()})
            for n, attempt in enumerate(self.attempts[1:], start=2)])
