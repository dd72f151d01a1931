"""Macros everywhere SillyTavern applies them, the same under every strategy (issue 17 §3).

Expected strings follow SillyTavern 1.18's engine (`macros/definitions/*.js`, `MacroCstWalker.js`) and its order
of substitution: the person's input when it is sent (`script.js` sendMessageAsUser), the card fields
(`getCharacterCardFields`), world info on activation, then the prompts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.service import Tavern
from tests.conftest import ScriptedModel

CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Tally", "first_mes": "Hello.",
    "description": "D {{setvar::d::x}}{{getvar::d}} {{if {{getvar::d}}}}yes{{else}}no{{/if}} {{reverse::{{char}}}}"
                   "{{// hidden}} {{ .n ??= 3 }}",
    "personality": "{{#if .d}} kept {{/if}}|{{ trim }}",
    "scenario": "{{.d == x}} {{ $g ||= G }}",
    "character_book": {"entries": [{"keys": ["hello"], "content": "Lore for {{user}}: {{getvar::d}} n={{.n}}",
                                    "enabled": True, "insertion_order": 100, "id": 1,
                                    "extensions": {"position": 0}}]}}}

# The input is expanded first (when sent): `{{incvar::n}}` on a missing n gives 1 (variables.js).
INPUT = "hello Tally, 1"
# description: setvar → "", getvar → "x", the if's condition "x" is truthy, reverse; the comment vanishes;
# `??=` finds n already set (by the input) and prints it.
DESCRIPTION = "D x yes yllaT 1"
PERSONALITY = " kept |"  # `#` keeps the block's spaces; `{{ trim }}` (inline) removes itself
SCENARIO = "true G"
LORE = "Lore for Ann: x n=1"  # world info is substituted after the card fields (d is set)


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


@pytest.fixture
def pid(tavern: Tavern, tmp_path: Path) -> int:
    card = tmp_path / "tally.json"
    card.write_text(json.dumps(CARD))
    [result] = tavern.imports.import_paths([card])
    return tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id


@pytest.mark.parametrize("strategy", ["compat", "preset-slots-first", "preset-roles-first", "projection"])
async def test_every_strategy_expands_the_same_text(tavern: Tavern, model: ScriptedModel, pid: int,
                                                    strategy: str) -> None:
    tavern.strategies.apply_strategy(pid, strategy)
    model.enqueue("ok")
    await drain(tavern.steps.send(pid, "hello {{char}}, {{incvar::n}}"))
    sent = "\n".join(str(m.get("content", "")) for m in model.requests[0].messages)
    for expected in (DESCRIPTION, SCENARIO, LORE):
        assert expected in sent, (strategy, expected, sent)
    assert PERSONALITY in sent
    assert model.requests[0].messages[-1]["content"] == INPUT
    assert "{{" not in sent
    # The input is stored as sent (expanded once, as SillyTavern stores it).
    assert [m.content for m in tavern.playthroughs.messages(pid)][-2] == INPUT
    assert tavern.variables.variables(pid).local == {"d": "x", "n": 1}
    assert tavern.variables.variables(pid).global_ == {"g": "G"}


async def test_world_info_keys_are_expanded_before_matching(tavern: Tavern, model: ScriptedModel,
                                                            tmp_path: Path) -> None:
    # ST substitutes each key before matching (format-digest §e "Where applied": WI keys).
    card = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
        "name": "Keeper", "first_mes": "Hello.", "description": "A keeper.",
        "character_book": {"entries": [
            {"keys": ["{{getvar::secret}}"], "content": "The secret is known.", "enabled": True,
             "insertion_order": 100, "id": 1, "extensions": {"position": 0}},
            {"keys": ["{{ reverse::enots }}"], "content": "Stones remembered.", "enabled": True,
             "insertion_order": 100, "id": 2, "extensions": {"position": 0}}]}}}
    path = tmp_path / "keeper.json"
    path.write_text(json.dumps(card))
    [result] = tavern.imports.import_paths([path])
    pid = tavern.playthroughs.new_playthrough(result.id, user_name="Ann").id
    tavern.variables.set(pid, "secret", "moonstone")
    model.enqueue("a", "b")
    await drain(tavern.steps.send(pid, "the moonstone glows"))
    first = "\n".join(str(m.get("content", "")) for m in model.requests[0].messages)
    assert "The secret is known." in first and "Stones remembered." not in first
    tavern.variables.set(pid, "secret", "amber")
    await drain(tavern.steps.send(pid, "stone and moonstone"))
    second = "\n".join(str(m.get("content", "")) for m in model.requests[1].messages)
    # The key now expands to "amber": the entry does not fire again (though "moonstone" is in the chat).
    assert "The secret is known." not in second and "Stones remembered." in second
