"""A step on the SQL event log: every log call runs off the event-loop thread, one after another,
and a cancel (mid-stream, during a write, during the opening) still leaves the attempt stored."""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Iterator, Sequence
from contextlib import aclosing

import pytest

from tavern_tui.engine import log as engine_log
from tavern_tui.engine.events import Event, EventKind, NewEvent
from tavern_tui.engine.log import AsyncSessionLog, ThreadedLog, awaited_log, until_done
from tavern_tui.engine.memory import MemoryLog
from tavern_tui.engine.step import StepSettled, StepStarted, open_step, run_step
from tavern_tui.engine.step.one_hop import in_one_hop
from tavern_tui.engine.stream import Finished, TextDelta
from tavern_tui.store.store import Store
from tests.engine.test_step import RecordingAssembler, ScriptedProvider


class ThreadRecordingLog:
    """Wraps the store's `EventLog`: records (call, thread id) per call, and can hold a call of
    one event kind in its thread until the test releases it."""

    def __init__(self, log: object) -> None:
        self.log = log
        self.calls: list[tuple[str, int]] = []
        self.hold_kind: str | None = None
        self.held = threading.Event()  # set when the held call is waiting
        self.release = threading.Event()

    def append(self, session_id: int, events: Sequence[NewEvent]) -> list[Event]:
        self.calls.append(("append", threading.get_ident()))
        if self.hold_kind is not None and any(e.kind == self.hold_kind for e in events):
            self.held.set()
            assert self.release.wait(5), "the test never released the held append"
        return self.log.append(session_id, events)  # type: ignore[attr-defined]

    def append_if_unchanged(self, session_id: int, events: Sequence[NewEvent], kind: str,
                            after_seq: int) -> list[Event] | None:
        self.calls.append(("append", threading.get_ident()))
        return self.log.append_if_unchanged(session_id, events, kind, after_seq)  # type: ignore[attr-defined]

    def surface_events(self, session_id: int, through_seq: int | None = None) -> list[Event]:
        self.calls.append(("surface_events", threading.get_ident()))
        return self.log.surface_events(session_id, through_seq)  # type: ignore[attr-defined]


@pytest.fixture
def sql_log(db_url: str) -> Iterator[ThreadRecordingLog]:
    store = Store(db_url)
    yield ThreadRecordingLog(store.events)
    store.close()


