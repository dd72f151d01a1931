"""The inbox through the service: a line queued while a reply streams is claimed by the next
step, world info keyed only on it fires in that step and never earlier (the trace is the
evidence), previews and `lore test` see the pending batch, steers at a step boundary."""

from __future__ import annotations

import json
from pathlib import Path

from tavern_tui.engine.step import StepSettled, StepStarted
from tavern_tui.formats.worldinfo import parse_world_book
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

QUEUED = "Tell me about the zephyrine lantern."
"""The only line that holds the test book's key "zephyrine"."""

BOOK = {"entries": {"77": {"uid": 77, "key": ["zephyrine"], "content": "The zephyrine lantern burns blue."}}}


def _records(tavern: Tavern, session_id: int) -> tuple[list, list]:
    events = tavern.store.events.surface_events(session_id)
    headers = {e.ref: e for e in events if e.kind == "request/header"}
    traces = [e for e in events if e.kind == "trace/request" and "retry_of" not in e.body]
    return traces, [headers[tuple(t.body["header"])].body for t in traces]


async def test_an_entry_keyed_only_on_a_queued_line_fires_in_the_claiming_step_never_earlier(
        tavern: Tavern, model: ScriptedModel, corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
    view = tavern.playthroughs.new_playthrough(cid, user_name="Ada")
    book_id = tavern.lore.import_world_book_bytes(json.dumps(BOOK).encode(), "zephyrine.json").id
    assert book_id is not None and tavern.lore.bind_world_book(book_id, "playthrough", view.id)
    model.enqueue("*She nods.*")
    model.enqueue("*Her eyes darken.* Shadowfangs hunt at night.")
    queued_during = []
    async for update in tavern.steps.send(view.id, "Hello there."):
        if isinstance(update, StepStarted):
            assert tavern.inbox.step_in_progress(view.id)
            queued_during.append(tavern.inbox.add(view.id, QUEUED))
        if isinstance(update, StepSettled):
            assert [i.text for i in tavern.inbox.pending(view.id)] == [QUEUED]  # not claimed by the running step
    assert not tavern.inbox.step_in_progress(view.id)
    # The world-info preview of the next message scans the pending batch too.
    preview = tavern.steps.world_info_preview(view.id)
    assert any(d.uid == 77 and d.fired for d in preview.decisions)
    async for _ in tavern.steps.run_queued(view.id):
        pass
    assert tavern.inbox.pending(view.id) == []
    traces, headers = _records(tavern, tavern.playthroughs.playthrough(view.id).session_id)
    first, second = headers[0]["assembly"]["world_info"], headers[1]["assembly"]["world_info"]
    assert 77 not in {d["uid"] for d in first["fired"]}  # never earlier: the running step did not see it
    fired = {d["uid"]: d for d in second["fired"]}
    assert fired[77]["reason"] == "key" and fired[77]["matched_in"] == "input"
    assert "The zephyrine lantern burns blue." in model.requests[1].messages[0]["content"]
    assert "zephyrine" not in model.requests[0].messages[0]["content"]
    # The claiming step's trace names the inbox events it consumed: the claim and the insert.
    events = tavern.store.events.surface_events(tavern.playthroughs.playthrough(view.id).session_id)
    insert = next(e for e in events if e.kind == "inbox/spliced" and e.body["outcome"] == "queued"
                  and e.body["inserted"][0]["content"] == QUEUED)
    claim = next(e for e in events if e.kind == "inbox/spliced" and e.body["outcome"] == "claimed"
                 and e.seq > insert.seq)
    assert traces[1].body["inbox"] == {"claim": list(claim.ref),
                                       "items": [{"id": queued_during[0].id, "ref": list(insert.ref)}]}
    assert all(i["ref"] != list(insert.ref) for i in traces[0].body["inbox"]["items"])
    assert QUEUED not in str(traces[1].body)  # references only, never the queued text
    assert model.requests[1].messages[-1] == {"role": "user", "content": QUEUED}


def test_lore_test_accepts_a_pending_batch(tavern: Tavern, tmp_path: Path) -> None:
    raw = {"entries": {"0": {"uid": 0, "key": ["lantern"], "content": "The lantern is cursed."}}}
    book = parse_world_book(json.dumps(raw).encode(), "b.json")
    alone = tavern.lore.test_world_info([book], [], "hello")
    assert not alone.activated
    batch = tavern.lore.test_world_info([book], [], "hello", batch=["the lantern flickers"])
    [decision] = [d for d in batch.decisions if d.fired]
    assert decision.uid == 0 and decision.matched_in == "input"


async def test_a_step_boundary_claims_only_the_steers(tavern: Tavern, corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
    view = tavern.playthroughs.new_playthrough(cid)
    tavern.inbox.add(view.id, "later")
    steer = tavern.inbox.add(view.id, "turn around", steer=True)
    assert steer.position == 1 and steer.steer
    claim, items = tavern.inbox.claim_at_step_boundary(view.id)
    assert claim is not None and claim.body["target"] == "next-step"
    assert [i.content for i in items] == ["turn around"]
    assert [i.text for i in tavern.inbox.pending(view.id)] == ["later"]


async def test_the_queue_moves_with_the_head_when_a_reply_is_swiped(tavern: Tavern, model: ScriptedModel,
                                                                    corpus_dir: Path) -> None:
    cid = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])[0].id or 0
    view = tavern.playthroughs.new_playthrough(cid)
    model.enqueue("first reply")
    model.enqueue("second reply")
    async for update in tavern.steps.send(view.id, "hello"):
        if isinstance(update, StepStarted):
            waiting = tavern.inbox.add(view.id, "waits for the next step")
            steer = tavern.inbox.add(view.id, "a steer", steer=True)
    old_head = tavern.playthroughs.playthrough(view.id).session_id
    # A swipe (regenerate) forks before the reply: the head moves, the queue with it. The swipe
    # step claims nothing (no new input); the queue is still there after it.
    async for _ in tavern.steps.regenerate(view.id):
        pass
    new_head = tavern.playthroughs.playthrough(view.id).session_id
    assert new_head != old_head
    assert [(i.id, i.text, i.target) for i in tavern.inbox.pending(view.id)] == [
        (steer.id, "a steer", "next-step"), (waiting.id, "waits for the next step", "next-turn")]
    from tavern_tui.engine.inbox import projection

    assert projection(tavern.store.events, old_head).items == []  # swiping back shows no stale copy
    outcomes = [e.body["outcome"] for e in tavern.store.events.surface_events(old_head) if e.kind == "inbox/spliced"]
    assert outcomes[-1] == "moved"
    assert all(m["content"] != "waits for the next step" for m in model.requests[-1].messages)  # a swipe claims nothing
