"""The whole issue-18 loop end to end with MagVarUpdate's demo card against the loopback OpenAI server ("How it
is checked", fourth bullet), plus MVU's handling of the person's messages and of the text it stores back, and the
state facts of every traced request.

Start on the second greeting (`_.set("理.好感度",0,15)`: 15). The person's message carries a command
(`_.set('理.当前所想', '在想新牧师');` on a `[value, "description"]` pair: only element 0 changes,
update_variables.ts:769-785), which MVU applies when the message is sent (`MESSAGE_SENT` →
`handleVariablesInMessage`, user messages included), so the first request already reads it. The reply's update
block adds 5 (15 → 20, :1344-1375) and tries `_.insert('user', 'x', 1)` into the non-extensible `user` object,
refused "SCHEMA VIOLATION: Cannot assign new key 'x' into non-extensible object at path 'user'." (:862-880).
MVU then stores the reply back with `\\n\\n<StatusPlaceHolderImpl/>` appended (:1476-1496); the card's scripts
hide the block and the placeholder from the next request (对ai隐藏状态栏, 去除变量更新: promptOnly) and draw the
status bar in the transcript (状态栏: markdownOnly, maxDepth 2). The `relation_level` template takes its formal
stage below 20 ("恪守礼仪") and the next one from 20 ("渐渐变得稍微轻松了一些"). A swipe of the reply computes
from the person's message (its own record), not from the first reply.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tavern_tui.config import ProviderSettings, Settings
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.service import Tavern
from tavern_tui.service.mvu import stat_hash
from tests.support.cli import run_cli
from tests.support.loopback import LoopbackServer, sse_chunks_for

SAY = "你好，我是新来的牧师。_.set('理.当前所想', '在想新牧师');//用户设定"
REPLY = ("理轻轻点头，露出微笑。\n<UpdateVariable>\n_.add('理.好感度', 5);//第一次见面很愉快\n"
         "_.insert('user', 'x', 1);//试试\n</UpdateVariable>")
SWIPED = "理有些紧张地后退了一步。\n<UpdateVariable>\n_.add('理.好感度', -3);//被吓到了\n</UpdateVariable>"
REFUSAL = "SCHEMA VIOLATION: Cannot assign new key 'x' into non-extensible object at path 'user'. (试试)"



@pytest.fixture
def tavern(server: LoopbackServer, db_url: str):  # type: ignore[no-untyped-def]
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=10),
                        world_info=WorldInfoSettings(budget=100), max_context=64000)
    service = Tavern(settings)
    yield service
    service.close()


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def sent(server: LoopbackServer, index: int) -> list[dict]:
    return server.requests[index].json["messages"]


def everything(messages: list[dict]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages)


async def test_the_mvu_card_end_to_end(tavern: Tavern, server: LoopbackServer, corpus_dir: Path) -> None:
    [card] = tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
    assert card.id is not None
    tavern.scripts.set_allowed(card.id)  # the person allows the card's six regex scripts (asked once)
    pid = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
    tavern.timeline.swipe(pid, 1)  # the second greeting: the new town priest
    server.enqueue_sse(sse_chunks_for(REPLY))
    server.enqueue_sse(sse_chunks_for(SWIPED))
    server.enqueue_sse(sse_chunks_for("理安静地听着。"))

    await drain(tavern.steps.send(pid, SAY))
    first = everything(sent(server, 0))
    # The person's command is applied before the request: the variables entry reads the changed pair.
    assert '"当前所想":["在想新牧师",' in first and '"好感度":[15,' in first
    assert "恪守礼仪" in first and "渐渐变得稍微轻松了一些" not in first  # the stage below 20

    head = tavern.mvu.head(pid)
    assert head.record is not None and head.record["stat_data"]["理"]["好感度"][0] == 20
    # The committed record keeps the [InitVar] entry's key order (JSON.stringify / YAML print in that order).
    assert list(head.record["stat_data"]) == ["日期", "时间", "user", "地点", "理"]
    assert '{"日期":["03月15日",' in everything(sent(server, 0))
    assert head.record["stat_data"]["理"]["当前所想"][0] == "在想新牧师"
    assert head.changes == [{"type": "add", "path": "理.好感度", "old": 15, "new": 20, "reason": "第一次见面很愉快",
                             "display": "15->20 (第一次见面很愉快)"}]
    assert [r["reason"] for r in head.refused] == [REFUSAL]
    assert tavern.steps.last_mvu[pid].refused == head.refused  # what the status line reports

    # The log keeps the raw reply; the transcript shows MVU's stored-back text through the card's scripts.
    messages = tavern.playthroughs.messages(pid)
    reply = messages[-1]
    assert reply.content == REPLY
    assert reply.shown.startswith("理轻轻点头，露出微笑。") and "角色状态" in reply.shown and "好感度" in reply.shown
    assert "UpdateVariable" not in reply.shown and "<" not in reply.shown
    assert messages[-2].content == SAY and messages[-2].display is None  # the person's text is never rewritten

    # Swipe the reply: a new variant computed from the person's message (当前所想 kept, 15 - 3 = 12) ...
    assert tavern.timeline.swipe(pid, 1) is None
    await drain(tavern.steps.regenerate(pid))
    swiped = tavern.mvu.head(pid).record
    assert swiped is not None
    assert swiped["stat_data"]["理"]["好感度"][0] == 12 and swiped["stat_data"]["理"]["当前所想"][0] == "在想新牧师"
    assert '"好感度":[15,' in everything(sent(server, 1)) and "恪守礼仪" in everything(sent(server, 1))
    # ... and switching back switches the state back.
    tavern.timeline.swipe(pid, -1)
    assert tavern.playthroughs.messages(pid)[-1].content == REPLY
    assert tavern.mvu.head(pid).record["stat_data"]["理"]["好感度"][0] == 20

    await drain(tavern.steps.send(pid, "今天天气很好。"))
    second = sent(server, 2)
    replies = [str(m["content"]) for m in second if m["role"] == "assistant"]
    assert "理轻轻点头，露出微笑。\n\n\n" in replies  # "\n" block "\n\n" placeholder: both hidden from the model
    assert not any("UpdateVariable" in r or "StatusPlaceHolderImpl" in r for r in replies)
    assert "渐渐变得稍微轻松了一些" in everything(second) and "恪守礼仪" not in everything(second)  # from 20 on


async def test_every_traced_request_names_its_state_and_a_commit_shows_what_changed(
        tavern: Tavern, server: LoopbackServer, corpus_dir: Path, db_url: str, isolated_profile: Path) -> None:
    [card] = tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
    pid = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
    tavern.timeline.swipe(pid, 1)
    greeting = tavern.mvu.head(pid)
    server.enqueue_sse(sse_chunks_for(REPLY))
    server.enqueue_sse(sse_chunks_for("理安静地听着。"))
    await drain(tavern.steps.send(pid, SAY))
    await drain(tavern.steps.send(pid, "今天天气很好。"))
    after_reply = tavern.mvu.head(pid)
    traces = tavern.traces.traces(pid)
    assert len(traces) == 2
    first, second = (tavern.traces.trace(t.id)["mvu"] for t in traces)

    built = first["built_from"]
    assert built["message"] == list(greeting.message) and built["committed"] is True
    assert built["pending"][0]["changes"][0]["path"] == "理.当前所想"
    assert built["pending"][0]["changes"][0]["old"] == "今天吃什么好呢？"  # the card's [InitVar] value
    assert built["stat_data_sha256"] != stat_hash(greeting.record)  # the person's command, applied first
    user_commit, reply_commit = first["commits"]
    assert user_commit["origin"] == "user" and reply_commit["origin"] == "reply"
    assert user_commit["base"] == built["commit"] and reply_commit["base"] == user_commit["ref"]
    assert built["stat_data_sha256"] == user_commit["stat_data_sha256"]
    assert reply_commit["changes"][0] | {} == {"type": "add", "path": "理.好感度", "old": 15, "new": 20,
                                               "reason": "第一次见面很愉快", "display": "15->20 (第一次见面很愉快)"}
    assert [r["reason"] for r in reply_commit["refused"]] == [REFUSAL]
    assert reply_commit["stat_data_sha256"] == stat_hash(after_reply.record)

    # The second request was built from the reply's record, and its step changed nothing.
    assert second["built_from"]["commit"] == reply_commit["ref"]
    assert second["built_from"]["stat_data_sha256"] == stat_hash(after_reply.record)
    assert second["built_from"]["derived_texts"] == [list(tavern.playthroughs.messages(pid)[-3].ref)]
    assert second["commits"][0]["changes"] == [] and second["commits"][0]["refused"] == []

    # `tavern trace show` prints them; --json carries them (the real command).
    env = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")} | {"TAVERN_HOME": str(isolated_profile)}

    def show(*extra: str) -> str:
        done = run_cli(["--db", db_url, "trace", "show", traces[0].id, *extra], env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert json.loads(show("--json"))["mvu"] == first
    text = show()
    assert f"stat_data sha256 {built['stat_data_sha256'][:16]}…" in text
    assert "  changed 理.好感度: 15 → 20  (第一次见面很愉快)" in text
    assert f"  refused _.insert('user', 'x', 1);//试试: {REFUSAL}" in text
    assert f"mvu commit {user_commit['ref'][0]}:{user_commit['ref'][1]} (user)" in text
