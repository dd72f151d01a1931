"""End to end against the loopback OpenAI server with MagVarUpdate's demo card (issue 18 "How it is checked"):
start on its second greeting, reply with an update block, see the state change (and the next request carry it
through the card's constant `variables` entry, `{{get_message_variable::stat_data}}`), swipe and see the state
follow the swipe.

World info runs with MVU's recommended lorebook settings (variable_init.ts `updateLorebookSettings`:
`context_percentage: 100`), so the card's constant entries fit. Values: the greeting sets `理.好感度` 0 → 15;
`_.add('理.好感度', 5)` makes it 20, the swipe's `_.add('理.好感度', -3)` makes it 12 from the greeting's 15.
"""

from __future__ import annotations

import json
from pathlib import Path

from tavern_tui.config import ProviderSettings, Settings
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.service import Tavern
from tests.support.loopback import LoopbackServer, sse_chunks_for

FIRST = "理轻轻点头，露出微笑。\n<UpdateVariable>\n_.add('理.好感度', 5);//第一次见面很愉快\n</UpdateVariable>"
SWIPED = "理有些紧张地后退了一步。\n<UpdateVariable>\n_.add('理.好感度', -3);//被吓到了\n</UpdateVariable>"



async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def affection(tavern: Tavern, pid: int) -> object:
    record = tavern.mvu.head(pid).record
    assert record is not None
    return record["stat_data"]["理"]["好感度"][0]


def request_text(server: LoopbackServer, index: int) -> str:
    body = server.requests[index].json
    return "\n".join(str(m.get("content", "")) for m in body["messages"])


async def test_update_block_changes_state_and_a_swipe_follows(server: LoopbackServer, db_url: str,
                                                              corpus_dir: Path) -> None:
    settings = Settings(db_url=db_url, provider=ProviderSettings(base_url=server.base_url, model="loop-1", timeout=10),
                        world_info=WorldInfoSettings(budget=100), max_context=32000)
    tavern = Tavern(settings)
    try:
        [card] = tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
        pid = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
        tavern.timeline.swipe(pid, 1)  # the second greeting (alternate_greetings[0]): the new town priest
        assert affection(tavern, pid) == 15
        server.enqueue_sse(sse_chunks_for(FIRST))
        server.enqueue_sse(sse_chunks_for(SWIPED))
        server.enqueue_sse(sse_chunks_for("理安静地听着。"))
        await drain(tavern.steps.send(pid, "你好，我是新来的牧师。"))
        assert affection(tavern, pid) == 20
        head = tavern.mvu.head(pid)
        assert head.changes == [{"type": "add", "path": "理.好感度", "old": 15, "new": 20, "reason": "第一次见面很愉快",
                                 "display": "15->20 (第一次见面很愉快)"}]
        assert '"好感度":[15,' in request_text(server, 0)  # the greeting's state, bound for the first request
        # Swipe right past the last reply: a new variant, computed from the message before it.
        assert tavern.timeline.swipe(pid, 1) is None
        await drain(tavern.steps.regenerate(pid))
        assert '"好感度":[15,' in request_text(server, 1)
        assert affection(tavern, pid) == 12
        tavern.timeline.swipe(pid, -1)
        assert affection(tavern, pid) == 20
        tavern.timeline.swipe(pid, 1)
        assert affection(tavern, pid) == 12
        await drain(tavern.steps.send(pid, "今天天气很好。"))
        assert '"好感度":[12,' in request_text(server, 2)
        assert json.loads(json.dumps(tavern.mvu.head(pid).record["stat_data"]["理"]["好感度"]))[0] == 12
    finally:
        tavern.close()
