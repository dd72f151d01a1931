"""The durable inbox (seed 000 §1, §5): every splice op against the seed's fields, the pending
queue rebuilt from them (after a restart too), batch claim order, steers at a step boundary,
cancel before claim, a crash between claim and admission (a real killed process), and two
processes racing to claim."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tavern_tui.engine.events import Event, EventKind, NewEvent, Origin
from tavern_tui.engine.inbox import (
    CLAIM_KEY,
    NEXT_STEP,
    NEXT_TURN,
    ClaimPending,
    PendingInputProjection,
    cancel_splice,
    change,
    claim_batch,
    insert_splice,
    new_message,
    projection,
    replace_splice,
)
from tavern_tui.engine.log import derive_messages
from tavern_tui.engine.memory import MemoryLog
from tavern_tui.engine.step import InboxEmpty, StepBusy, StepSettled, StepStarted, run_step
from tavern_tui.engine.stream import Finished, TextDelta
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.store.store import Store
from tests.engine.test_step import RecordingAssembler, ScriptedProvider

SEED_FIELDS = {"target", "start", "removedCount", "inserted", "outcome"}
"""Seed 000 §5: the splice is handled exactly from target/start/removedCount/inserted/outcome."""

REPO = Path(__file__).resolve().parents[2]


def queue(log: MemoryLog, sid: int, text: str, target: str = NEXT_TURN) -> Event:
    [event], _ = change(log, sid, lambda q: [insert_splice(q, [new_message(text)], target)])
    return event


def splices(log: MemoryLog, sid: int) -> list[Event]:
    return [e for e in log.surface_events(sid) if e.kind == EventKind.INBOX_SPLICED]


def test_insert_is_one_splice_with_exactly_the_seed_fields_and_an_origin() -> None:
    log = MemoryLog()
    sid = log.create_session()
    event = queue(log, sid, "first")
    queue(log, sid, "second")
    assert set(event.body) == SEED_FIELDS
    assert event.body["target"] == "next-turn" and event.body["start"] == 0 and event.body["removedCount"] == 0
    assert event.body["outcome"] == "queued"
    [message] = event.body["inserted"]
    assert message["role"] == "user" and message["content"] == "first" and message["origin"] == "customer"
    second = splices(log, sid)[1]
    assert second.body["start"] == 1  # appended after the first item
    assert [i.content for i in projection(log, sid).items] == ["first", "second"]


def test_replace_is_one_splice_that_keeps_id_position_and_queue_time() -> None:
    log = MemoryLog()
    sid = log.create_session()
    queue(log, sid, "one")
    queue(log, sid, "two")
    before = projection(log, sid)
    target_id = before.items[1].id
    [event], _ = change(log, sid, lambda q: [replace_splice(q, target_id, "TWO, edited")])
    assert set(event.body) == SEED_FIELDS
    assert (event.body["start"], event.body["removedCount"], event.body["outcome"]) == (1, 1, "replaced")
    after = projection(log, sid)
    assert [i.content for i in after.items] == ["one", "TWO, edited"]
    assert after.items[1].id == target_id and after.items[1].queued_at == before.items[1].queued_at
    assert after.items[1].ref == event.ref  # the text now comes from the replace splice


async def test_cancel_before_claim_is_one_splice_and_the_text_never_reaches_the_model() -> None:
    log = MemoryLog()
    sid = log.create_session()
    queue(log, sid, "keep me")
    queue(log, sid, "forget me")
    forget = projection(log, sid).items[1].id
    [event], _ = change(log, sid, lambda q: [cancel_splice(q, forget)])
    assert set(event.body) == SEED_FIELDS
    assert (event.body["start"], event.body["removedCount"], event.body["inserted"], event.body["outcome"]) == (
        1, 1, [], "canceled")
    provider = ScriptedProvider([TextDelta("ok"), Finished("stop")])
    async for _ in run_step(log, sid, provider, RecordingAssembler(), None, claim=True):
        pass
    assert [m["content"] for m in provider.requests[0].messages if m["role"] == "user"] == ["keep me"]
    with pytest.raises(NotFound):
        change(log, sid, lambda q: [cancel_splice(q, forget)])  # already gone


async def test_a_step_claims_the_whole_batch_in_order_one_user_message_each() -> None:
    log = MemoryLog()
    sid = log.create_session()
    queue(log, sid, "A")
    queue(log, sid, "B")
    assembler = RecordingAssembler()
    provider = ScriptedProvider([TextDelta("reply"), Finished("stop")])
    updates = [u async for u in run_step(log, sid, provider, assembler, "C")]
    # The assembler saw durable history (empty) plus the claimed batch, before admission.
    assert assembler.seen == [([], ["A", "B", "C"])]
    claim = [e for e in splices(log, sid) if e.body["outcome"] == "claimed"]
    assert len(claim) == 1 and (claim[0].body["start"], claim[0].body["removedCount"]) == (0, 3)
    assert claim[0].body["inserted"] == [] and set(claim[0].body) == SEED_FIELDS
    users = [e for e in log.surface_events(sid) if e.kind == EventKind.USER_MESSAGE]
    assert [u.content for u in users] == ["A", "B", "C"]
    assert all(u.body[CLAIM_KEY] == claim[0].seq for u in users)
    assert all(u.origin is None for u in users)  # the person's: the natural producer of role user (seed 001)
    assert [m["content"] for m in provider.requests[0].messages] == ["You are Sera.", "A", "B", "C"]
    started = updates[0]
    assert isinstance(started, StepStarted) and [e.content for e in started.claimed] == ["A", "B", "C"]
    assert started.user is not None and started.user.content == "C"
    assert projection(log, sid).items == [] and projection(log, sid).open_claims == []
    # The trace names the claim and the splices that queued each item (references, no text).
    trace = next(e for e in log.surface_events(sid) if e.kind == "trace/request")
    inserts = [e for e in splices(log, sid) if e.body["outcome"] == "queued"]
    assert trace.body["inbox"]["claim"] == list(claim[0].ref)
    assert [i["ref"] for i in trace.body["inbox"]["items"]] == [list(e.ref) for e in inserts]
    assert "A" not in json.dumps(trace.body["inbox"])
    assert [m["source"] for m in trace.body["messages"]] == ["system", "input", "input", "input"]


def test_a_steer_goes_before_next_turn_items_and_a_step_boundary_claims_only_steers() -> None:
    log = MemoryLog()
    sid = log.create_session()
    queue(log, sid, "later 1")
    queue(log, sid, "steer 1", NEXT_STEP)
    queue(log, sid, "later 2")
    steer2 = queue(log, sid, "steer 2", NEXT_STEP)
    assert steer2.body["target"] == "next-step" and steer2.body["start"] == 1  # after the first steer
    assert [(i.content, i.target) for i in projection(log, sid).items] == [
        ("steer 1", "next-step"), ("steer 2", "next-step"), ("later 1", "next-turn"), ("later 2", "next-turn")]
    claim, items = claim_batch(log, sid, NEXT_STEP)
    assert claim is not None and claim.body["target"] == "next-step"
    assert (claim.body["start"], claim.body["removedCount"], claim.body["outcome"]) == (0, 2, "claimed")
    assert [i.content for i in items] == ["steer 1", "steer 2"]
    assert [i.content for i in projection(log, sid).items] == ["later 1", "later 2"]


def test_old_two_field_bodies_still_read() -> None:
    log = MemoryLog()
    sid = log.create_session()
    # What the step wrote before this format: an insert and a claim, back to back, then the input.
    log.append(sid, [NewEvent(EventKind.INBOX_SPLICED, "user", {"op": "insert",
                                                                "messages": [{"role": "user", "content": "old"}]}),
                     NewEvent(EventKind.INBOX_SPLICED, None, {"op": "claim", "count": 1}),
                     NewEvent(EventKind.USER_MESSAGE, "user", {"content": "old"})])
    queue(log, sid, "new")
    now = projection(log, sid)
    assert [i.content for i in now.items] == ["new"] and now.open_claims == []
    log2 = MemoryLog()
    sid2 = log2.create_session()
    log2.append(sid2, [NewEvent(EventKind.INBOX_SPLICED, "user", {"op": "insert",
                                                                  "messages": [{"role": "user", "content": "x"}]})])
    assert [i.content for i in projection(log2, sid2).items] == ["x"]


def test_a_bad_splice_body_names_the_event_and_field() -> None:
    log = MemoryLog()
    sid = log.create_session()
    log.append(sid, [NewEvent(EventKind.INBOX_SPLICED, None, {"target": "next-turn", "start": 0, "removedCount": 0,
                                                              "inserted": [], "outcome": "exploded"})])
    with pytest.raises(TavernError, match=r"inbox/spliced at 1:1: field 'outcome'"):
        projection(log, sid)


def test_the_queue_is_rebuilt_from_the_database_after_a_restart(db_url: str) -> None:
    store = Store(db_url)
    sid = store.events.create_session()
    queue(store.events, sid, "survives", NEXT_STEP)  # type: ignore[arg-type]
    queue(store.events, sid, "me too")  # type: ignore[arg-type]
    first = projection(store.events, sid)
    store.close()
    reopened = Store(db_url)
    again = projection(reopened.events, sid)
    reopened.close()
    assert again.items == first.items
    assert [(i.content, i.target) for i in again.items] == [("survives", "next-step"), ("me too", "next-turn")]


def test_compare_and_append_refuses_a_splice_computed_on_an_old_queue(db_url: str) -> None:
    store = Store(db_url)
    sid = store.events.create_session()
    seen = projection(store.events, sid)
    queue(store.events, sid, "someone else")  # type: ignore[arg-type]
    late = insert_splice(seen, [new_message("mine")], NEXT_TURN)
    assert store.events.append_if_unchanged(sid, [late], str(EventKind.INBOX_SPLICED), seen.inbox_seq) is None
    # Other kinds after the seq read do not conflict (a reply streaming meanwhile).
    store.events.append(sid, [NewEvent(EventKind.STREAM_CHECKPOINT, None, {"content": "x"})])
    fresh = projection(store.events, sid)
    assert store.events.append_if_unchanged(sid, [insert_splice(fresh, [new_message("mine")], NEXT_TURN)],
                                            str(EventKind.INBOX_SPLICED), fresh.inbox_seq) is not None
    assert [i.content for i in projection(store.events, sid).items] == ["someone else", "mine"]
    store.close()


async def test_an_assembler_that_raises_puts_the_batch_back() -> None:
    log = MemoryLog()
    sid = log.create_session()
    queue(log, sid, "queued first")

    def broken(history, claimed):  # type: ignore[no-untyped-def]
        raise TavernError("the strategy failed")

    with pytest.raises(TavernError, match="strategy failed"):
        async for _ in run_step(log, sid, ScriptedProvider([Finished("stop")]), broken, "then this"):
            pass
    assert [i.content for i in projection(log, sid).items] == ["queued first", "then this"]
    assert projection(log, sid).open_claims == []
    assert not any(e.kind == EventKind.USER_MESSAGE for e in log.surface_events(sid))


async def test_claiming_an_empty_inbox_writes_nothing() -> None:
    log = MemoryLog()
    sid = log.create_session()
    with pytest.raises(InboxEmpty):
        async for _ in run_step(log, sid, ScriptedProvider([Finished("stop")]), RecordingAssembler(), None,
                                claim=True):
            pass
    assert log.surface_events(sid) == []


CRASH_WORKER = textwrap.dedent("""
    import asyncio, sys, time
    from pathlib import Path
    from tavern_tui.engine.step import Assembly, run_step
    from tavern_tui.store.store import Store
    from tests.engine.test_step import ScriptedProvider
    from tavern_tui.engine.stream import Finished

    db_url, sid, marker = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])

    def assemble(history, claimed):
        marker.write_text(",".join(claimed))  # the claim is durable now; admission not yet
        time.sleep(120)  # killed here
        return Assembly(system="")

    async def main():
        store = Store(db_url)
        async for _ in run_step(store.events, sid, ScriptedProvider([Finished("stop")]), assemble, None, claim=True):
            pass

    asyncio.run(main())
