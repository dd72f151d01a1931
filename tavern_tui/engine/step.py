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
import time
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from tavern_tui.engine.events import Event, EventKind, NewEvent, Origin
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
from tavern_tui.engine.stream import ChatRequest, ConfigAdjusted, Finished, Provider, ReasoningDelta, TextDelta, Usage
from tavern_tui.engine.trace import TRACE_REQUEST, TRACE_SCHEMA, SentMessage, message_hash
from tavern_tui.errors import NetworkError, ProviderError, TavernError

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
    """

    type: str = "normal"
    continue_text: str = ""
    continues: tuple[int, int] | None = None
    instruction: str = ""

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
        context: runtime context for this step, `(identifier, text)` each: admitted as
            `user/message` (origin engine, source "context") just before the input, so it
            enters durable history; a context whose identifier's newest admitted text on the
            surface is the same is not admitted again (context-snapshot reuse; seed 000 §2.2).
        omit: refs of surface messages this request leaves out to fit the context (the oldest
            history, whole messages; `assembly.fit`); they stay in the log and on the surface.
    """

    system: str
    config: dict[str, Any] = field(default_factory=dict)
    model: str = ""
    meta: dict[str, Any] = field(default_factory=dict)
    records: tuple[NewEvent, ...] = ()
    request: tuple[dict[str, Any], ...] | None = None
    request_parts: tuple[dict[str, Any], ...] = ()
    context: tuple[tuple[str, str], ...] = ()
    omit: frozenset[tuple[int, int]] = frozenset()


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


@dataclass(frozen=True, slots=True)
class StepSettled:
    """The reply is settled as `assistant/message` (complete) in `event`."""

    event: Event
    usage: Usage | None


StepUpdate = StepStarted | TextDelta | ReasoningDelta | StepSettled
"""What `run_step` yields, in order: StepStarted, deltas…, StepSettled."""


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
    """The session's unsettled step, if any: a `request/header` after the last settlement."""
    return _open_step_in(log.surface_events(session_id), session_id)


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
        elif event.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.ASSISTANT_ATTEMPT, EventKind.USER_MESSAGE):
            # A user message after the header is an impersonation settling (the person's own
            # message always comes before its step's header).
            header, checkpoints = None, []
        elif event.kind == EventKind.SURFACE_REPLACED and event.source == SUMMARY_SOURCE and event.body.get("request"):
            header, checkpoints = None, []  # a compaction's summary settles its own request
    if header is None:
        return None
    last = checkpoints[-1] if checkpoints else header
    return OpenStep(checkpoints, last.created_at)


@dataclass(frozen=True, slots=True)
class _Opened:
    """What a step's opening wrote and decided, up to the request it sends."""

    user_event: Event | None
    trace_event: Event
    request: ChatRequest
    model: str


