"""Issue 17: macros that read or write the playthrough's state, through a real step.

Rules: SillyTavern world-info.js runs `substituteParams(key)` on every primary and secondary key it
scans (no read-only mode), so a `{{setvar}}`/`{{incvar}}` in a key writes the chat's variables;
authors-note.js `{{authorsNote}}` = `chat_metadata.note_prompt ?? ''`, `{{charAuthorsNote}}` /
`{{defaultAuthorsNote}}` = '' when none is set; the Summarize extension's `{{summary}}` = the newest
summary; chat-macros.js `{{lastSwipeId}}` = the last message's `swipes.length`, `{{currentSwipeId}}` =
`swipe_id + 1`, both '' for a message without swipes (the person's own); while a swipe is generated the
swiped reply is the last message, its `swipe_id` one past its swipes.
"""

from __future__ import annotations

import json
from pathlib import Path

from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


def system_text(model: ScriptedModel, index: int) -> str:
    return "\n".join(str(m.get("content", "")) for m in model.requests[index].messages if m.get("role") == "system")


def import_card(tavern: Tavern, tmp_path: Path, data: dict) -> int:
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data}))
    [result] = tavern.imports.import_paths([card])
    return tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id


KEY_CARD = {
    "name": "Keeper", "first_mes": "Hello.", "description": "Lamps seen: {{getvar::lamps}}.",
    "character_book": {"name": "Keeper lore", "entries": [
        {"keys": ["lamp{{incvar::lamps}}"], "content": "The lamp glows.", "enabled": True, "insertion_order": 10,
         "id": 1, "extensions": {"position": 0}},
    ]}}


async def test_a_setvar_in_a_world_info_key_is_kept(tavern: Tavern, model: ScriptedModel, tmp_path: Path) -> None:
    pid = import_card(tavern, tmp_path, KEY_CARD)
    model.enqueue("r1", "r2")
    await drain(tavern.steps.send(pid, "I light a lamp."))
    # The key is evaluated once in the step's scan (world info runs before the card fields are
    # expanded), and its write is committed with the step.
    assert tavern.variables.variables(pid).local == {"lamps": 1}
    assert "Lamps seen: 1." in system_text(model, 0)
    await drain(tavern.steps.send(pid, "Another lamp."))
    assert tavern.variables.variables(pid).local == {"lamps": 2}
    # A preview runs the same scan and commits nothing.
    tavern.steps.preview(pid, "preview only")
    assert tavern.variables.variables(pid).local == {"lamps": 2}


STATE_CARD = {
    "name": "Sage", "first_mes": "Welcome.",
    "description": "AN=[{{authorsNote}}] CAN=[{{charAuthorsNote}}] DAN=[{{defaultAuthorsNote}}] "
                   "S=[{{summary}}] LS=[{{lastSwipeId}}] CS=[{{currentSwipeId}}]"}


async def test_swipe_ids_and_an_empty_summary(tavern: Tavern, model: ScriptedModel, tmp_path: Path) -> None:
    pid = import_card(tavern, tmp_path, STATE_CARD)
    model.enqueue("r1", "r1 again", "r1 third")
    await drain(tavern.steps.send(pid, "u1"))
    # The last message is the person's (no swipes): both ids are empty; no summary, no note.
    assert "AN=[] CAN=[] DAN=[] S=[] LS=[] CS=[]" in system_text(model, 0)
    text = tavern.steps.preview(pid)["messages"]
    joined = "\n".join(m["content"] for m in text)
    # Now the chat ends with the reply: one swipe, the first.
    assert "LS=[1] CS=[1]" in joined
    await drain(tavern.steps.regenerate(pid))
    # While a swipe is generated, the reply being swiped is the last message: 1 swipe, the 2nd in progress.
    assert "LS=[1] CS=[2]" in system_text(model, 1)
    await drain(tavern.steps.regenerate(pid))
    assert "LS=[2] CS=[3]" in system_text(model, 2)
    joined = "\n".join(m["content"] for m in tavern.steps.preview(pid)["messages"])
    assert "LS=[3] CS=[3]" in joined
    tavern.timeline.swipe(pid, -1)
    joined = "\n".join(m["content"] for m in tavern.steps.preview(pid)["messages"])
    assert "LS=[3] CS=[2]" in joined


async def test_summary_is_the_newest_summary_text(tavern: Tavern, model: ScriptedModel, tmp_path: Path) -> None:
    pid = import_card(tavern, tmp_path, {"name": "Sage", "first_mes": "Welcome.", "description": "S=[{{summary}}]"})
    model.enqueue("r1", "r2", "The first recap.", "r3", "The second recap.", "r4")
    await drain(tavern.steps.send(pid, "u1"))
    await drain(tavern.steps.send(pid, "u2"))
    assert "S=[]" in system_text(model, 1)
    await tavern.compaction.compact(pid, keep=1)
    await drain(tavern.steps.send(pid, "u3"))
    assert "S=[The first recap.]" in system_text(model, 3)
    await tavern.compaction.compact(pid, keep=1)  # summarises the first summary with what followed it
    await drain(tavern.steps.send(pid, "u4"))
    assert "S=[The second recap.]" in system_text(model, 5)