""")


async def test_a_process_killed_between_claim_and_admission_loses_nothing(db_url: str, tmp_path: Path) -> None:
    store = Store(db_url)
    sid = store.events.create_session()
    queue(store.events, sid, "do not lose me")  # type: ignore[arg-type]
    marker = tmp_path / "claimed"
    worker = subprocess.Popen([sys.executable, "-c", CRASH_WORKER, db_url, str(sid), str(marker)], cwd=REPO)
    try:
        deadline = time.monotonic() + 60
        # The file exists before its text is written: wait for the text (a run read it empty).
        while not marker.exists() or not marker.read_text():
            assert worker.poll() is None, "the worker died before claiming"
            assert time.monotonic() < deadline, "the worker never claimed"
            time.sleep(0.05)
        assert marker.read_text() == "do not lose me"
        os.kill(worker.pid, signal.SIGKILL)
    finally:
        if worker.poll() is None:
            worker.kill()  # a failed check above leaves it asleep in the claim
        worker.wait(30)
    assert worker.returncode == -signal.SIGKILL
    after_crash = projection(store.events, sid)  # type: ignore[arg-type]
    assert after_crash.items == [] and [i.content for c in after_crash.open_claims for i in c.items] == [
        "do not lose me"]
    # While the claim is fresh it counts as another process opening a step.
    with pytest.raises(StepBusy):
        async for _ in run_step(store.events, sid, ScriptedProvider([Finished("stop")]), RecordingAssembler(), None,
                                claim=True):
            pass
    # Once stale, the next step puts the claim back and claims it again: admitted exactly once.
    later = datetime.now(UTC) + timedelta(seconds=120)
    provider = ScriptedProvider([TextDelta("got it"), Finished("stop")])
    updates = [u async for u in run_step(store.events, sid, provider, RecordingAssembler(), None, claim=True,
                                         stale_after=75, now=lambda: later)]
    assert isinstance(updates[-1], StepSettled)
    users = [m.content for m in derive_messages(store.events, sid) if m.role == "user"]  # type: ignore[arg-type]
    assert users == ["do not lose me"]
    outcomes = [e.body["outcome"] for e in store.events.surface_events(sid) if e.kind == EventKind.INBOX_SPLICED]
    assert outcomes == ["queued", "claimed", "restored", "claimed"]
    assert projection(store.events, sid).open_claims == []  # type: ignore[arg-type]
    store.close()


RACE_WORKER = textwrap.dedent("""
    import json, sys, time
    from tavern_tui.engine.events import EventKind, NewEvent
    from tavern_tui.engine.inbox import CLAIM_KEY, ClaimPending, claim_batch
    from tavern_tui.store.store import Store

    db_url, sid, name, go = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    store = Store(db_url)
    while not __import__("os").path.exists(go):
        time.sleep(0.01)
    claimed = []
    for i in range(15):
        while True:
            try:
                claim, items = claim_batch(store.events, sid, insert=f"{name}-{i}")
                break
            except ClaimPending:
                time.sleep(0.001)
        store.events.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": it.content,
                                                                            CLAIM_KEY: claim.seq}) for it in items])
        claimed += [it.content for it in items]
    print(json.dumps(claimed))
