"""One agent step on an in-memory log: order of events, streaming, cancel, errors, crash recovery."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from tavern_tui.engine.events import EventKind, NewEvent, Origin
from tavern_tui.engine.log import SYSTEM_PROMPT_SOURCE, SurfaceMessage, derive_messages
from tavern_tui.engine.memory import MemoryLog
from tavern_tui.engine.step import (
    Assembly,
    StepFailed,
    StepSettled,
    StepStarted,
    admit_opening,
    recover_interrupted,
    run_step,
)
from tavern_tui.engine.stream import ChatRequest, Finished, ReasoningDelta, TextDelta, Usage
from tavern_tui.errors import RateLimitError


class ScriptedProvider:
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


async def _run(log: MemoryLog, sid: int, provider: ScriptedProvider, assembler: RecordingAssembler, text: str) -> list[object]:
    return [u async for u in run_step(log, sid, provider, assembler, text)]


async def test_step_orders_events_as_design_says_and_sends_the_frozen_request() -> None:
    log = MemoryLog()
    sid = log.create_session()
    admit_opening(log, sid, "*Sera smiles.*", {"greeting_index": 0})
    provider = ScriptedProvider([ReasoningDelta("think"), TextDelta("Hel"), TextDelta("lo"), Usage(12, 2, 14), Finished("stop")])
    assembler = RecordingAssembler()
    updates = await _run(log, sid, provider, assembler, "Hi there")

    kinds = [(e.kind, e.body.get("op")) for e in log.surface_events(sid)]
    assert kinds == [
        (EventKind.ASSISTANT_MESSAGE, None),  # opening reference
        (EventKind.INBOX_SPLICED, "insert"),
        (EventKind.INBOX_SPLICED, "claim"),
        (EventKind.SYSTEM_MESSAGE, None),
        (EventKind.USER_MESSAGE, None),
        (EventKind.REQUEST_HEADER, None),
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
    assert [m.content for m in derive_messages(log, sid) if m.source == SYSTEM_PROMPT_SOURCE] == ["You are Sera, now older."]


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
    assert last.body == {"content": "Once upon ", "cancelled": True}
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


def test_a_crash_after_checkpoints_is_recovered_as_one_attempt() -> None:
    log = MemoryLog()
    sid = log.create_session()
    log.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": "go"}),
                     NewEvent(EventKind.REQUEST_HEADER, None, {}),
                     NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "A", "reasoning": ""}),
                     NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "B", "reasoning": "r"})])
    attempt = recover_interrupted(log, sid)
    assert attempt is not None and attempt.body == {"content": "AB", "reasoning": "r", "recovered": True}
    assert recover_interrupted(log, sid) is None  # idempotent
    assert derive_messages(log, sid)[-1].content == "AB" and derive_messages(log, sid)[-1].partial
