"""Provides the stages a request made beside the chat's steps runs through, as a step runs them:
the step's lease with the claim stage's recovery (`held_step`), the prepare stage
(`prepare_aside`), and the stream stage's timing and HTTP attempts (`stream_text`). A
compaction's summary request is one (`service.compaction`): it writes its own records once its
text arrived, so nothing here writes to the log but the recovery of a dead owner's step.

Rules: DESIGN.md "One step" (one step at a time per playthrough; each stage timed in the trace)
and seed 000 §1 (`prepareCall()` validates the config before anything is written), §4 (a trace
record per provider request, retries included: `stream.retry_records`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tavern_tui.engine.log import AsyncSessionLog, SessionLog, awaited_log
from tavern_tui.engine.step.errors import CallNotPrepared
from tavern_tui.engine.step.lease import Claim, Lease, StepClaims, heartbeat_every
from tavern_tui.engine.step.options import StepOptions, utc_now
from tavern_tui.engine.step.recovery import recover_or_refuse
from tavern_tui.engine.step.timing import StreamTiming
from tavern_tui.engine.stream import (
    Attempts,
    CallContext,
    ChatRequest,
    Provider,
    ReasoningDelta,
    TextDelta,
    Usage,
    prepare_call,
)
from tavern_tui.errors import CallConfigError


@asynccontextmanager
async def held_step(log: SessionLog | AsyncSessionLog, session_id: int, claims: StepClaims | None,
                    stale_after: float) -> AsyncIterator[Claim | None]:
    """Hold the step of the session's playthrough for the block, as a step's claim stage takes it
    (`lease.Lease`, heartbeat included, released at the block's end, also on error or cancel): a
    step started meanwhile gets `StepBusy`, as a second step does. Holding it, an unsettled step
    a dead owner left is settled first (`recovery.recover_or_refuse`, as a step's opening does),
    so nothing written in the block settles it instead.

    Args:
        log: the session log (a synchronous one is called in worker threads).
        session_id: the session the request is made for (the lease is its playthrough's).
        claims: step ownership (the store's leases); None: no lease, a step streaming in the
            session (a header fresher than `stale_after`) refuses the block instead.
        stale_after: seconds after which a silent owner counts as gone (`StepOptions.stale_after`).

    Yields:
        The claim held (None without `claims`).

    Raises:
        StepBusy: a live owner holds the step, or streams in the session (nothing is written).
    """
    lease = Lease(claims, heartbeat_every(stale_after))
    try:
        held = await lease.take(session_id, stale_after)
        await recover_or_refuse(awaited_log(log), session_id, StepOptions(stale_after=stale_after), held)
        yield held
    finally:
        await lease.release()


def prepare_aside(provider: Provider, model: str, config: Mapping[str, Any]) -> CallContext:
    """The prepare stage for a request that claimed no input: `prepare_call` (the provider
    validates the call config and binds its adapter, no network), before anything is written.

    Returns:
        The adapter context, recorded as the request's `request/context` (`header.context_record`).

    Raises:
        CallNotPrepared: the provider refused the call (`CallConfigError`); the message is the
            provider's, naming what to fix; `kept` is False (no input was claimed).
    """
    try:
        return prepare_call(provider, model, config)
    except CallConfigError as exc:
        raise CallNotPrepared(str(exc), False) from exc


@dataclass(frozen=True, slots=True)
class Streamed:
    """What `stream_text` received.

    Attributes:
        text: the reply's text deltas joined, as they arrived (reasoning left out).
        timing: `{"submitted", "stages", "first_byte", "last_byte"}` (`timing.StreamTiming`), the
            stages before the request with `first_byte` and `stream` added.
        attempts: the stream's HTTP attempts (`Attempts.records`: status, error, retry delay,
            config, omissions; never credentials), the first request's first; empty when the
            provider reported none.
        usage: `{"prompt_tokens", "completion_tokens", "total_tokens"}` as the provider reported
            them (as a step's reply stores them), None when it reported none.
    """

    text: str
    timing: dict[str, Any] = field(default_factory=dict)
    attempts: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, int | None] | None = None


async def stream_text(provider: Provider, request: ChatRequest, stages: Mapping[str, float], *,
                      now: Callable[[], datetime] = utc_now,
                      on_text: Callable[[str], None] | None = None) -> Streamed:
    """The stream stage of a request beside the steps: stream `request`, keep its text, time it as
    a step's stream is timed (`StreamTiming`, counting from the call) and keep its HTTP attempts as
    the step's `stream.Reply` does (the provider's last `Attempts`). Writes nothing: no
    checkpoints, so a failure leaves nothing behind.

    Args:
        provider, request: what is asked and of whom.
        stages: the milliseconds of the stages before the request (`timing.Stopwatch.laps`).
        now: wall-clock UTC time (injectable for tests).
        on_text: called with each text delta as it arrives.

    Raises:
        ProviderError: the provider failed, before or during the stream (the HTTP response is
            closed; what arrived is dropped).
    """
    clock = StreamTiming(stages, now)
    parts: list[str] = []
    attempts: list[dict[str, Any]] = []
    usage: dict[str, int | None] | None = None
    async with aclosing(provider.stream(request)) as stream:
        async for event in stream:
            if isinstance(event, Attempts):
                attempts = [dict(a) for a in event.records]
                continue
            if isinstance(event, Usage):
                usage = {"prompt_tokens": event.prompt_tokens, "completion_tokens": event.completion_tokens,
                         "total_tokens": event.total_tokens}
                continue
            if isinstance(event, TextDelta | ReasoningDelta):
                clock.first_byte()
            if isinstance(event, TextDelta):
                parts.append(event.text)
                if on_text is not None:
                    on_text(event.text)
    clock.finish()
    return Streamed("".join(parts), clock.timing, attempts, usage)
