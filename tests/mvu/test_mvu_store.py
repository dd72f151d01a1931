"""MVU state on the real store (issue 18 item 1): initialisation, a reply's commit, swipes, forks, previews and
the compare-and-set, with MagVarUpdate's demo card (corpus/stateful/qingkong_li_mvu.png).

Expected values come from the card itself: its `[InitVar]1st` entry sets `理.好感度` to `[0, "…"]` (a value
with description) and its second greeting (alternate_greetings[0]) runs `_.set("理.好感度",0,15);//故事开始的设定`,
so MVU's `set` replaces element 0 only (update_variables.ts:769-785) and writes the display string
`0->15 (故事开始的设定)` (:811-821).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.engine.events import NewEvent
from tavern_tui.engine.state import STATE_KIND
from tavern_tui.mvu import MVU_PART
from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

UPDATE = ("理微笑着点头。\n<UpdateVariable>\n_.add('理.好感度', 5);//她很开心\n"
          "_.set('时间', '09:00', '10:30');//过了一会\n</UpdateVariable>")


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def mvu_commits(tavern: Tavern) -> list[dict]:
    return [e.body[MVU_PART] for e in tavern.store.events.events_of_kind([STATE_KIND]) if MVU_PART in e.body]


@pytest.fixture
def demo(tavern: Tavern, corpus_dir: Path) -> int:
    [result] = tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
    pid = tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id
    tavern.timeline.swipe(pid, 1)  # the second greeting: the new town priest
    return pid


def affection(tavern: Tavern, pid: int) -> object:
    record = tavern.mvu.head(pid).record
    assert record is not None
    return record["stat_data"]["理"]["好感度"][0]


async def test_the_second_greeting_initialises_and_a_reply_updates(tavern: Tavern, model: ScriptedModel,
                                                                   demo: int) -> None:
    head = tavern.mvu.head(demo)
    assert head.committed is False  # shown before the first generation, not yet committed
    assert head.record["stat_data"]["理"]["好感度"][0] == 15
    assert head.record["delta_data"]["理"]["好感度"] == "0->15 (故事开始的设定)"
    assert mvu_commits(tavern) == []
    model.enqueue(UPDATE)
    await drain(tavern.steps.send(demo, "你好"))
    commits = mvu_commits(tavern)
    assert [bool(c.get("init")) for c in commits] == [True, False]
    assert commits[1]["base"] is not None
    head = tavern.mvu.head(demo)
    assert head.committed is True
    assert head.record["stat_data"]["理"]["好感度"] == [20, commits[0]["record"]["stat_data"]["理"]["好感度"][1]]
    assert head.record["stat_data"]["时间"][0] == "10:30"
    assert head.record["delta_data"]["理"]["好感度"] == "15->20 (她很开心)"
    assert head.record["delta_data"]["时间"] == "09:00->10:30 (过了一会)"


STAT_CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Ri", "first_mes": "Hello.",
    "description": "Affection {{get_message_variable::stat_data.好感度[0]}}; all {{getvar::stat_data}}.",
    "character_book": {"name": "ri-book", "entries": [
        {"keys": [], "comment": "[InitVar] start", "content": "好感度: [0, '好感度']\n", "enabled": False,
         "insertion_order": 1, "id": 0, "extensions": {}}]}}}


async def test_the_snapshot_is_bound_for_the_prompt(tavern: Tavern, model: ScriptedModel, tmp_path: Path) -> None:
    card = tmp_path / "ri.json"
    card.write_text(json.dumps(STAT_CARD, ensure_ascii=False), encoding="utf-8")
    [result] = tavern.imports.import_paths([card])
    pid = tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id
    model.enqueue("Fine, fine. _.add('好感度', 7);", "Yes.")
    await drain(tavern.steps.send(pid, "hi"))
    await drain(tavern.steps.send(pid, "again"))
    first, second = (system_text(model, i) for i in (0, 1))
    # A disabled [InitVar] entry still counts (variable_init.ts:262-263); YAML content.
    assert 'Affection 0; all {"好感度":[0,"好感度"]}.' in first
    assert 'Affection 7; all {"好感度":[7,"好感度"]}.' in second


def system_text(model: ScriptedModel, index: int) -> str:
    return "\n".join(str(m.get("content", "")) for m in model.requests[index].messages if m.get("role") == "system")


async def test_a_swipe_computes_from_the_message_before_it(tavern: Tavern, model: ScriptedModel, demo: int) -> None:
    model.enqueue(UPDATE, "理有些生气。_.add('理.好感度', -10);//被冒犯")
    await drain(tavern.steps.send(demo, "你好"))
    assert affection(tavern, demo) == 20
    await drain(tavern.steps.regenerate(demo))
    assert affection(tavern, demo) == 5  # 15 - 10: from the greeting's record, not from 20
    tavern.timeline.swipe(demo, -1)
    assert affection(tavern, demo) == 20  # switching swipes switches state
    tavern.timeline.swipe(demo, 1)
    assert affection(tavern, demo) == 5


async def test_an_edited_reply_keeps_its_state_and_its_edited_commands_do_not_run(
        tavern: Tavern, model: ScriptedModel, demo: int) -> None:
    # MagVarUpdate re-reads a message only when it is sent or received (initResponse: MESSAGE_SENT,
    # MESSAGE_RECEIVED): editing a reply's text changes neither the state it left nor runs new commands.
    model.enqueue(UPDATE, "理点头。_.add('理.好感度', 1);//又开心了一点")
    await drain(tavern.steps.send(demo, "你好"))
    assert affection(tavern, demo) == 20
    reply = tavern.playthroughs.messages(demo)[-1]
    edit = "理微笑。\n<UpdateVariable>\n_.set('理.好感度', 20, 50);\n</UpdateVariable>"
    tavern.timeline.edit_message(demo, reply.ref, edit)
    assert affection(tavern, demo) == 20  # not 15 (rolled back to the greeting's) nor 50 (the edited command)
    edited = tavern.playthroughs.messages(demo)[-1]
    assert edited.ref != reply.ref and tavern.mvu.display_texts(demo).get(edited.ref, "").startswith("理微笑。")
    await drain(tavern.steps.send(demo, "再见"))
    assert affection(tavern, demo) == 21  # the next reply builds on the edited reply's state
    tavern.timeline.delete_message(demo, tavern.playthroughs.messages(demo)[-1].ref)
    assert affection(tavern, demo) == 20  # a deleted reply's state goes with it


async def test_a_fork_inherits_its_fork_points_state(tavern: Tavern, model: ScriptedModel, demo: int) -> None:
    model.enqueue(UPDATE)
    await drain(tavern.steps.send(demo, "你好"))
    view = tavern.playthroughs.playthrough(demo)
    reply = [e for e in tavern.store.events.surface_events(view.session_id) if e.kind == "assistant/message"][-1]
    branch = tavern.timeline.branch_playthrough(demo, reply.ref)
    assert affection(tavern, branch.id) == 20
    model.enqueue("理低下头。_.add('理.好感度', 1);")
    await drain(tavern.steps.send(branch.id, "嗯"))
    assert affection(tavern, branch.id) == 21
    assert affection(tavern, demo) == 20  # the parent keeps its own


async def test_preview_never_commits(tavern: Tavern, model: ScriptedModel, demo: int) -> None:
    tavern.steps.preview(demo, "你好")
    tavern.mvu.head(demo)
    assert mvu_commits(tavern) == []


async def test_a_stale_base_is_refused_and_recomputed(tavern: Tavern, model: ScriptedModel, demo: int) -> None:
    model.enqueue(UPDATE)
    await drain(tavern.steps.send(demo, "你好"))
    view = tavern.playthroughs.playthrough(demo)
    reply = tavern.store.events.surface_events(view.session_id)
    message = [e for e in reply if e.kind == "assistant/message"][-1]
    events = tavern.store.events.surface_events(view.session_id)
    # Another writer commits state in the session after our read: our append on that read is refused.
    tavern.store.events.append(view.session_id, [NewEvent(STATE_KIND, None, {"origin": "operator", "variables": {
        "local": {"set": {"x": 1}}}})])
    assert tavern.mvu._append(view.session_id, events, {"message": list(message.ref), "base": None,
                                                        "record": {}}) is None
    # commit_reply reads again and lands; the fold accepts only a commit naming the record in force.
    again = tavern.mvu.commit_reply(demo, view.session_id, message)
    assert again is not None and again.record["stat_data"]["理"]["好感度"][0] == 20
    stale = {"message": list(message.ref), "base": [view.session_id, 1], "record": {"stat_data": {"理": 0}},
             "changes": [], "refused": []}
    tavern.store.events.append(view.session_id, [NewEvent(STATE_KIND, None, {"origin": "reply", MVU_PART: stale})])
    assert affection(tavern, demo) == 20  # the stale commit is not in force


async def test_a_card_without_mvu_material_gets_no_state(tavern: Tavern, model: ScriptedModel, tmp_path: Path) -> None:
    card = tmp_path / "plain.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Plain", "first_mes": "Hi. _.set('a', 1);"}}))
    [result] = tavern.imports.import_paths([card])
    pid = tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id
    model.enqueue("Sure. _.set('a', 2);")
    await drain(tavern.steps.send(pid, "hello"))
    assert tavern.mvu.head(pid).record is None
    assert mvu_commits(tavern) == []


async def test_the_persons_commands_commit_before_the_reply_and_plain_lines_commit_nothing(
        tavern: Tavern, model: ScriptedModel, demo: int) -> None:
    # handleVariablesInMessage (update_variables.ts:1423-1498): the 5-character minimum is for assistant messages
    # only, so a 4-character command line of the person's counts; a line with no command writes no record here
    # (MVU would copy the same state onto it: the record in force is unchanged either way).
    model.enqueue("理点头。")  # 4 characters: too short for MVU to read, no reply commit
    await drain(tavern.steps.send(demo, "早上好"))
    assert [c["message"] for c in mvu_commits(tavern)][1:] == []
    model.enqueue(UPDATE)
    await drain(tavern.steps.send(demo, "_.add('理.好感度', 50);"))
    commits = mvu_commits(tavern)
    assert len(commits) == 3  # init, the person's, the reply's
    person, reply = commits[1], commits[2]
    messages = tavern.playthroughs.messages(demo)
    assert tuple(person["message"]) == messages[-2].ref and tuple(reply["message"]) == messages[-1].ref
    assert person["changes"][0]["old"] == 15 and person["changes"][0]["new"] == 65
    assert reply["base"] is not None and reply["changes"][0]["old"] == 65 and affection(tavern, demo) == 70
    assert messages[-2].display is None  # the person's text is never rewritten (:1476: non-user messages only)