async def _until(predicate, timeout: float = 5.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_every_log_call_of_a_step_runs_off_the_event_loop_thread(sql_log: ThreadRecordingLog) -> None:
    loop_thread = threading.get_ident()
    sid = sql_log.log.create_session()  # type: ignore[attr-defined]
    ticks = iter(range(0, 300, 3))  # every delta is due for a checkpoint
    provider = ScriptedProvider([TextDelta("Hel"), TextDelta("lo"), Finished("stop")])
    updates = [u async for u in run_step(sql_log, sid, provider, RecordingAssembler(), "Hi",
                                         clock=lambda: float(next(ticks)))]
    assert isinstance(updates[0], StepStarted) and isinstance(updates[-1], StepSettled)
    assert updates[-1].event.content == "Hello"
    kinds = [e.kind for e in sql_log.log.surface_events(sid)]  # type: ignore[attr-defined]
    assert kinds == [EventKind.INBOX_SPLICED, EventKind.INBOX_SPLICED, EventKind.SYSTEM_MESSAGE,
                     EventKind.USER_MESSAGE, EventKind.REQUEST_HEADER, EventKind.REQUEST_CONTEXT, "trace/request",
                     EventKind.STREAM_CHECKPOINT, EventKind.STREAM_CHECKPOINT, EventKind.ASSISTANT_MESSAGE]
    # 2 reads (open step and inbox; history, read again as the new session held no event to extend;
    # the request's surface is that history plus what the opening stored) and 7 appends (inbox
    # insert and claim together, input, header with request/context, trace, 2 checkpoints, reply).
    assert [name for name, _ in sql_log.calls].count("surface_events") == 2
    assert [name for name, _ in sql_log.calls].count("append") == 7
    assert all(thread != loop_thread for _, thread in sql_log.calls)


async def test_the_openings_input_header_and_trace_are_written_in_one_worker_thread(
        monkeypatch: pytest.MonkeyPatch) -> None:
    log = MemoryLog()
    sid = log.create_session()
    hops = itertools.count(1)
    current = threading.local()
    kinds_by_hop: list[tuple[int, list[str]]] = []
    real_in_thread, real_append = engine_log._in_thread, log.append

    async def numbered(call, *args):  # type: ignore[no-untyped-def]
        number = next(hops)

        def run():  # type: ignore[no-untyped-def]
            current.hop = number
            return call(*args)
        return await real_in_thread(run)

    def append(session_id: int, events: Sequence[NewEvent]) -> list[Event]:
        kinds_by_hop.append((current.hop, [str(e.kind) for e in events]))
        return real_append(session_id, events)

    monkeypatch.setattr(engine_log, "_in_thread", numbered)
    monkeypatch.setattr(log, "append", append)
    async for _ in run_step(log, sid, ScriptedProvider([TextDelta("Hello"), Finished("stop")]),
                            RecordingAssembler(), "Hi"):
        pass
    hop_of = {kind: hop for hop, kinds in kinds_by_hop for kind in kinds}
    assert hop_of["user/message"] == hop_of["request/header"] == hop_of["trace/request"]
    assert hop_of["inbox/spliced"] != hop_of["user/message"] != hop_of["assistant/message"]


async def test_a_chain_run_in_one_hop_may_wait_only_for_its_log() -> None:
    log = ThreadedLog(MemoryLog())
    sid = log.sync.create_session()

    async def writes(chained: AsyncSessionLog) -> int:
        await chained.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": "one"})])
        return len(await chained.surface_events(sid))

    async def sleeps(chained: AsyncSessionLog) -> None:
        await asyncio.sleep(0)

    assert await in_one_hop(log, writes) == 1
    with pytest.raises(RuntimeError, match="other than its log"):
        await in_one_hop(log, sleeps)


async def test_cancel_mid_stream_on_the_sql_log_stores_the_partial_reply_off_the_loop(
        sql_log: ThreadRecordingLog) -> None:
    loop_thread = threading.get_ident()
    sid = sql_log.log.create_session()  # type: ignore[attr-defined]
    provider = ScriptedProvider([TextDelta("Once upon "), TextDelta("a time"), Finished("stop")], gate_after=1)

    async def consume() -> None:
        async for _ in run_step(sql_log, sid, provider, RecordingAssembler(), "Tell me a story"):
            pass

    task = asyncio.create_task(consume())
    await asyncio.wait_for(provider.reached_gate.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    last = sql_log.log.surface_events(sid)[-1]  # type: ignore[attr-defined]
    assert last.kind == EventKind.ASSISTANT_ATTEMPT and last.content == "Once upon " and last.body["cancelled"] is True
    assert open_step(sql_log.log, sid) is None  # type: ignore[arg-type]
    assert all(thread != loop_thread for _, thread in sql_log.calls)


async def test_a_cancel_during_an_append_waits_for_it_then_stores_the_attempt_after_it(
        sql_log: ThreadRecordingLog) -> None:
    sid = sql_log.log.create_session()  # type: ignore[attr-defined]
    ticks = iter(range(0, 300, 3))
    provider = ScriptedProvider([TextDelta("A"), TextDelta("B"), Finished("stop")])
    sql_log.hold_kind = EventKind.STREAM_CHECKPOINT

    async def consume() -> None:
        async for _ in run_step(sql_log, sid, provider, RecordingAssembler(), "go", clock=lambda: float(next(ticks))):
            pass

    task = asyncio.create_task(consume())
    await _until(sql_log.held.is_set)  # the first checkpoint's append is running in its thread
    task.cancel()
    await asyncio.sleep(0.05)
    assert not task.done()  # the step waits for the append under way
    task.cancel()  # a second cancel while it waits changes nothing either
    await asyncio.sleep(0.05)
    assert not task.done()
    sql_log.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    events = sql_log.log.surface_events(sid)  # type: ignore[attr-defined]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert [e.kind for e in events[-2:]] == [EventKind.STREAM_CHECKPOINT, EventKind.ASSISTANT_ATTEMPT]
    assert events[-2].content == "A" and events[-1].content == "A" and events[-1].body["cancelled"] is True
    assert open_step(sql_log.log, sid) is None  # type: ignore[arg-type]


async def test_a_cancel_during_the_opening_finishes_it_and_settles_the_step_as_cancelled(
        sql_log: ThreadRecordingLog) -> None:
    sid = sql_log.log.create_session()  # type: ignore[attr-defined]
    provider = ScriptedProvider([TextDelta("never"), Finished("stop")])
    sql_log.hold_kind = EventKind.REQUEST_HEADER
    seen: list[object] = []

    async def consume() -> None:
        async for update in run_step(sql_log, sid, provider, RecordingAssembler(), "hello"):
            seen.append(update)

    task = asyncio.create_task(consume())
    await _until(sql_log.held.is_set)
    task.cancel()
    sql_log.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    kinds = [e.kind for e in sql_log.log.surface_events(sid)]  # type: ignore[attr-defined]
    assert kinds == [EventKind.INBOX_SPLICED, EventKind.INBOX_SPLICED, EventKind.SYSTEM_MESSAGE,
                     EventKind.USER_MESSAGE, EventKind.REQUEST_HEADER, EventKind.REQUEST_CONTEXT, "trace/request",
                     EventKind.ASSISTANT_ATTEMPT]
    attempt = sql_log.log.surface_events(sid)[-1]  # type: ignore[attr-defined]
    assert attempt.content == "" and attempt.body["cancelled"] is True
    assert seen == [] and provider.requests == []  # nothing was sent
    assert open_step(sql_log.log, sid) is None  # type: ignore[arg-type]  # the next step is not refused


async def test_a_sync_log_is_wrapped_and_an_async_log_is_used_as_it_is() -> None:
    memory = MemoryLog()
    wrapped = awaited_log(memory)
    assert isinstance(wrapped, ThreadedLog) and wrapped.sync is memory
    assert awaited_log(wrapped) is wrapped
    sid = memory.create_session()
    [stored] = await wrapped.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": "hi"})])
    assert stored.seq == 1 and [e.content for e in await wrapped.surface_events(sid)] == ["hi"]


async def test_until_done_returns_the_result_and_the_cancel_that_came_meanwhile() -> None:
    started = asyncio.Event()
    finish = asyncio.Event()

    async def slow() -> str:
        started.set()
        await finish.wait()
        return "written"

    results: list[object] = []

    async def caller() -> None:
        results.append(await until_done(slow()))

    task = asyncio.create_task(caller())
    await started.wait()
    task.cancel()
    await asyncio.sleep(0)
    task.cancel()
    finish.set()
    await task
    [(value, cancel)] = results
    assert value == "written" and isinstance(cancel, asyncio.CancelledError)


async def test_a_consumer_that_stops_early_still_gets_the_attempt_written_off_the_loop(
        sql_log: ThreadRecordingLog) -> None:
    loop_thread = threading.get_ident()
    sid = sql_log.log.create_session()  # type: ignore[attr-defined]
    provider = ScriptedProvider([TextDelta("first "), TextDelta("second"), Finished("stop")])
    async with aclosing(run_step(sql_log, sid, provider, RecordingAssembler(), "go")) as steps:
        async for update in steps:
            if isinstance(update, TextDelta):
                break  # aclosing closes the step: GeneratorExit at its yield
    last = sql_log.log.surface_events(sid)[-1]  # type: ignore[attr-defined]
    assert last.kind == EventKind.ASSISTANT_ATTEMPT and last.content == "first " and last.body["cancelled"] is True
    assert all(thread != loop_thread for _, thread in sql_log.calls)
