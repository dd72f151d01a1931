"""Assembly strategies through the service: preset-slots-first maps the preset onto native
delivery and names every move (DESIGN.md "Strategies"; issue 5 §4)."""

from __future__ import annotations

import json
from pathlib import Path

from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

CARD = {"spec": "chara_card_v2", "spec_version": "2.0",
        "data": {"name": "Mira", "first_mes": "Hello.", "description": "Mira keeps the lighthouse."}}
PRESET = {
    "temperature": 0.5,
    "prompts": [
        {"identifier": "main", "name": "Main", "role": "system", "content": "Write {{char}}'s reply.",
         "system_prompt": True},
        {"identifier": "charDescription", "name": "Char", "system_prompt": True, "marker": True},
        {"identifier": "chatHistory", "name": "History", "system_prompt": True, "marker": True},
        {"identifier": "jailbreak", "name": "Post", "role": "system", "content": "Stay in character.",
         "system_prompt": True},
        {"identifier": "deep", "name": "Deep", "role": "system", "content": "Remember the storm.",
         "injection_position": 1, "injection_depth": 2, "injection_order": 100},
    ],
    "prompt_order": [{"character_id": 100001, "order": [
        {"identifier": "main", "enabled": True}, {"identifier": "charDescription", "enabled": True},
        {"identifier": "chatHistory", "enabled": True}, {"identifier": "jailbreak", "enabled": True},
        {"identifier": "deep", "enabled": True}]}],
}


async def test_slots_first_puts_the_preset_in_the_system_section_and_names_each_move(
        tavern: Tavern, model: ScriptedModel, tmp_path: Path) -> None:
    (tmp_path / "mira.json").write_text(json.dumps(CARD))
    (tmp_path / "Lighthouse.json").write_text(json.dumps(PRESET))
    card, preset = tavern.imports.import_paths([tmp_path / "mira.json", tmp_path / "Lighthouse.json"])
    assert preset.kind == "preset" and preset.ok, preset.error
    pid = tavern.playthroughs.new_playthrough(card.id, user_name="Ann").id
    tavern.presets.bind_preset(pid, preset.id)
    tavern.strategies.apply_strategy(pid, "preset-slots-first")
    shown = tavern.steps.preview(pid, "Is a storm coming?")
    model.enqueue("Perhaps.")
    async for _ in tavern.steps.send(pid, "Is a storm coming?"):
        pass
    sent = model.requests[-1]
    system = sent.messages[0]
    assert system["role"] == "system"
    # prompt_order before the history, then what had no native slot (the in-chat injection,
    # then the post-history instruction, in SillyTavern's order of the request).
    assert system["content"] == ("Write Mira's reply.\n\nMira keeps the lighthouse.\n\nRemember the storm.\n\n"
                                 "Stay in character.")
    assert sent.messages[1:] == [{"role": "assistant", "content": "Hello."},
                                 {"role": "user", "content": "Is a storm coming?"}]
    assert sent.config["temperature"] == 0.5
    moves = " | ".join(shown["adjustments"])
    assert "'deep' (in-chat injection)" in moves and "'jailbreak' (after the history)" in moves
    # The system section is durable (an official section), unlike projection's request-only bodies.
    system_messages = [m for m in tavern.playthroughs.messages(pid, include_system=True) if m.role == "system"]
    assert [m.content for m in system_messages] == [system["content"]]
