"""The MVU state tools (issue 19 §2 "State tools": read the MVU snapshot; an update goes through the same schema
and CAS path as an update block), on the real store against the loopback OpenAI server, with MagVarUpdate's demo
card (corpus/stateful/qingkong_li_mvu.png).

Expected values come from the card and MVU's code: the second greeting leaves `理.好感度` at 15 (see
test_mvu_store); `add` on a value with description adds to element 0 (update_variables.ts `add`); a `set` on a
path that is not in stat_data is skipped with "Path '…' does not exist in stat_data, skipping set command "
(update_variables.ts:760, as test_mvu_rules asserts).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavern_tui.config import ProviderSettings, Settings, ToolSettings
from tavern_tui.engine.events import NewEvent
from tavern_tui.engine.state import STATE_KIND
from tavern_tui.engine.step import ToolResultStored
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.mvu import MVU_PART
from tavern_tui.service import Tavern
from tavern_tui.tools.builtin import MVU_WHOLE_CHARS
from tests.support.loopback import LoopbackServer, sse_chunks_for, sse_tool_call_chunks

STATE_TOOLS = ("mvu_read", "mvu_update")



def make(db_url: str, server: LoopbackServer, enabled: tuple[str, ...] = ("roll_dice", *STATE_TOOLS)) -> Tavern:
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=10),
                        world_info=WorldInfoSettings(budget=100), max_context=32000,
                        tools=ToolSettings(enabled=enabled))
    return Tavern(settings)


def demo(tavern: Tavern, corpus_dir: Path) -> int:
    [card] = tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
    pid = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
    tavern.timeline.swipe(pid, 1)  # the second greeting: 理.好感度 = 15
    return pid


def affection(tavern: Tavern, pid: int) -> object:
    record = tavern.mvu.head(pid).record
    assert record is not None
    return record["stat_data"]["理"]["好感度"][0]


async def drain(updates: Any) -> list[Any]:
    return [u async for u in updates]


def offered(server: LoopbackServer, index: int) -> list[str]:
    return [t["function"]["name"] for t in server.requests[index].json.get("tools") or []]


async def test_read_then_update_then_the_replys_block_all_commit_in_order(server: LoopbackServer, db_url: str,
                                                                          corpus_dir: Path) -> None:
    tavern = make(db_url, server)
    try:
        pid = demo(tavern, corpus_dir)
        server.enqueue_sse(sse_tool_call_chunks([
            ("c_read", "mvu_read", '{"path": "理.好感度"}'),
            ("c_add", "mvu_update", '{"commands": "_.add(\'理.好感度\', 5);//牧师很亲切"}')]))
        reply = "理笑了。\n<UpdateVariable>\n_.add('理.好感度', 1);//又笑了\n</UpdateVariable>"
        server.enqueue_sse(sse_chunks_for(reply))
        updates = await drain(tavern.steps.send(pid, "你好，我是新来的牧师。"))
        assert offered(server, 0) == ["roll_dice", "mvu_read", "mvu_update"]
        read, update = (u for u in updates if isinstance(u, ToolResultStored))
        assert read.outcome.status == "ok"
        value = json.loads(read.event.content)
        assert value["path"] == "stat_data.理.好感度" and value["value"][0] == 15  # read before the update ran
        # The transcript's one line names the value (this one is under the 60-character cut).
        shown = json.dumps(value["value"], ensure_ascii=False)
        assert read.outcome.detail["summary"] == f"stat_data.理.好感度 = {shown}"
        assert update.outcome.status == "ok"
        assert json.loads(update.event.content)["changes"] == [
            {"type": "add", "path": "理.好感度", "old": 15, "new": 20, "reason": "牧师很亲切",
             "display": "15->20 (牧师很亲切)"}]
        assert update.outcome.detail["summary"] == "理.好感度: 15->20 (牧师很亲切)"
        # The next step and the reply's own block start from the tool's commit: 15 + 5 + 1.
        assert affection(tavern, pid) == 21
        commits = [e.body for e in tavern.store.events.events_of_kind([STATE_KIND]) if MVU_PART in e.body]
        assert [c["origin"] for c in commits] == ["reply", "tool", "reply"]  # init, the tool, the final reply
        tool_commit, final = commits[1][MVU_PART], commits[2][MVU_PART]
        calls = next(e for e in tavern.store.events.surface_events(tavern.playthroughs.playthrough(pid).session_id)
                     if e.kind == "assistant/message" and e.body.get("tool_calls"))
        assert tuple(tool_commit["message"]) == calls.ref  # the commit belongs to the reply that asked
        assert final["base"] is not None and final["changes"][0]["old"] == 20
        # The snapshot bound for the next request shows it too (mvu_read of the whole snapshot).
        server.enqueue_sse(sse_tool_call_chunks([("c_all", "mvu_read", "{}")]))
        server.enqueue_sse(sse_chunks_for("好。"))
        updates = await drain(tavern.steps.send(pid, "再见。"))
        [whole] = [u for u in updates if isinstance(u, ToolResultStored)]
        snapshot = json.loads(whole.event.content)  # the card's snapshot is over 6,000 characters: its values
        bound = tavern.mvu.snapshot(pid)
        assert len(json.dumps(bound, ensure_ascii=False)) > MVU_WHOLE_CHARS
        assert snapshot["stat_data"] == bound["stat_data"] and snapshot["stat_data"]["理"]["好感度"][0] == 21
        assert snapshot["note"].endswith("read delta_data, display_data, initialized_lorebooks, schema by path")
    finally:
        tavern.close()


async def test_a_refused_command_is_an_error_the_model_reads(server: LoopbackServer, db_url: str,
                                                             corpus_dir: Path) -> None:
    tavern = make(db_url, server)
    try:
        pid = demo(tavern, corpus_dir)
        server.enqueue_sse(sse_tool_call_chunks([
            ("c_bad", "mvu_update", '{"commands": "_.set(\'理.心情\', \'好\');_.add(\'理.好感度\', 2);"}'),
            ("c_none", "mvu_update", '{"commands": "make her happier"}'),
            ("c_gone", "mvu_read", '{"path": "理.心情"}')]))
        server.enqueue_sse(sse_chunks_for("理点头。"))
        updates = await drain(tavern.steps.send(pid, "你好"))
        bad, none, gone = (u for u in updates if isinstance(u, ToolResultStored))
        assert bad.outcome.status == "error"
        error = json.loads(bad.event.content)["error"]
        refusal = "_.set('理.心情', '好'); refused: Path '理.心情' does not exist in stat_data, skipping set command"
        assert refusal in error
        assert "Applied: 理.好感度: 15->17." in error  # the batch went on, as MVU's does; the change is committed
        assert none.outcome.status == "error" and "no MVU command found" in json.loads(none.event.content)["error"]
        assert gone.outcome.status == "error"
        assert "no value at 'stat_data.理.心情'" in json.loads(gone.event.content)["error"]
        assert affection(tavern, pid) == 17
        second = server.requests[1].json["messages"]
        assert {"role": "tool", "tool_call_id": "c_bad", "content": bad.event.content} in second
    finally:
        tavern.close()


async def test_the_update_is_a_compare_and_set(server: LoopbackServer, db_url: str, corpus_dir: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tavern = make(db_url, server)
    try:
        pid = demo(tavern, corpus_dir)
        tavern.mvu.ensure_initialised(pid)
        session = tavern.playthroughs.playthrough(pid).session_id
        real = tavern.mvu.surface_events
        raced = []

        def racing(session_id: int) -> list[Any]:
            events = real(session_id)
            if not raced:  # another writer's state commit lands just after our first read
                raced.append(True)
                tavern.store.events.append(session_id, [NewEvent(STATE_KIND, None, {
                    "origin": "operator", "variables": {"local": {"set": {"x": 1}}}})])
            return events

        monkeypatch.setattr(tavern.mvu, "surface_events", racing)
        view = tavern.mvu.commit_commands(pid, "_.add('理.好感度', 4);")
        assert raced and view.committed and view.record["stat_data"]["理"]["好感度"][0] == 19
        commits = [e for e in tavern.store.events.events_of_kind([STATE_KIND], [session]) if MVU_PART in e.body]
        assert [c.body["origin"] for c in commits] == ["reply", "tool"]  # one tool commit: the stale one was refused
        monkeypatch.undo()
        assert affection(tavern, pid) == 19
    finally:
        tavern.close()


async def test_state_tools_only_with_mvu_state(server: LoopbackServer, db_url: str, corpus_dir: Path) -> None:
    tavern = make(db_url, server)
    try:
        [plain] = tavern.imports.import_paths([corpus_dir / "cards" / "seraphina_chara_ccv3.png"])
        pid = tavern.playthroughs.new_playthrough(plain.id, user_name="Ann").id
        server.enqueue_sse(sse_chunks_for("Hello."))
        await drain(tavern.steps.send(pid, "Hi."))
        assert offered(server, 0) == ["roll_dice"]  # no MVU material: no state tools
        stateful = demo(tavern, corpus_dir)
        assert [t.spec.name for t in tavern.tools.toolbox(stateful).builtins.values()] == ["roll_dice", *STATE_TOOLS]
    finally:
        tavern.close()
    off = make(db_url, server, enabled=("roll_dice",))
    try:
        pid = off.playthroughs.playthroughs()[-1].id
        assert [t.spec.name for t in off.tools.toolbox(pid).builtins.values()] == ["roll_dice"]  # off unless enabled
        listed = {t["name"]: t["enabled"] for t in off.tools.listing()["tools"]}
        assert listed == {"roll_dice": True, "lore_search": False, "mvu_read": False, "mvu_update": False}
        assert [t.get("only_with") for t in off.tools.listing()["tools"]] == [None, None, "MVU state", "MVU state"]
    finally:
        off.close()