async def run_step(
    log: SessionLog | AsyncSessionLog,
    session_id: int,
    provider: Provider,
    assemble: Assembler,
    text: str | None,
    *,
    generation: Generation = Generation(),
    checkpoint_every: float = 2.0,
    clock: Callable[[], float] = time.monotonic,
    stale_after: float = 75.0,
    now: Callable[[], datetime] = _utc_now,
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
        text: what the person submitted; None for a step without new input (regenerate,
            swipe, continue, impersonate).
        generation: what the step asks the model for (continue text, impersonation, …).
        checkpoint_every: seconds between `stream/checkpoint` events while streaming.
        clock: monotonic seconds (injectable for tests).
        stale_after: seconds without activity after which an unsettled step counts as crashed
            (a live stream checkpoints at least every `checkpoint_every` plus the provider's
            read timeout); a fresher one means another process is replying.
        now: wall-clock UTC time, compared with event times (injectable for tests).

    Yields:
        `StepStarted`, then `TextDelta`/`ReasoningDelta` as they arrive, then `StepSettled`.

    Raises:
        StepBusy: another process is streaming a reply in this session (nothing is written).
        StepFailed: the provider failed, or the stream was cut off (no `finish_reason` and no
            `[DONE]`); the partial reply is stored as `assistant/attempt`.
        asyncio.CancelledError: the caller cancelled; the partial reply is stored first. A
            cancel before the request is sent lets the step's opening writes finish, then
            stores an empty cancelled attempt (no `StepStarted` is yielded), so no step is
            left open.
    """
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
                                                  stale_after, now))
    user_event, trace_event, request, model = opened.user_event, opened.trace_event, opened.request, opened.model
    retries_recorded = False
    if early_cancel is None:
        yield StepStarted(user_event, request, generation)

    def settle_text(new: str) -> str:
        return join_continuation(generation.continue_text, new) if generation.type == "continue" else new

    context: dict[str, Any] = {}
    if generation.continues is not None:
        context["continues"] = list(generation.continues)
    timing: dict[str, Any] = {"submitted": now().isoformat()}
    context["timing"] = timing

    parts: list[str] = []
    reasoning: list[str] = []
    checkpointed = (0, 0)  # how much of parts/reasoning is already in checkpoints
    last_checkpoint = clock()
    usage: Usage | None = None
    finished: Finished | None = None

    async def settle_attempt(extra: dict[str, Any]) -> Event:
        if not retries_recorded:
            await _record_retries(alog, session_id, trace_event, provider, now)
        _finish_context(context, provider, now)
        return (await alog.append(session_id, [_attempt(settle_text("".join(parts)), "".join(reasoning),
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
                if not retries_recorded:  # the stream started: every earlier attempt is known now
                    retries_recorded = True  # first: a cancel during the append must not repeat it
                    await _record_retries(alog, session_id, trace_event, provider, now)
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, ReasoningDelta):
                    reasoning.append(event.text)
                elif isinstance(event, Usage):
                    usage = event
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
                    # Checkpoint before handing the delta on: what the caller has seen is durable.
                    if clock() - last_checkpoint >= checkpoint_every:
                        body = {"content": "".join(parts[checkpointed[0]:]),
                                "reasoning": "".join(reasoning[checkpointed[1]:])}
                        await alog.append(session_id, [NewEvent(EventKind.STREAM_CHECKPOINT, None, body)])
                        checkpointed = (len(parts), len(reasoning))
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
    _finish_context(context, provider, now)
    if finished is None or (finished.finish_reason is None and not finished.saw_done):
        # Neither a finish_reason nor [DONE]: the connection closed mid-reply.
        cut = NetworkError("the connection closed before the reply finished (no finish_reason and no [DONE]); "
                           "the text that arrived is kept")
        error = {"category": cut.category, "message": str(cut), "status": None}
        attempt = (await alog.append(session_id, [_attempt(settle_text("".join(parts)), "".join(reasoning),
                                                           {"error": error, **context}, reply_origin, reply_source,
                                                           reply_role)]))[0]
        raise StepFailed(cut, attempt)

    body: dict[str, Any] = {"content": settle_text("".join(parts)), "provider": provider.name, "model": model,
                            "finish_reason": finished.finish_reason if finished else None, **context}
    if reasoning:
        body["reasoning"] = "".join(reasoning)
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                         "total_tokens": usage.total_tokens}
    kind = EventKind.USER_MESSAGE if impersonate else EventKind.ASSISTANT_MESSAGE
    settled = (await alog.append(session_id, [NewEvent(kind, reply_role, body, reply_origin, reply_source)]))[0]
    yield StepSettled(settled, usage)


async def _open(log: AsyncSessionLog, session_id: int, provider: Provider, assemble: Assembler, text: str | None,
                generation: Generation, stale_after: float, now: Callable[[], datetime]) -> _Opened:
    """A step's opening, in order: recover a stale step or refuse a live one; the inbox insert
    and claim; assemble; admit system, context and input; records and the request header; the
    trace record. Returns what the stream needs.

    Raises:
        StepBusy: another process is streaming in this session (nothing is written).
    """
    step = _open_step_in(await log.surface_events(session_id), session_id)
    recovered = _recovery(step, stale_after, now)
    if recovered is not None:
        await log.append(session_id, [recovered])
    elif step is not None:
        raise StepBusy("a reply is being written in this playthrough by another tavern window or command; "
                       "wait for it or stop it there")
    if text is not None:
        await log.append(session_id, [NewEvent(EventKind.INBOX_SPLICED, "user",
                                               {"op": "insert", "messages": [{"role": "user", "content": text}]})])
        await log.append(session_id, [NewEvent(EventKind.INBOX_SPLICED, None, {"op": "claim", "count": 1})])
    history = surface_of(await log.surface_events(session_id))
    assembly = assemble(history, [text] if text is not None else [])

    admitted: list[NewEvent] = []
    current_system = history[0].content if history and history[0].source == SYSTEM_PROMPT_SOURCE else None
    if assembly.system and assembly.system != current_system:
        admitted.append(NewEvent(EventKind.SYSTEM_MESSAGE, "system", {"content": assembly.system},
                                 source=SYSTEM_PROMPT_SOURCE))
    admitted += context_events(history, assembly.context)
    if text is not None:
        admitted.append(NewEvent(EventKind.USER_MESSAGE, "user", {"content": text}))
    stored = await log.append(session_id, admitted)
    user_event = stored[-1] if text is not None else None

    # Messages this request alone carries (never part of the surface), kept for the trace.
    extra: list[dict[str, Any]] = []
    records = list(assembly.records)
    if assembly.request is not None:
        origins = [dict(p) for p in assembly.request_parts]
        if user_event is not None:  # the input's event exists now: point its part at it
            for part in origins:
                if part.get("source") == "input" and part.get("ref") is None:
                    part["ref"] = list(user_event.ref)
        records.append(NewEvent(EventKind.REQUEST_ASSEMBLY, None, {
            "messages": list(assembly.request), "parts": origins, "generation": generation.type}))
    else:
        if generation.type == "continue":
            extra.append({"role": "assistant", "content": generation.continue_text})
        if generation.instruction:
            extra.append({"role": "system", "content": generation.instruction})
        if extra:
            records.append(NewEvent(EventKind.REQUEST_ASSEMBLY, None, {"append": extra, "generation": generation.type}))
    model = assembly.model or provider.model
    header = {"provider": provider.name, "model": model, "config": assembly.config, "stream": True,
              "assembly": assembly.meta, "generation": generation.type}
    stored_records = await log.append(session_id, [*records, NewEvent(EventKind.REQUEST_HEADER, None, header)])
    header_event = stored_records[-1]
    assembly_event = next((e for e in stored_records if e.kind == EventKind.REQUEST_ASSEMBLY), None)
    if assembly.request is not None:
        messages = [dict(m) for m in assembly.request]
        assert assembly_event is not None
        sent = [SentMessage(m["role"], str(part.get("source", "request-only")), assembly_event.ref, i, message_hash(m))
                for i, (m, part) in enumerate(zip(messages, list(assembly.request_parts) + [{}] * len(messages)))]
    else:
        surface = [m for m in surface_of(await log.surface_events(session_id))
                   if sent_to_model(m) and m.ref not in assembly.omit]
        messages = [m.to_request() for m in surface] + extra
        sent = [SentMessage(m.role, _source_of(m, user_event), m.ref, None, message_hash(message))
                for m, message in zip(surface, messages)]
        if extra:
            assert assembly_event is not None
            sent += [SentMessage(m["role"], "request-only", assembly_event.ref, i, message_hash(m))
                     for i, m in enumerate(extra)]
    # The trace record: references and hashes of exactly what is sent, no bodies (seed 000 §4).
    trace_event = (await log.append(session_id, [NewEvent(TRACE_REQUEST, None, {
        "schema": TRACE_SCHEMA, "header": list(header_event.ref), "provider": provider.name, "model": model,
        "strategy": assembly.meta.get("strategy", "compat"), "generation": generation.type,
        "strategy_snapshot": assembly.meta.get("strategy_snapshot"),
        "replay_of": assembly.meta.get("replay_of"),
        "config": dict(assembly.config), "submitted_at": now().isoformat(),
        "context": assembly.meta.get("context"),
        "messages": [m.to_json() for m in sent]})]))[0]
    return _Opened(user_event, trace_event, ChatRequest(messages, model, dict(assembly.config)), model)


def _source_of(message: SurfaceMessage, user_event: Event | None) -> str:
    if message.source == SYSTEM_PROMPT_SOURCE:
        return "system"
    if message.source == CONTEXT_SOURCE:
        return "context"
    return "input" if user_event is not None and message.ref == user_event.ref else "history"


async def _record_retries(log: AsyncSessionLog, session_id: int, trace_event: Event, provider: Provider,
                          now: Callable[[], datetime]) -> None:
    """One more `trace/request` record per retry the provider made (seed 000 §4: a trace
    record per provider request, retries included): the same message references and hashes,
    the attempt's own call config and omissions, `attempt` n and `retry_of` the first record.
    Nothing is written when the first request was the only one."""
    attempts = getattr(provider, "attempts", None)
    if not isinstance(attempts, list) or len(attempts) < 2:
        return
    first = trace_event.body
    await log.append(session_id, [NewEvent(TRACE_REQUEST, None, {
        **first, "attempt": n, "retry_of": list(trace_event.ref), "config": dict(attempt.get("config") or {}),
        "omitted": dict(attempt.get("omitted") or {}), "submitted_at": now().isoformat()})
        for n, attempt in enumerate(attempts[1:], start=2)])


def _finish_context(context: dict[str, Any], provider: Provider, now: Callable[[], datetime]) -> None:
    """Last byte time and the provider's attempts (status, config, omissions; never
    credentials) go with the settled reply, for the trace."""
    context["timing"]["last_byte"] = now().isoformat()
    attempts = getattr(provider, "attempts", None)
    if isinstance(attempts, list) and attempts:
        context["attempts"] = [dict(a) for a in attempts]


def recover_interrupted(log: SessionLog, session_id: int, *, stale_after: float = 75.0,
                        now: Callable[[], datetime] = _utc_now) -> Event | None:
    """Settle a step a crash left open: when the session's unsettled step has been quiet for
    `stale_after` seconds, what its checkpoints hold becomes one `assistant/attempt` (body
    `recovered: true`; empty when nothing had arrived). A fresher one is left alone: it may be
    streaming in another process. Idempotent.

    Returns:
        The attempt appended, or None when nothing was settled.
    """
    recovered = _recovery(open_step(log, session_id), stale_after, now)
    return log.append(session_id, [recovered])[0] if recovered is not None else None


def _recovery(step: OpenStep | None, stale_after: float, now: Callable[[], datetime]) -> NewEvent | None:
    """The attempt that settles `step` when it has been quiet for `stale_after` seconds, else None."""
    if step is None or (now() - step.last_activity).total_seconds() < stale_after:
        return None
    text = "".join(str(e.body.get("content", "")) for e in step.checkpoints)
    thought = "".join(str(e.body.get("reasoning", "")) for e in step.checkpoints)
    return _attempt(text, thought, {"recovered": True})
