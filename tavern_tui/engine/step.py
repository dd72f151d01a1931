"""Provides one agent step: submit → inbox → claim → assemble → admit → header → stream → settle.

Rules: seed 000 §1 and §5 and DESIGN.md "One step". World info and prompt building happen in
the `Assembler` the caller passes (the engine knows nothing of SillyTavern formats); it sees the
durable history **plus the claimed batch**, before the user's text enters the log as a message.
A cancel or a provider error mid-stream keeps what arrived as `assistant/attempt`; periodic
`stream/checkpoint` events keep it across a crash (`recover_interrupted` settles them).
The step awaits every log call (`engine.log.AsyncSessionLog`; a synchronous log runs in worker
threads), so a database log never blocks the event loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from tavern_tui.engine.events import TOOL_CALLS_KEY, Event, EventKind, NewEvent, Origin
from tavern_tui.engine.inbox import (
    CLAIM_KEY,
    NEXT_STEP,
    NEXT_TURN,
    ClaimPending,
    ClaimPlan,
    PendingItem,
    change_async,
    restore_splices,
)
from tavern_tui.engine.log import (
    PLACEHOLDER_SOURCE,
    SUMMARY_SOURCE,
    SYSTEM_PROMPT_SOURCE,
    AsyncSessionLog,
    SessionLog,
    SurfaceMessage,
    awaited_log,
    sent_to_model,
    surface_of,
    until_done,
)
from tavern_tui.engine.stream import (
    Attempts,
    ChatRequest,
    ConfigAdjusted,
    Finished,
    Provider,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCalls,
    Usage,
)
from tavern_tui.engine.tooling import (
    DEFAULT_MAX_STEPS,
    INTERRUPTED_CALL,
    ToolOutcome,
    ToolRunner,
    pending_calls,
    result_event,
    result_summary,
    tools_digest,
    turn_transaction,
    unanswered_calls,
    with_ids,
)
from tavern_tui.engine.trace import TRACE_REQUEST, SentMessage, message_hash, trace_record
from tavern_tui.errors import NetworkError, ProviderError, StoreBusy, StoreError, TavernError

OPENING_SOURCE = "opening"
"""`source` of the opening reference (a character's greeting): role assistant, origin engine."""

CONFIG_ADJUSTED = "request/config-adjusted"
"""Event kind: the provider retried without (or with renamed) rejected call parameters; body
`{"requested", "effective", "omitted": {field: reason}}`."""

IMPERSONATION_SOURCE = "impersonation"
"""`source` of a user-role line the model wrote (impersonate): origin agent (DESIGN.md)."""

GENERATION_TYPES = ("normal", "regenerate", "swipe", "continue", "impersonate")
"""SillyTavern generation types a step can be (world-info `triggers` filter on them)."""


@dataclass(frozen=True, slots=True)
class Generation:
    """What a step asks the model for (SillyTavern `Generate(type)`).

    Attributes:
        type: one of `GENERATION_TYPES`. "normal" sends the person's text; "regenerate" and
            "swipe" answer the history as it is (no new input); "continue" extends
            `continue_text`; "impersonate" has the model write the person's next line, stored
            as `user/message` with origin agent and source "impersonation".
        continue_text: the reply being continued; sent as the last assistant message, and the
            settled reply is it plus the new text (SillyTavern continue without prefill).
        continues: (session, seq) of the message being continued (kept in the reply's body).
        instruction: a final system message for this request only (the continue nudge or the
            impersonation prompt); recorded in the step's `request/assembly` event.
        speaker, persona: the name and persona id the person writes under now; every user
            message the step stores keeps them (`speaker`, `persona` in its body; not `name`,
            which an imported line's body holds and the request sends as OpenAI `name`), so a later
            rename or persona switch relabels no old line (issue 20 item 6).
    """

    type: str = "normal"
    continue_text: str = ""
    continues: tuple[int, int] | None = None
    instruction: str = ""
    speaker: str = ""
    persona: int | None = None

    def speaker_fields(self) -> dict[str, Any]:
        """`{"speaker"?, "persona"?}` for a user message's body (empty when not set)."""
        fields: dict[str, Any] = {"speaker": self.speaker} if self.speaker else {}
        if self.persona is not None:
            fields["persona"] = self.persona
        return fields

    def __post_init__(self) -> None:
        if self.type not in GENERATION_TYPES:
            raise ValueError(f"unknown generation type {self.type!r}; use one of {', '.join(GENERATION_TYPES)}")


def join_continuation(original: str, addition: str) -> str:
    """The continued reply: the original, a space when neither side has one (SillyTavern's
    default `continue_postfix` " "), then the new text."""
    if not original or not addition or original[-1].isspace() or addition[0].isspace():
        return original + addition
    return f"{original} {addition}"


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Assembly:
    """What the assembler decided for one step.

    Attributes:
        system: the system section's text ("" for none); admitted as `system/message` when it
            differs from the effective one.
        config: call parameters (temperature, max_tokens, …); never history.
        model: model id for this request ("" = the provider's default).
        meta: assembly facts for the trace (resources used, token estimate, …).
        records: events the assembler wants kept with this step (e.g. world-info timed effects),
            appended just before the request header, so they exist only for steps really sent.
        request: a projected request (the `projection` strategy): when set, this exact message
            array is sent and recorded in a `request/assembly` event, no system section is
            admitted, and nothing of it but the person's input enters the chat history.
        request_parts: one `{"role", "source", "identifier", "ref"}` per projected message
            (where it came from), recorded with it.
        input: the claimed input as the assembler expanded it (macros: SillyTavern stores the person's
            text expanded when it is sent), one text per claimed one; None = admitted as claimed.
        context: runtime context for this step, `(identifier, text)` each: admitted as
            `user/message` (origin engine, source "context") just before the input, so it
            enters durable history; a context whose identifier's newest admitted text on the
            surface is the same is not admitted again (context-snapshot reuse; seed 000 §2.2).
        omit: refs of surface messages this request leaves out to fit the context (the oldest
            history, whole messages; `assembly.fit`); they stay in the log and on the surface.
        rewrite: the request message sent instead of a surface message's own, by ref (regex
            scripts, issue 18): the log keeps the raw text; the sent message is kept in the
            `request/assembly` record (`rewritten`, after `append`), which the trace points at.
    """

    system: str
    config: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    records: tuple[NewEvent, ...] = ()
    request: tuple[dict[str, Any], ...] | None = None
    request_parts: tuple[dict[str, Any], ...] = ()
    context: tuple[tuple[str, str], ...] = ()
    input: tuple[str, ...] | None = None
    omit: frozenset[tuple[int, int]] = frozenset()
    rewrite: Mapping[tuple[int, int], dict[str, Any]] = field(default_factory=dict)


CONTEXT_SOURCE = "context"
"""`source` of a runtime-context `user/message` a strategy admits (origin engine)."""


def context_events(history: list[SurfaceMessage], context: tuple[tuple[str, str], ...]) -> list[NewEvent]:
    """Context messages to admit: those whose identifier's newest admitted text differs."""
    newest: dict[str, str] = {}
    for message in history:
        if message.source == CONTEXT_SOURCE and isinstance(message.body.get("context"), str):
            newest[message.body["context"]] = message.content
    return [NewEvent(EventKind.USER_MESSAGE, "user", {"content": text, "context": ident}, Origin.ENGINE,
                     CONTEXT_SOURCE)
            for ident, text in context if newest.get(ident) != text]


class Assembler(Protocol):
    """Builds the step's system section and call config from history plus the claimed input."""

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly: ...


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
    answered "not run" and the turn ends there (issue 19: the limit named when hit)."""

    limit: int
    message: str


StepUpdate = StepStarted | TextDelta | ReasoningDelta | StepSettled | ToolResultStored | TurnLimitReached
"""What `run_step` yields, in order: StepStarted, deltas…, StepSettled; in a turn with tools,
then one ToolResultStored per call and the next step's StepStarted…, or TurnLimitReached."""


class StepFailed(ProviderError):
    """The provider failed mid-step; `attempt` is the stored `assistant/attempt` (or None),
    `cause` the classified provider error."""

    def __init__(self, cause: ProviderError, attempt: Event | None) -> None:
        super().__init__(str(cause), status=cause.status, param=cause.param)
        self.category = cause.category
        self.cause = cause
        self.attempt = attempt


def admit_opening(log: SessionLog, session_id: int, text: str, meta: dict[str, Any] | None = None) -> Event:
    """Append the opening reference (a greeting): role assistant, origin engine, never an agent reply
    (seed 000 §3: "Greeting is an opening reference, never a fabricated assistant reply")."""
    body = {"content": text, **(meta or {})}
    opening = NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", body, Origin.ENGINE, OPENING_SOURCE)
    return log.append(session_id, [opening])[0]


def _attempt(text: str, reasoning: str, extra: dict[str, Any], origin: Origin | None = None,
             source: str | None = None, role: str = "assistant") -> NewEvent:
    """The `assistant/attempt` that keeps a reply cut short (cancel, error, crash)."""
    body: dict[str, Any] = {"content": text, **extra}
    if reasoning:
        body["reasoning"] = reasoning
    return NewEvent(EventKind.ASSISTANT_ATTEMPT, role, body, origin, source)


class StepBusy(TavernError):
    """Another process is streaming a reply in this session right now."""


INTERRUPTED_REASON = "the app was closed while it was streaming"
"""Why a recovered reply is partial (shown with it; issue 23 item 1)."""

CHECKPOINT_EVERY = 0.1
"""Seconds between `stream/checkpoint` events at most while text arrives (coalesced: one per
interval, never one per token); a hard kill loses at most this much of a reply. The write
cost per checkpoint is measured in benchmarks/checkpoint_cost.py."""


@dataclass(frozen=True, slots=True)
class Claim:
    """A step taken in the database (`StepClaims.claim`).

    Attributes:
        token: identifies this claim (release and heartbeat touch only it).
        displaced: why a previous owner lost the step ("its process ended", …), None when
            nobody held it.
    """

    token: str
    displaced: str | None = None


class StepClaims(Protocol):
    """Step ownership as a lease (issue 23 item 4): one atomic claim per playthrough, owner pid +
    host + heartbeat, lost at once by a dead owner. `store.StepLeases` implements it."""

    def claim(self, session_id: int, stale_after: float) -> Claim:
        """Take the step of the session's playthrough; raises `StepBusy` when a live owner has it."""
        ...

    def heartbeat(self, token: str) -> None:
        """Mark the claim alive now."""
        ...

    def release(self, token: str) -> None:
        """Give the claim back."""
        ...


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
    decides it (issue 22: opening a 5,000-message chat must not read its whole surface); other
    logs are read whole."""
    reader = getattr(log, "newest_own_events", None)
    if reader is None:
        return _open_step_in(log.surface_events(session_id), session_id)
    checkpoints: list[Event] = []
    before: int | None = None
    batch = 32
    while True:
        events = reader(session_id, batch, before)
        for event in events:  # newest first
            if event.kind == EventKind.STREAM_CHECKPOINT:
                checkpoints.append(event)
            elif event.kind == EventKind.REQUEST_HEADER:
                checkpoints.reverse()
                last = checkpoints[-1] if checkpoints else event
                return OpenStep(checkpoints, last.created_at)
            elif _settles(event):
                return None
        if len(events) < batch:
            return None  # the session's start: no header after any settlement
        before = events[-1].seq
        batch = min(batch * 4, 4096)


def _settles(event: Event) -> bool:
    """Whether `event` settles the step before it (see `_open_step_in`)."""
    if event.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.ASSISTANT_ATTEMPT, EventKind.USER_MESSAGE):
        return True
    return (event.kind == EventKind.SURFACE_REPLACED and event.source == SUMMARY_SOURCE
            and bool(event.body.get("request")))


def _open_step_in(surface: list[Event], session_id: int) -> OpenStep | None:
    """`open_step` on the session's surface events, already read."""
    own = [e for e in surface if e.session_id == session_id]
    header: Event | None = None
    checkpoints: list[Event] = []
    for event in own:
        if event.kind == EventKind.REQUEST_HEADER:
            header, checkpoints = event, []
        elif event.kind == EventKind.STREAM_CHECKPOINT:
            checkpoints.append(event)
        elif _settles(event):
            # A user message after the header is an impersonation settling (the person's own
            # message always comes before its step's header); a compaction's summary settles
            # its own request.
            header, checkpoints = None, []
    if header is None:
        return None
    last = checkpoints[-1] if checkpoints else header
    return OpenStep(checkpoints, last.created_at)


STAGES = ("claim", "assemble", "admit", "record", "first_byte", "stream")
"""The stages a step's `timing.stages` names, in order (milliseconds each): the lease, recovery and
inbox claim; assembling the request; admitting the input (and system/context); writing the request's
records, header and trace record; waiting for the first token after the request went out; streaming
from the first token to the last. Recorded with every settled reply and attempt so `tavern trace show`
and the trace pane can say where a slow step spent its time (seed 000 "One step")."""


def stages_text(stages: Mapping[str, Any]) -> str:
    """A step's `timing.stages` as one line, "claim 2 ms · assemble 15 ms · …", in `STAGES` order
    (names not in it after them); "" for none."""
    names = [n for n in STAGES if n in stages] + sorted(n for n in stages if n not in STAGES)
    return " · ".join(f"{name.replace('_', ' ')} {float(stages[name]):.0f} ms" for name in names
                      if isinstance(stages[name], (int, float)))


class _Stopwatch:
    """Milliseconds between successive `lap(name)` calls, on a monotonic clock."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round((now - self._last) * 1000, 1)
        self._last = now


@dataclass(frozen=True, slots=True)
class _Opened:
    """What a step's opening wrote and decided, up to the request it sends."""

    user_event: Event | None
    trace_event: Event
    request: ChatRequest
    model: str
    claimed: tuple[Event, ...] = ()
    stages: dict[str, float] = field(default_factory=dict)
    """Milliseconds each opening stage took (`STAGES`), for the trace's timing."""


class _Lease:
    """The claim a step holds while it runs, with its heartbeat task (beats every `every` s)."""

    def __init__(self, claims: StepClaims | None, every: float) -> None:
        self.claims = claims
        self.every = every
        self.token: str | None = None
        self._beat: asyncio.Task[None] | None = None

    async def take(self, session_id: int, stale_after: float) -> Claim | None:
        if self.claims is None:
            return None
        claim = await asyncio.to_thread(self.claims.claim, session_id, stale_after)
        self.token = claim.token
        self._beat = asyncio.ensure_future(self._beating(claim.token))
        return claim

    async def _beating(self, token: str) -> None:
        assert self.claims is not None
        while True:
            await asyncio.sleep(self.every)
            try:
                await asyncio.to_thread(self.claims.heartbeat, token)
            except StoreError:
                pass  # a busy database: the next beat tries again

    async def release(self) -> None:
        if self._beat is not None:
            self._beat.cancel()
        if self.claims is None or self.token is None:
            return
        token, self.token = self.token, None
        try:
            await until_done(asyncio.to_thread(self.claims.release, token))
        except StoreError:
            pass  # left behind, the row names this live process and a token it no longer holds: taken over


@dataclass(frozen=True, slots=True)
class StepOptions:
    """How a step (or a turn with tools) runs: `run_step`'s keywords, passed down whole to the
    single step and the tool turn, so the three never repeat their lists (meanings as `run_step`)."""

    generation: Generation = Generation()
    checkpoint_every: float = CHECKPOINT_EVERY
    clock: Callable[[], float] = time.monotonic
    stale_after: float = 75.0
    now: Callable[[], datetime] = _utc_now
    claim: bool = False
    claims: StepClaims | None = None
    tools: ToolRunner | None = None
    max_steps: int = DEFAULT_MAX_STEPS
    at_boundary: BoundaryClaim | None = None


async def run_step(
    log: SessionLog | AsyncSessionLog,
    session_id: int,
    provider: Provider,
    assemble: Assembler,
    text: str | None,
    *,
    generation: Generation = Generation(),
    checkpoint_every: float = CHECKPOINT_EVERY,
    clock: Callable[[], float] = time.monotonic,
    stale_after: float = 75.0,
    now: Callable[[], datetime] = _utc_now,
    claim: bool = False,
    claims: StepClaims | None = None,
    tools: ToolRunner | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    at_boundary: BoundaryClaim | None = None,
) -> AsyncIterator[StepUpdate]:
    """`_run_step` holding the step's claim (`claims`, when given) from its opening to its
    settlement: a second step in the playthrough meanwhile gets `StepBusy`, and a killed
    owner's claim is taken over by the next step at once. Arguments, yields and errors as
    `_run_step`; with `tools`, the whole turn (`_tool_turn`: calls, results and the next steps,
    at most `max_steps` requests, steers claimed at each boundary by `at_boundary`) holds it.
    The keywords travel as one `StepOptions`."""
    options = StepOptions(generation, checkpoint_every, clock, stale_after, now, claim, claims, tools, max_steps,
                          at_boundary)
    lease = _Lease(claims, max(1.0, min(10.0, stale_after / 3)))
    if tools is not None and generation.type in TOOL_GENERATIONS:
        steps = _tool_turn(log, session_id, provider, assemble, text, options, lease, tools)
    else:
        steps = _run_step(log, session_id, provider, assemble, text, options, lease)
    try:
        async with aclosing(steps):
            async for update in steps:
                yield update
    finally:
        await lease.release()


async def _run_step(
    log: SessionLog | AsyncSessionLog,
    session_id: int,
    provider: Provider,
    assemble: Assembler,
    text: str | None,
    options: StepOptions,
    lease: _Lease | None,
    turn: _TurnStep | None = None,
) -> AsyncIterator[StepUpdate]:
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
            without new input (regenerate, swipe, continue, impersonate) unless `claim`.
        options: how it runs (`StepOptions`; its `tools`, `max_steps`, `at_boundary` and
            `claims` are the turn's and `run_step`'s, unused here):
        generation: what the step asks the model for (continue text, impersonation, …).
        checkpoint_every: seconds between `stream/checkpoint` events while streaming at most
            (coalesced). A checkpoint the database refuses (busy) is skipped: the text stays
            in memory and goes into the next one; the settlement retries until it lands.
        clock: monotonic seconds (injectable for tests).
        stale_after: seconds without activity after which an unsettled step counts as crashed
            (a live stream checkpoints at least every `checkpoint_every` plus the provider's
            read timeout); a fresher one means another process is replying.
        now: wall-clock UTC time, compared with event times (injectable for tests).
        claim: with `text` None, claim the inbox's pending batch as this step's input (a
            queued line answered after the running reply settled).
        lease: the step's lease, taken first thing in the opening (`run_step`); with one, an
            unsettled step found then is recovered at once (its owner lost the lease).
        turn: this step's place in a turn with tools (`_tool_turn`): the tools offered, the
            turn's first trace, the steers claimed at the boundary; None for a lone step.

    Yields:
        `StepStarted`, then `TextDelta`/`ReasoningDelta` as they arrive, then `StepSettled`.

    Raises:
        StepBusy: another process is streaming a reply in this session, or is between its
            inbox claim and its admission (nothing is written).
        InboxEmpty: `claim` and nothing is pending (nothing is written).
        StepFailed: the provider failed, or the stream was cut off (no `finish_reason` and no
            `[DONE]`); the partial reply is stored as `assistant/attempt`.
        asyncio.CancelledError: the caller cancelled; the partial reply is stored first. A
            cancel before the request is sent lets the step's opening writes finish, then
            stores an empty cancelled attempt (no `StepStarted` is yielded), so no step is
            left open.
    """
    generation, checkpoint_every, clock, now = options.generation, options.checkpoint_every, options.clock, options.now
    alog = awaited_log(log)
    placeholder = bool(getattr(provider, "placeholder", False))
    reply_origin, reply_source = (Origin.ENGINE, PLACEHOLDER_SOURCE) if placeholder else (None, None)
    impersonate = generation.type == "impersonate"
    if impersonate and not placeholder:
        reply_origin, reply_source = Origin.AGENT, IMPERSONATION_SOURCE
    reply_role = "user" if impersonate else "assistant"
    # The opening runs to its end even if cancelled meanwhile: half of it would leave a header
    # without a settlement (the session then looks busy) or an input without its step.
    opened, early_cancel = await until_done(_open(alog, session_id, provider, assemble, text, generation,
                                                  options.stale_after, now, options.claim, lease, turn))
    user_event, trace_event, request, model = opened.user_event, opened.trace_event, opened.request, opened.model
    retries_recorded = False
    if early_cancel is None:
        yield StepStarted(user_event, request, generation, opened.claimed, trace_event.ref)

    def settle_text(new: str) -> str:
        return join_continuation(generation.continue_text, new) if generation.type == "continue" else new

    context: dict[str, Any] = {}
    if generation.continues is not None:
        context["continues"] = list(generation.continues)
    timing: dict[str, Any] = {"submitted": now().isoformat()}
    context["timing"] = timing
    stages = timing["stages"] = dict(opened.stages)
    sent_at = time.perf_counter()  # the request goes out now; first_byte and stream count from here

    attempts: list[dict[str, Any]] = []  # this stream's HTTP attempts (`Attempts` events)

    def finish() -> None:
        if "first_byte" in stages:
            stages["stream"] = round((time.perf_counter() - sent_at) * 1000 - stages["first_byte"], 1)
        _finish_context(context, attempts, now)

    parts: list[str] = []
    reasoning: list[str] = []
    checkpointed = (0, 0)  # how much of parts/reasoning is already in checkpoints
    last_checkpoint = clock()
    usage: Usage | None = None
    finished: Finished | None = None
    calls: tuple[ToolCall, ...] = ()

    async def settle_attempt(extra: dict[str, Any]) -> Event:
        if not retries_recorded:
            await _record_retries(alog, session_id, trace_event, attempts, now)
        finish()
        return (await _settling(alog, session_id, [_attempt(settle_text("".join(parts)), "".join(reasoning),
                                                            {**extra, **context}, reply_origin, reply_source,
                                                            reply_role)]))[0]

    if early_cancel is not None:
        # Cancelled before the request went out: settle the step as cancelled before its first
        # byte, without the provider's attempts (they are still its previous request's).
        timing["last_byte"] = now().isoformat()
        await until_done(alog.append(session_id, [_attempt(settle_text(""), "", {"cancelled": True, **context},
                                                           reply_origin, reply_source, reply_role)]))
        raise early_cancel
    try:
        # aclosing: a consumer that stops early closes the provider's HTTP response at once.
        async with aclosing(provider.stream(request)) as stream:
            async for event in stream:
                if isinstance(event, Attempts):
                    attempts = [dict(a) for a in event.records]
                if not retries_recorded:  # the stream started: every earlier attempt is known now
                    retries_recorded = True  # first: a cancel during the append must not repeat it
                    await _record_retries(alog, session_id, trace_event, attempts, now)
                if isinstance(event, Attempts):
                    continue
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, ReasoningDelta):
                    reasoning.append(event.text)
                elif isinstance(event, Usage):
                    usage = event
                elif isinstance(event, ToolCalls):
                    calls = event.calls  # complete: the provider yields them once, at the end
                    continue
                elif isinstance(event, Finished):
                    finished = event
                    continue
                elif isinstance(event, ConfigAdjusted):
                    # The provider dropped or renamed rejected parameters (seed 000 §3): keep
                    # requested vs effective and each omission with the step, for the trace.
                    adjusted = {"requested": event.requested, "effective": event.effective, "omitted": event.omitted}
                    await alog.append(session_id, [NewEvent(CONFIG_ADJUSTED, None, adjusted)])
                    context["config"] = {"effective": event.effective, "omitted": event.omitted}
                    continue
                if isinstance(event, (TextDelta, ReasoningDelta)):
                    if "first_byte" not in timing:
                        timing["first_byte"] = now().isoformat()
                        stages["first_byte"] = round((time.perf_counter() - sent_at) * 1000, 1)
                    # Checkpoint before handing the delta on: what the caller has seen is durable.
                    if clock() - last_checkpoint >= checkpoint_every:
                        body = {"content": "".join(parts[checkpointed[0]:]),
                                "reasoning": "".join(reasoning[checkpointed[1]:])}
                        try:
                            await alog.append(session_id, [NewEvent(EventKind.STREAM_CHECKPOINT, None, body)])
                            checkpointed = (len(parts), len(reasoning))
                        except StoreError:
                            pass  # locked out: the text stays in memory and goes into the next checkpoint
                        last_checkpoint = clock()
                    yield event
    except (asyncio.CancelledError, GeneratorExit) as stop:
        # A cancel while the attempt is written waits for it; raised after it, unless this
        # already is one.
        _, cancel = await until_done(settle_attempt({"cancelled": True}))
        if cancel is not None and isinstance(stop, GeneratorExit):
            raise cancel from None
        raise
    except ProviderError as exc:
        error = {"category": exc.category, "message": str(exc), "status": exc.status}
        attempt, cancel = await until_done(settle_attempt({"error": error}))
        if cancel is not None:
            raise cancel from exc
        raise StepFailed(exc, attempt) from exc
    finish()
    if finished is None or (finished.finish_reason is None and not finished.saw_done):
        # Neither a finish_reason nor [DONE]: the connection closed mid-reply.
        cut = NetworkError("the connection closed before the reply finished (no finish_reason and no [DONE]); "
                           "the text that arrived is kept")
        error = {"category": cut.category, "message": str(cut), "status": None}
        attempt = (await _settling(alog, session_id, [_attempt(settle_text("".join(parts)), "".join(reasoning),
                                                               {"error": error, **context}, reply_origin,
                                                               reply_source, reply_role)]))[0]
        raise StepFailed(cut, attempt)

    body: dict[str, Any] = {"content": settle_text("".join(parts)), "provider": provider.name, "model": model,
                            "finish_reason": finished.finish_reason if finished else None, **context}
    if reasoning:
        body["reasoning"] = "".join(reasoning)
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                         "total_tokens": usage.total_tokens}
    if calls and turn is not None and not impersonate:
        calls = with_ids(calls, trace_event.ref)
        body[TOOL_CALLS_KEY] = [c.to_wire() for c in calls]  # sent back exactly so in the next step
    else:
        calls = ()  # no tools were offered: a stray call is not run (its text, if any, stays)
    kind = EventKind.USER_MESSAGE if impersonate else EventKind.ASSISTANT_MESSAGE
    if impersonate:
        body.update(generation.speaker_fields())
    settled = (await _settling(alog, session_id, [NewEvent(kind, reply_role, body, reply_origin, reply_source)]))[0]
    yield StepSettled(settled, usage, calls)


TOOL_GENERATIONS = ("normal", "regenerate", "swipe")
"""Generation types whose turn offers tools (a continue or an impersonation never does)."""

BoundaryClaim = Callable[[], Awaitable[tuple[Event | None, list[PendingItem]]]]
"""Claims the steers at a step boundary (`InboxService.claim_at_step_boundary`, off the loop):
(the claim event or None, the claimed items)."""


@dataclass(frozen=True, slots=True)
class _TurnStep:
    """One step's place in a turn with tools.

    Attributes:
        step: 1 for the turn's first request, 2 after the first tool results, …
        tools: the OpenAI `tools` array this step offers.
        first, previous: refs of the turn's first and the previous step's trace record.
        results: the previous boundary's tool results, as the trace names them.
        steers: the steers claimed at this boundary (claim event, items), None for none.
    """

    step: int
    tools: tuple[dict[str, Any], ...]
    first: tuple[int, int] | None = None
    previous: tuple[int, int] | None = None
    results: tuple[dict[str, Any], ...] = ()
    steers: tuple[Event | None, list[PendingItem]] | None = None


def _turn_header(turn: _TurnStep) -> dict[str, Any]:
    """`request/header` fields of a step in a tool turn: the tools offered (names, schema hash,
    and the array itself, `offered`, so an export or a replay sends it exactly; it holds no
    secret: `Toolbox.offered` scrubs configured ones) and the step number."""
    return {"tools": {**tools_digest(turn.tools), "offered": [dict(t) for t in turn.tools]}, "step": turn.step}


def _turn_trace(turn: _TurnStep) -> dict[str, Any]:
    """Trace fields linking a turn's steps: step number, the first and previous records, the
    tools offered and the results (refused ones named, with why) this request answers."""
    link = {"step": turn.step, "first": list(turn.first) if turn.first else None,
            "previous": list(turn.previous) if turn.previous else None}
    return {"turn": link, "tools": tools_digest(turn.tools), "tool_results": [dict(r) for r in turn.results]}


def _with_transaction(messages: list[dict[str, Any]], sent: list[SentMessage],
                      transaction: list[SurfaceMessage]) -> tuple[list[dict[str, Any]], list[SentMessage]]:
    """A projected request with the turn's tool calls and results put back as they are stored
    (seed 000 §2: "Native history, input and tool transactions retain their protected order"):
    before the steers this step claimed, else at the end."""
    at = next((i for i, m in enumerate(sent) if m.source == "input"), len(messages))
    wire = [m.to_request() for m in transaction]
    extra = [SentMessage(m.role, "history", m.ref, None, message_hash(w)) for m, w in zip(transaction, wire)]
    return messages[:at] + wire + messages[at:], sent[:at] + extra + sent[at:]


async def _tool_turn(
    log: SessionLog | AsyncSessionLog,
    session_id: int,
    provider: Provider,
    assemble: Assembler,
    text: str | None,
    options: StepOptions,
    lease: _Lease | None,
    tools: ToolRunner,
) -> AsyncIterator[StepUpdate]:
    """A turn with tools (seed 000 §1: "tool-call → tool-role tool/result → perhaps the next
    step"): a step; when its reply asks for tools, each call runs (`_run_calls`) and its
    `tool/result` is stored; the steers queued meanwhile are claimed (`at_boundary`); then the
    next step, its own request and trace linked to the turn's first. At most `max_steps`
    requests: the calls of the last are answered "not run" naming the limit (`TurnLimitReached`).

    A cancel keeps what settled: the stored reply with its calls and the results already
    stored; each call not run yet gets a "cancelled" result, so no call is left unanswered.
    Arguments, other yields and errors as `_run_step`.
    """
    alog = awaited_log(log)
    limit = max(1, options.max_steps)
    turn = _TurnStep(1, await tools.offered())
    step_text, step_options = text, options
    while True:
        settled: StepSettled | None = None
        started: StepStarted | None = None
        steps = _run_step(log, session_id, provider, assemble, step_text, step_options,
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
        calls, done = settled.calls, set()
        try:
            if turn.step >= limit:
                message = (f"this turn reached its limit of {limit} requests ([tools] max_steps = {limit}); "
                           "the tool calls of its last reply were not run")
                for call in calls:
                    outcome = ToolOutcome(f"not run: {message}", "limit", {"reason": message, "limit": limit})
                    stored = (await _settling(alog, session_id, [result_event(call, outcome)]))[0]
                    done.add(call.id)
                    yield ToolResultStored(stored, call, outcome)
                yield TurnLimitReached(limit, message)
                return
            results: list[dict[str, Any]] = []
            for call in calls:
                outcome = await _run_call(tools, call)
                stored = (await _settling(alog, session_id, [result_event(call, outcome)]))[0]
                done.add(call.id)
                results.append(result_summary(stored.ref, stored.body))
                yield ToolResultStored(stored, call, outcome)
            steers = await _claim_steers(alog, session_id, options.at_boundary, options.stale_after, options.now)
        except (asyncio.CancelledError, GeneratorExit):
            await until_done(_answer_cancelled(alog, session_id, pending_calls(calls, done)))
            raise
        turn = _TurnStep(turn.step + 1, await tools.offered(), turn.first or started.trace, started.trace,
                         tuple(results), steers)
        step_text = None  # no continue text, no one-off instruction, nothing more to claim
        step_options = replace(options, generation=Generation(options.generation.type), claim=False)


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
        await _settling(log, session_id, [result_event(c, ToolOutcome(f"not run: {why}", "cancelled",
                                                                       {"reason": why})) for c in calls])


_Steers = tuple[Event | None, list[PendingItem]]


async def _answer_interrupted(log: AsyncSessionLog, session_id: int, surface: list[Event]) -> None:
    """One "interrupted" `tool/result` per call a crash left without one (`unanswered_calls`)."""
    orphans = unanswered_calls([e for e in surface if e.session_id == session_id])
    if orphans:
        await log.append(session_id, [result_event(c, ToolOutcome(f"not run: {INTERRUPTED_CALL}", "cancelled",
                                                                   {"reason": INTERRUPTED_CALL})) for c in orphans])


async def _claim_steers(log: AsyncSessionLog, session_id: int, at_boundary: BoundaryClaim | None,
                        stale_after: float, now: Callable[[], datetime]) -> _Steers | None:
    """The steers queued while the step ran, claimed at its boundary (seed 000 §5: next-step
    items are claimed between steps); None when there are none, or another process's claim is
    still being admitted (they wait for the next boundary or turn)."""
    try:
        if at_boundary is not None:
            claim_event, batch = await at_boundary()
        else:
            plan = ClaimPlan(session_id, NEXT_STEP, stale_after=stale_after, now=now)
            stored, _ = await change_async(log, session_id, plan)
            claim_event, batch = plan.claimed(stored)
    except ClaimPending:
        return None
    return (claim_event, batch) if claim_event is not None and batch else None


SETTLE_TRIES = 12
"""How often a settlement is tried against a busy database (each try waits out the store's
busy timeout, 5 s on SQLite), before the step gives up with `StoreBusy`."""


async def _settling(log: AsyncSessionLog, session_id: int, events: list[NewEvent]) -> list[Event]:
    """Append a step's settlement, trying again while the database is busy (issue 23 item 2:
    a lock never costs the text that arrived; it waits in memory until it lands).

    Raises:
        StoreBusy: still busy after `SETTLE_TRIES` tries.
    """
    for attempt in range(SETTLE_TRIES):
        try:
            return await log.append(session_id, events)
        except StoreBusy:
            if attempt == SETTLE_TRIES - 1:
                raise
            await asyncio.sleep(0.2)
    raise AssertionError("unreachable")


async def _open(log: AsyncSessionLog, session_id: int, provider: Provider, assemble: Assembler, text: str | None,
                generation: Generation, stale_after: float, now: Callable[[], datetime],
                claim: bool = False, lease: _Lease | None = None, turn: _TurnStep | None = None) -> _Opened:
    """A step's opening, in order: recover a stale step or refuse a live one; the inbox insert
    and claim (one compare-and-append); assemble on history plus the claimed batch; admit
    system, context and the batch; records and the request header; the trace record. Returns
    what the stream needs. An assembler that raises puts the claimed batch back in the inbox.
    With a `lease`, it is taken first (one atomic insert) and released again if the opening fails.

    Raises:
        StepBusy: another live process holds the step's lease or is streaming in this session
            (nothing is written).
        InboxEmpty: `claim` without `text` and nothing pending (nothing is written).
    """
    held = await lease.take(session_id, stale_after) if lease is not None else None
    try:
        return await _open_held(log, session_id, provider, assemble, text, generation, stale_after, now, claim, held,
                                turn)
    except BaseException:
        if lease is not None:
            await lease.release()
        raise


async def _open_held(log: AsyncSessionLog, session_id: int, provider: Provider, assemble: Assembler,
                     text: str | None, generation: Generation, stale_after: float, now: Callable[[], datetime],
                     claim: bool, held: Claim | None, turn: _TurnStep | None = None) -> _Opened:
    """`_open` once the step's lease is held (`held`; None without leases: the old staleness check)."""
    watch = _Stopwatch()
    surface = await log.surface_events(session_id)
    step = _open_step_in(surface, session_id)
    # Holding the lease, an unsettled step is its dead owner's: settle it now, not after a timeout.
    recovered = _recovery(step, -1.0 if held is not None else stale_after, now)
    if recovered is not None:
        await log.append(session_id, [recovered])
    elif step is not None:
        raise StepBusy("a reply is being written in this playthrough by another tavern window or command; "
                       "wait for it or stop it there")
    # A crash between a reply's tool calls and their results: answer them before anything is sent.
    await _answer_interrupted(log, session_id, surface)
    claim_event: Event | None = None
    batch: list[PendingItem] = []
    if turn is not None and turn.steers is not None:
        claim_event, batch = turn.steers  # claimed at the turn's step boundary
    elif text is not None or claim:
        claim_event, batch = await _claim_inbox(log, session_id, text, stale_after, now,
                                                None if recovered is not None else surface)
    history = surface_of(await log.surface_events(session_id))
    # A later step of a tool turn: a projection rebuilds history from text, so the turn's calls
    # and results go to the request as they are (`_with_transaction`), not through the assembler.
    transaction = turn_transaction(history, turn.first) if turn is not None and turn.first is not None else []
    if transaction:
        kept = {m.ref for m in transaction}
        history = [m for m in history if m.ref not in kept]
    watch.lap("claim")
    try:
        assembly = assemble(history, [item.content for item in batch])
    except BaseException:
        if claim_event is not None:  # nothing of the batch was admitted: put it back
            await change_async(log, session_id, restore_splices)
        raise
    watch.lap("assemble")

    admitted: list[NewEvent] = []
    current_system = history[0].content if history and history[0].source == SYSTEM_PROMPT_SOURCE else None
    if assembly.system and assembly.system != current_system:
        admitted.append(NewEvent(EventKind.SYSTEM_MESSAGE, "system", {"content": assembly.system},
                                 source=SYSTEM_PROMPT_SOURCE))
    admitted += context_events(history, assembly.context)
    # One user/message per claimed item, as the assembler expanded it (`Assembly.input`, one text
    # per claimed one); `claim` resolves the claim (engine.inbox).
    contents = (list(assembly.input) if assembly.input is not None and len(assembly.input) == len(batch)
                else [item.content for item in batch])
    admitted += [NewEvent(EventKind.USER_MESSAGE, "user", {"content": content, CLAIM_KEY: claim_event.seq,
                                                           **generation.speaker_fields()},
                          item.origin) for item, content in zip(batch, contents) if claim_event is not None]
    stored = await log.append(session_id, admitted)
    watch.lap("admit")
    claimed = tuple(stored[len(stored) - len(batch):]) if batch else ()
    user_event = claimed[-1] if claimed else None

    # Messages this request alone carries (never part of the surface), kept for the trace.
    extra: list[dict[str, Any]] = []
    records = list(assembly.records)
    if assembly.request is not None:
        origins = [dict(p) for p in assembly.request_parts]
        inputs = iter(claimed)  # the input's events exist now: point its parts at them, in order
        for part in origins:
            if part.get("source") == "input" and part.get("ref") is None:
                event = next(inputs, None)
                if event is not None:
                    part["ref"] = list(event.ref)
        records.append(NewEvent(EventKind.REQUEST_ASSEMBLY, None, {
            "messages": list(assembly.request), "parts": origins, "generation": generation.type}))
    else:
        if generation.type == "continue":
            extra.append({"role": "assistant", "content": generation.continue_text})
        if generation.instruction:
            extra.append({"role": "system", "content": generation.instruction})
        rewritten = [{"ref": list(ref), "message": dict(m)} for ref, m in assembly.rewrite.items()]
        if extra or rewritten:
            assembly_body: dict[str, Any] = {"append": extra, "generation": generation.type}
            if rewritten:
                assembly_body["rewritten"] = rewritten
            records.append(NewEvent(EventKind.REQUEST_ASSEMBLY, None, assembly_body))
    model = assembly.model or provider.model
    header = {"provider": provider.name, "model": model, "config": assembly.config, "stream": True,
              "assembly": assembly.meta, "generation": generation.type}
    offered = turn.tools if turn is not None else ()
    if turn is not None:
        header.update(_turn_header(turn))
    stored_records = await log.append(session_id, [*records, NewEvent(EventKind.REQUEST_HEADER, None, header)])
    header_event = stored_records[-1]
    assembly_event = next((e for e in stored_records if e.kind == EventKind.REQUEST_ASSEMBLY), None)
    if assembly.request is not None:
        messages = [dict(m) for m in assembly.request]
        assert assembly_event is not None
        sent = [SentMessage(m["role"], str(part.get("source", "request-only")), assembly_event.ref, i, message_hash(m))
                for i, (m, part) in enumerate(zip(messages, list(assembly.request_parts) + [{}] * len(messages)))]
        if transaction:
            messages, sent = _with_transaction(messages, sent, transaction)
    else:
        surface = [m for m in surface_of(await log.surface_events(session_id))
                   if sent_to_model(m) and m.ref not in assembly.omit]
        messages = [_rewritten(m, assembly.rewrite) for m in surface] + extra
        # A rewritten message points at its sent text in the request/assembly record (after `append`).
        slot = {tuple(r["ref"]): len(extra) + i for i, r in enumerate(rewritten)}
        sent = [SentMessage(m.role, _source_of(m, claimed), assembly_event.ref, slot[m.ref], message_hash(message))
                if m.ref in slot and assembly_event is not None
                else SentMessage(m.role, _source_of(m, claimed), m.ref, None, message_hash(message))
                for m, message in zip(surface, messages)]
        if extra:
            assert assembly_event is not None
            sent += [SentMessage(m["role"], "request-only", assembly_event.ref, i, message_hash(m))
                     for i, m in enumerate(extra)]
    # The trace record: references and hashes of exactly what is sent, no bodies (seed 000 §4).
    trace_event = (await log.append(session_id, [trace_record(
        header_event, provider.name, model, strategy=assembly.meta.get("strategy", "compat"),
        generation=generation.type, config=assembly.config, submitted_at=now().isoformat(),
        context=assembly.meta.get("context"), sent=sent, strategy_snapshot=assembly.meta.get("strategy_snapshot"),
        replay_of=assembly.meta.get("replay_of"), **_inbox_trace(claim_event, batch),
        **(_turn_trace(turn) if turn is not None else {}))]))[0]
    watch.lap("record")
    return _Opened(user_event, trace_event, ChatRequest(messages, model, dict(assembly.config), tuple(offered)), model,
                   claimed, watch.laps)


class InboxEmpty(TavernError):
    """A step asked to claim the inbox found nothing pending."""


async def _claim_inbox(log: AsyncSessionLog, session_id: int, text: str | None, stale_after: float,
                       now: Callable[[], datetime],
                       surface: list[Event] | None) -> tuple[Event | None, list[PendingItem]]:
    """Queue `text` (if any) and claim the pending batch, in one compare-and-append; a claim a
    crash left unadmitted (older than `stale_after`) is put back first, so it is in the batch.

    Raises:
        StepBusy: another process's claim is not admitted yet (it is opening a step now).
        InboxEmpty: nothing to claim.
    """
    plan = ClaimPlan(session_id, NEXT_TURN, insert=text, stale_after=stale_after, now=now)
    try:
        stored, _ = await change_async(log, session_id, plan, surface)
    except ClaimPending as exc:
        raise StepBusy(str(exc)) from exc
    claim_event, batch = plan.claimed(stored)
    if claim_event is None:
        raise InboxEmpty("nothing is queued in this playthrough's inbox")
    return claim_event, batch


def _inbox_trace(claim_event: Event | None, batch: list[PendingItem]) -> dict[str, Any]:
    """The trace's `inbox` field: the claim and, per claimed item, the splice that queued it
    (references only: queued text never enters a trace body)."""
    if claim_event is None:
        return {}
    return {"inbox": {"claim": list(claim_event.ref), "items": [{"id": i.id, "ref": list(i.ref)} for i in batch]}}


def _rewritten(message: SurfaceMessage, rewrite: Mapping[tuple[int, int], dict[str, Any]]) -> dict[str, Any]:
    sent = rewrite.get(message.ref)
    return dict(sent) if sent is not None else message.to_request()


def _source_of(message: SurfaceMessage, claimed: tuple[Event, ...]) -> str:
    if message.source == SYSTEM_PROMPT_SOURCE:
        return "system"
    if message.source == CONTEXT_SOURCE:
        return "context"
    return "input" if any(message.ref == e.ref for e in claimed) else "history"


async def _record_retries(log: AsyncSessionLog, session_id: int, trace_event: Event, attempts: list[dict[str, Any]],
                          now: Callable[[], datetime]) -> None:
    """One more `trace/request` record per retry the provider made (seed 000 §4: a trace
    record per provider request, retries included): the same message references and hashes,
    the attempt's own call config and omissions, `attempt` n and `retry_of` the first record.
    Nothing is written when the first request was the only one. `attempts`: the stream's own
    (`Attempts` events), never the provider's shared state."""
    if len(attempts) < 2:
        return
    first = trace_event.body
    await log.append(session_id, [NewEvent(TRACE_REQUEST, None, {
        **first, "attempt": n, "retry_of": list(trace_event.ref), "config": dict(attempt.get("config") or {}),
        "omitted": dict(attempt.get("omitted") or {}), "submitted_at": now().isoformat()})
        for n, attempt in enumerate(attempts[1:], start=2)])


def _finish_context(context: dict[str, Any], attempts: list[dict[str, Any]], now: Callable[[], datetime]) -> None:
    """Last byte time and the stream's attempts (status, config, omissions; never
    credentials) go with the settled reply, for the trace."""
    context["timing"]["last_byte"] = now().isoformat()
    if attempts:
        context["attempts"] = [dict(a) for a in attempts]


def recover_interrupted(log: SessionLog, session_id: int, *, stale_after: float = 75.0,
                        now: Callable[[], datetime] = _utc_now, claims: StepClaims | None = None) -> Event | None:
    """Settle a step a crash left open: what its checkpoints hold becomes one `assistant/attempt`
    (body `recovered: true` and an `error` saying why; empty when nothing had arrived).
    Idempotent.

    With `claims`, the step's lease decides (issue 23 item 4): when no live owner holds it (its
    owner died, or never claimed), the step is settled at once; a live owner's step is left
    alone. Without, a step quiet for `stale_after` seconds is settled, a fresher one left alone.

    Returns:
        The attempt appended, or None when nothing was settled.
    """
    if claims is None:
        recovered = _recovery(open_step(log, session_id), stale_after, now)
        return log.append(session_id, [recovered])[0] if recovered is not None else None
    step = open_step(log, session_id)
    if step is None:
        return None
    try:
        claim = claims.claim(session_id, stale_after)
    except StepBusy:
        return None
    try:
        recovered = _recovery(open_step(log, session_id), -1.0, now)
        return log.append(session_id, [recovered])[0] if recovered is not None else None
    finally:
        claims.release(claim.token)


def _recovery(step: OpenStep | None, stale_after: float, now: Callable[[], datetime]) -> NewEvent | None:
    """The attempt that settles `step` when it has been quiet for `stale_after` seconds, else None."""
    if step is None or (now() - step.last_activity).total_seconds() < stale_after:
        return None
    text = "".join(str(e.body.get("content", "")) for e in step.checkpoints)
    thought = "".join(str(e.body.get("reasoning", "")) for e in step.checkpoints)
    why = {"category": "interrupted", "message": f"{INTERRUPTED_REASON}; the text that had arrived is kept",
           "status": None}
    return _attempt(text, thought, {"recovered": True, "error": why})
