"""One agent step on an in-memory log: order of events, streaming, cancel, errors, crash recovery."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from tavern_tui.engine.events import EventKind, NewEvent, Origin
from tavern_tui.engine.log import PLACEHOLDER_SOURCE, SYSTEM_PROMPT_SOURCE, SurfaceMessage, derive_messages
from tavern_tui.engine.memory import MemoryLog
from tavern_tui.engine.step import (
    STAGES,
    Assembly,
    StepBusy,
    StepFailed,
    StepSettled,
    StepStarted,
    admit_opening,
    open_step,
    recover_interrupted,
    run_step,
)
from tavern_tui.engine.stream import Attempts, BaseProvider, ChatRequest, Finished, ReasoningDelta, TextDelta, Usage
from tavern_tui.engine.trace import TRACE_REQUEST
from tavern_tui.errors import RateLimitError


class ScriptedProvider(BaseProvider):
    """Yields the scripted events; can stop at a gate to let the test cancel mid-stream."""

    name = "scripted"
    model = "test-model"

    def __init__(self, events: list[object], *, gate_after: int | None = None, error: Exception | None = None) -> None:
        self.events = events
        self.gate_after = gate_after
        self.error = error
        self.gate = asyncio.Event()
        self.reached_gate = asyncio.Event()
        self.requests: list[ChatRequest] = []

    async def stream(self, request: ChatRequest) -> AsyncIterator[object]:
        self.requests.append(request)
        for index, event in enumerate(self.events):
            if self.gate_after is not None and index == self.gate_after:
                self.reached_gate.set()
                await self.gate.wait()
            yield event
        if self.error is not None:
            raise self.error


class RecordingAssembler:
    def __init__(self, system: str = "You are Sera.") -> None:
        self.system = system
        self.seen: list[tuple[list[str], list[str]]] = []

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        self.seen.append(([m.content for m in history], list(claimed)))
        return Assembly(system=self.system, config={"temperature": 0.7}, meta={"strategy": "test"})


async def _run(log: MemoryLog, sid: int, provider: ScriptedProvider, assembler: RecordingAssembler,
               text: str) -> list[object]:
    return [u async for u in run_step(log, sid, provider, assembler, text)]


async def test_step_orders_events_as_design_says_and_sends_the_frozen_request() -> None:
    log = MemoryLog()
    sid = log.create_session()
    admit_opening(log, sid, "*Sera smiles.*", {"greeting_index": 0})
    provider = ScriptedProvider([ReasoningDelta("think"), TextDelta("Hel"), TextDelta("lo"), Usage(12, 2, 14),
                                 Finished("stop")])
    assembler = RecordingAssembler()
    updates = await _run(log, sid, provider, assembler, "Hi there")

    kinds = [(e.kind, e.body.get("outcome")) for e in log.surface_events(sid)]
    assert kinds == [
        (EventKind.ASSISTANT_MESSAGE, None),  # opening reference
        (EventKind.INBOX_SPLICED, "queued"),  # seed 000 §5: insert splice, then the claim (a delete)
        (EventKind.INBOX_SPLICED, "claimed"),
        (EventKind.SYSTEM_MESSAGE, None),
        (EventKind.USER_MESSAGE, None),
        (EventKind.REQUEST_HEADER, None),
        (EventKind.REQUEST_CONTEXT, None),  # seed 000 §1: the adapter context, after the header
        ("trace/request", None),  # references and hashes of what is sent, no bodies
        (EventKind.ASSISTANT_MESSAGE, None),
    ]
    # The assembler saw durable history plus the claimed batch, before the input became a message.
    assert assembler.seen == [(["*Sera smiles.*"], ["Hi there"])]
    request = provider.requests[0]
    assert request.messages == [
        {"role": "system", "content": "You are Sera."},
        {"role": "assistant", "content": "*Sera smiles.*"},
        {"role": "user", "content": "Hi there"},
    ]
    assert request.model == "test-model" and request.config == {"temperature": 0.7}
    assert isinstance(updates[0], StepStarted) and updates[0].user.content == "Hi there"
    assert [type(u).__name__ for u in updates[1:]] == ["ReasoningDelta", "TextDelta", "TextDelta", "StepSettled"]
    settled = updates[-1]
    assert isinstance(settled, StepSettled)
    assert settled.event.body["content"] == "Hello" and settled.event.body["reasoning"] == "think"
    assert settled.event.body["usage"] == {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14}
    assert settled.event.origin is None  # the model's reply: natural origin, not stamped
    header = [e for e in log.surface_events(sid) if e.kind == EventKind.REQUEST_HEADER][0]
    assert header.body["config"] == {"temperature": 0.7} and header.body["model"] == "test-model"
    opening = log.surface_events(sid)[0]
    assert (opening.role, opening.origin, opening.source) == ("assistant", Origin.ENGINE, "opening")


async def test_unchanged_system_section_is_admitted_once() -> None:
    log = MemoryLog()
    sid = log.create_session()
    assembler = RecordingAssembler()
    for text in ("one", "two"):
        await _run(log, sid, ScriptedProvider([TextDelta("ok"), Finished("stop")]), assembler, text)
    systems = [e for e in log.surface_events(sid) if e.kind == EventKind.SYSTEM_MESSAGE]
    assert len(systems) == 1
    assembler.system = "You are Sera, now older."
    provider = ScriptedProvider([TextDelta("ok"), Finished("stop")])
    await _run(log, sid, provider, assembler, "three")
    assert provider.requests[0].messages[0] == {"role": "system", "content": "You are Sera, now older."}
    assert sum(1 for m in provider.requests[0].messages if m["role"] == "system") == 1
    system_prompts = [m.content for m in derive_messages(log, sid) if m.source == SYSTEM_PROMPT_SOURCE]
    assert system_prompts == ["You are Sera, now older."]


async def test_cancel_mid_stream_keeps_the_partial_reply_as_an_attempt() -> None:
    log = MemoryLog()
    sid = log.create_session()
    provider = ScriptedProvider([TextDelta("Once upon "), TextDelta("a time"), Finished("stop")], gate_after=1)
    seen: list[str] = []

    async def consume() -> None:
        async for update in run_step(log, sid, provider, RecordingAssembler(), "Tell me a story"):
            if isinstance(update, TextDelta):
                seen.append(update.text)

    task = asyncio.create_task(consume())
    await asyncio.wait_for(provider.reached_gate.wait(), 1)
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = log.surface_events(sid)[-1]
    assert last.kind == EventKind.ASSISTANT_ATTEMPT
    assert {k: v for k, v in last.body.items() if k != "timing"} == {"content": "Once upon ", "cancelled": True}
    assert set(last.body["timing"]) == {"submitted", "first_byte", "last_byte", "stages"}  # for the trace
    stages = last.body["timing"]["stages"]  # a cancelled stream still says where its time went
    # Every stage but `gather` and `ahead`, the reads and build the service makes ahead (none here).
    assert set(stages) == set(STAGES) - {"gather", "ahead"}
    assert all(isinstance(ms, float) and ms >= 0 for ms in stages.values())
    assert seen == ["Once upon "]
    assert derive_messages(log, sid)[-1].partial


async def test_provider_error_mid_stream_keeps_partial_text_and_raises_classified_error() -> None:
    log = MemoryLog()
    sid = log.create_session()
    provider = ScriptedProvider([TextDelta("Half a")], error=RateLimitError("quota exhausted", status=429))
    with pytest.raises(StepFailed) as info:
        await _run(log, sid, provider, RecordingAssembler(), "go")
    assert info.value.category == "rate_limit"
    assert info.value.attempt is not None and info.value.attempt.content == "Half a"
    assert info.value.attempt.body["error"] == {"category": "rate_limit", "message": "quota exhausted", "status": 429}


async def test_checkpoints_are_written_while_streaming_and_never_become_messages() -> None:
    log = MemoryLog()
    sid = log.create_session()
    ticks = iter(range(0, 300, 3))  # each clock reading is 3 s after the last: every delta is due
    provider = ScriptedProvider([TextDelta("A"), ReasoningDelta("r"), TextDelta("B"), Finished("stop")])
    updates = [u async for u in run_step(log, sid, provider, RecordingAssembler(), "go",
                                         checkpoint_every=2.0, clock=lambda: float(next(ticks)))]
    checkpoints = [(e.body["content"], e.body["reasoning"]) for e in log.surface_events(sid)
                   if e.kind == EventKind.STREAM_CHECKPOINT]
    assert checkpoints == [("A", ""), ("", "r"), ("B", "")]
    assert isinstance(updates[-1], StepSettled) and updates[-1].event.content == "AB"
    assert [m.content for m in derive_messages(log, sid) if m.role != "system"] == ["go", "AB"]
    assert recover_interrupted(log, sid) is None  # settled: nothing to recover


def _crashed_log() -> tuple[MemoryLog, int]:
    log = MemoryLog()
    sid = log.create_session()
    log.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": "go"}),
                     NewEvent(EventKind.REQUEST_HEADER, None, {}),
                     NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "A", "reasoning": ""}),
                     NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "B", "reasoning": "r"})])
    return log, sid


def _later(log: MemoryLog, sid: int, seconds: float):  # type: ignore[no-untyped-def]
    last = log.surface_events(sid)[-1].created_at
    return lambda: last + timedelta(seconds=seconds)


def test_a_crash_after_checkpoints_is_recovered_as_one_attempt_once_it_is_stale() -> None:
    log, sid = _crashed_log()
    assert open_step(log, sid) is not None
    # Quiet for less than stale_after: it may be streaming in another process.
    assert recover_interrupted(log, sid, stale_after=75, now=_later(log, sid, 30)) is None
    attempt = recover_interrupted(log, sid, stale_after=75, now=_later(log, sid, 80))
    assert attempt is not None and attempt.body == {
        "content": "AB", "reasoning": "r", "recovered": True,
        "error": {"category": "interrupted", "status": None,
                  "message": "the app was closed while it was streaming; the text that had arrived is kept"}}
    assert open_step(log, sid) is None
    assert recover_interrupted(log, sid, stale_after=0) is None  # idempotent
    assert derive_messages(log, sid)[-1].content == "AB" and derive_messages(log, sid)[-1].partial


async def test_a_step_refuses_to_start_while_another_process_streams_in_the_session() -> None:
    log, sid = _crashed_log()
    before = len(log.surface_events(sid))
    provider = ScriptedProvider([TextDelta("x"), Finished("stop")])
    with pytest.raises(StepBusy, match="another tavern window"):
        await _run(log, sid, provider, RecordingAssembler(), "me too")
    assert len(log.surface_events(sid)) == before and provider.requests == []
    # Once the other step is stale it is recovered first, and the new step runs after it.
    updates = [u async for u in run_step(log, sid, provider, RecordingAssembler(), "me too", stale_after=75,
                                         now=_later(log, sid, 90))]
    assert isinstance(updates[-1], StepSettled)
    contents = [m.content for m in derive_messages(log, sid) if m.role != "system"]
    assert contents == ["go", "AB", "me too", "x"]


async def test_a_stream_cut_without_finish_reason_or_done_is_kept_as_a_failed_attempt() -> None:
    log = MemoryLog()
    sid = log.create_session()
    provider = ScriptedProvider([TextDelta("w0 "), TextDelta("w1"), Finished(None, saw_done=False)])
    with pytest.raises(StepFailed) as info:
        await _run(log, sid, provider, RecordingAssembler(), "go")
    assert info.value.category == "network"
    last = log.surface_events(sid)[-1]
    assert last.kind == EventKind.ASSISTANT_ATTEMPT and last.content == "w0 w1"
    # A finish_reason without [DONE] (some servers omit it) is a complete reply.
    provider = ScriptedProvider([TextDelta("fine"), Finished("stop", saw_done=False)])
    updates = await _run(log, sid, provider, RecordingAssembler(), "again")
    assert isinstance(updates[-1], StepSettled) and updates[-1].event.content == "fine"


async def test_placeholder_replies_are_shown_but_never_sent_to_a_model() -> None:
    log = MemoryLog()
    sid = log.create_session()
    demo = ScriptedProvider([TextDelta("[demo] canned"), Finished("stop")])
    demo.placeholder = True
    updates = await _run(log, sid, demo, RecordingAssembler(), "hello")
    settled = updates[-1]
    assert isinstance(settled, StepSettled)
    assert (settled.event.origin, settled.event.source) == (Origin.ENGINE, PLACEHOLDER_SOURCE)
    real = ScriptedProvider([TextDelta("real"), Finished("stop")])
    await _run(log, sid, real, RecordingAssembler(), "now for real")
    assert real.requests[0].messages == [
        {"role": "system", "content": "You are Sera."},
        {"role": "user", "content": "hello"},
        {"role": "user", "content": "now for real"},
    ]
    assert [m.content for m in derive_messages(log, sid)][2] == "[demo] canned"  # still in the chat


async def test_failed_attempts_are_in_the_display_surface_only() -> None:
    log = MemoryLog()
    sid = log.create_session()
    provider = ScriptedProvider([], error=RateLimitError("slow down", status=429))
    with pytest.raises(StepFailed):
        await _run(log, sid, provider, RecordingAssembler(), "hi")
    assert [m.kind for m in derive_messages(log, sid) if m.role != "system"] == ["user/message"]
    shown = derive_messages(log, sid, include_failed=True)
    assert shown[-1].kind == "assistant/attempt" and shown[-1].body["error"]["category"] == "rate_limit"


async def test_a_config_adjustment_is_recorded_with_the_step() -> None:
    from tavern_tui.engine.step import CONFIG_ADJUSTED
    from tavern_tui.engine.stream import ConfigAdjusted

    log = MemoryLog()
    sid = log.create_session()
    adjusted = ConfigAdjusted({"temperature": 0.7, "max_tokens": 300}, {"max_tokens": 300},
                              {"temperature": "400: Unsupported parameter: 'temperature'"})
    provider = ScriptedProvider([adjusted, TextDelta("ok"), Finished("stop")])
    await _run(log, sid, provider, RecordingAssembler(), "hi")
    events = log.surface_events(sid)
    [record] = [e for e in events if e.kind == CONFIG_ADJUSTED]
    assert record.body["omitted"] == {"temperature": "400: Unsupported parameter: 'temperature'"}
    assert record.body["effective"] == {"max_tokens": 300}
    reply = events[-1]
    assert reply.kind == EventKind.ASSISTANT_MESSAGE and reply.content == "ok"
    assert reply.body["config"]["omitted"] == {"temperature": "400: Unsupported parameter: 'temperature'"}


async def test_retries_come_from_the_streams_own_attempts_never_the_providers_shared_state() -> None:
    # Two streams on one provider once overwrote each other's `provider.attempts`: the engine now keeps
    # what each stream reports (`Attempts`). Here the shared attribute holds another stream's records.
    log = MemoryLog()
    sid = log.create_session()
    ours = ({"status": 429, "error": "rate_limit", "retry_delay": 0.5, "config": {"temperature": 0.7}, "omitted": {}},
            {"status": 200, "error": None, "retry_delay": None, "config": {"temperature": 0.7}, "omitted": {}})
    provider = ScriptedProvider([Attempts(ours), TextDelta("Hello"), Finished("stop"), Attempts(ours)])
    provider.attempts = [{"status": 500, "error": "server"}] * 3  # type: ignore[attr-defined] - another stream's
    updates = await _run(log, sid, provider, RecordingAssembler(), "hi")
    assert not any(isinstance(u, Attempts) for u in updates)  # reports go to the trace, not to the caller
    traces = [e for e in log.surface_events(sid) if e.kind == TRACE_REQUEST]
    assert [t.body.get("attempt") for t in traces] == [None, 2]  # one record per retry (seed 000 §4)
    assert traces[1].body["retry_of"] == list(traces[0].ref)
    reply = log.surface_events(sid)[-1]
    assert reply.kind == EventKind.ASSISTANT_MESSAGE and reply.body["attempts"] == [dict(a) for a in ours]
