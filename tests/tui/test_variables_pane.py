"""Pilot test of the variables pane (palette "Variables" in the chat) on the real app and service.

Expected values: SillyTavern 1.18 `variables.js` — `{{incvar::turns}}` on a missing variable gives 1, then 2.
"""

from __future__ import annotations

import json
from pathlib import Path

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.variables import VariablesScreen
from tests.tui.conftest import ScriptedProvider, open_character, wait_until
from tests.tui.test_app import SIZE, send

CARD = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Tally", "first_mes": "I count turns.", "description": "Turn {{incvar::turns}}."}}


async def test_palette_opens_variables_with_their_history(corpus_tavern: Tavern, scripted: ScriptedProvider,
                                                          tmp_path: Path) -> None:
    card = tmp_path / "tally.json"
    card.write_text(json.dumps(CARD))
    corpus_tavern.imports.import_paths([card])
    scripted.enqueue("One.")
    scripted.enqueue("Two.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Tally")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and bool(app.screen.transcript.boxes))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        await send(pilot, chat, "first")
        await send(pilot, chat, "second")
        await pilot.press("ctrl+p")
        await pilot.press(*"Variables")
        await pilot.pause(0.2)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, VariablesScreen)
                         and "turns" in str(app.screen.now.content))
        pane = app.screen
        assert isinstance(pane, VariablesScreen)
        assert str(pane.now.content) == "Local (this branch): 1\n  turns = 2\nGlobal (every chat): 0\n  (none)"
        history = str(pane.history.content).splitlines()
        assert history == ["after message 2 ('first') · by a reply's prompt", "    local: turns = 1",
                           "after message 4 ('second') · by a reply's prompt", "    local: turns = 2"]
        # A change made elsewhere (as `tavern vars --set` would) shows after a refresh.
        corpus_tavern.variables.set(chat.playthrough_id, "mood", "calm")
        await pilot.press("r")
        await wait_until(pilot, lambda: "mood" in str(pane.now.content))
        assert 'mood = "calm"' in str(pane.now.content)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen))