""")


def test_two_processes_racing_never_claim_the_same_item(db_url: str, tmp_path: Path) -> None:
    store = Store(db_url)
    sid = store.events.create_session()
    for n in range(10):
        queue(store.events, sid, f"pre-{n}")  # type: ignore[arg-type]
    go = tmp_path / "go"
    workers = [subprocess.Popen([sys.executable, "-c", RACE_WORKER, db_url, str(sid), name, str(go)], cwd=REPO,
                                stdout=subprocess.PIPE, text=True) for name in ("p", "q")]
    go.write_text("go")
    results = [json.loads(w.communicate(timeout=120)[0]) for w in workers]
    assert all(w.returncode == 0 for w in workers)
    everything = results[0] + results[1]
    expected = {f"pre-{n}" for n in range(10)} | {f"{w}-{i}" for w in "pq" for i in range(15)}
    assert len(everything) == len(expected) and set(everything) == expected  # each claimed once
    users = [e.content for e in store.events.surface_events(sid) if e.kind == EventKind.USER_MESSAGE]
    assert sorted(users) == sorted(expected)
    assert projection(store.events, sid).items == []  # type: ignore[arg-type]
    store.close()


def test_a_fresh_open_claim_refuses_a_second_claim() -> None:
    log = MemoryLog()
    sid = log.create_session()
    queue(log, sid, "x")
    claim_batch(log, sid)
    with pytest.raises(ClaimPending):
        claim_batch(log, sid, insert="y")
    assert [i.content for c in projection(log, sid).open_claims for i in c.items] == ["x"]
    assert PendingInputProjection.from_events(log.surface_events(sid), sid).items == []


def test_an_agent_origin_survives_the_queue() -> None:
    log = MemoryLog()
    sid = log.create_session()
    change(log, sid, lambda q: [insert_splice(q, [new_message("written by the model", Origin.AGENT)], NEXT_TURN)])
    assert projection(log, sid).items[0].origin == Origin.AGENT


def _replayed_in_full(log: MemoryLog, sid: int) -> list[tuple[str, str]]:
    """The queue replayed event by event, without going on from an earlier replay."""
    queue_now = PendingInputProjection(sid)
    for event in log.surface_events(sid):
        queue_now.apply(event)
    return [(i.content, i.target) for i in queue_now.items]


def test_a_long_surface_is_replayed_from_where_the_last_replay_of_it_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    log = MemoryLog()
    sid = log.create_session()
    log.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": f"line {n}"}) for n in range(300)])
    queue(log, sid, "first")
    applied: list[Event] = []
    original = PendingInputProjection.apply

    def counted(self: PendingInputProjection, event: Event) -> None:
        applied.append(event)
        original(self, event)

    monkeypatch.setattr(PendingInputProjection, "apply", counted)
    earlier = projection(log, sid)
    earlier.items.clear()  # a caller's own queue: changing it changes no later replay
    applied.clear()
    queue(log, sid, "steer", NEXT_STEP)
    now = projection(log, sid)
    # Only the new splice was replayed (plus the replays `queue` itself made); the result is the full replay's.
    assert [e.kind for e in applied[-1:]] == [EventKind.INBOX_SPLICED] and len(applied) <= 3
    assert [(i.content, i.target) for i in now.items] == _replayed_in_full(log, sid) == [
        ("steer", "next-step"), ("first", "next-turn")]


def test_a_surface_that_does_not_go_on_from_the_last_replay_is_replayed_in_full() -> None:
    log = MemoryLog()
    sid = log.create_session()
    log.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": f"line {n}"}) for n in range(300)])
    queue(log, sid, "first")
    assert [i.content for i in projection(log, sid).items] == ["first"]
    other = MemoryLog()  # the same session id, other events: not a continuation
    other_sid = other.create_session()
    assert other_sid == sid
    other.append(sid, [NewEvent(EventKind.USER_MESSAGE, "user", {"content": f"line {n}"}) for n in range(300)])
    queue(other, sid, "second")
    assert [i.content for i in projection(other, sid).items] == ["second"]
