"""Pilot test of the variables pane (palette "Variables" in the chat) on the real app and service.

Expected values: SillyTavern 1.18 `variables.js` — `{{incvar::turns}}` on a missing variable gives 1, then 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.variables import VariablesScreen
from tests.tui.conftest import ScriptedProvider, open_character, wait_until, workers_idle
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
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
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
        assert "MVU state (stat_data): ctrl+g" in str(pane.query_one("#vars-title").content)  # where MVU's state is
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
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)


COUNTER = {"spec": "chara_card_v2", "spec_version": "2.0", "data": {
    "name": "Counter", "first_mes": "Ready.", "description": "This is turn {{incvar::turns}} of the story."}}


def turn_in(request) -> str:  # type: ignore[no-untyped-def]
    """The "This is turn N" sentence the request's system text holds."""
    text = "\n".join(str(m.get("content", "")) for m in request.messages if m.get("role") == "system")
    start = text.index("This is turn ")
    return text[start:text.index(" of the story.", start)]


@pytest.mark.slow
async def test_a_turn_counter_card_counts_five_turns_a_swipe_and_a_restart(
        make_tavern, scripted: ScriptedProvider, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Issue 17, tried as a new user would. SillyTavern variables.js: `{{incvar::turns}}` =
    # addLocalVariable(turns, 1) and prints the new value: 1 on the first request, then 2, ...
    # A swipe regenerates the reply from the state before it (the count is not bumped twice);
    # the variables survive a restart.
    tavern = make_tavern(scripted, import_corpus=False)
    card = tmp_path / "counter.json"
    card.write_text(json.dumps(COUNTER))
    tavern.imports.import_paths([card])
    app = TavernApp(tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Counter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        chat = app.screen
        assert isinstance(chat, ChatScreen)
        for n in range(1, 6):
            scripted.enqueue(f"Reply {n}.")
            await send(pilot, chat, f"turn {n}")
            assert turn_in(scripted.requests[-1]) == f"This is turn {n}"
        pid = chat.playthrough_id
        assert tavern.variables.variables(pid).local == {"turns": 5}
        # Swipe right past the last reply: a new variant of reply 5, built from before it.
        scripted.enqueue("Reply 5, again.")
        await pilot.press("ctrl+right")
        await pilot.app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not chat.generating and chat.transcript.boxes[-1].text == "Reply 5, again.")
        assert turn_in(scripted.requests[-1]) == "This is turn 5"
        assert tavern.variables.variables(pid).local == {"turns": 5}
        assert tavern.timeline.swipe_state(pid).label == "2/2"
        # Back to the first variant: the same state before it, the same count.
        await pilot.press("ctrl+left")
        await wait_until(pilot, lambda: chat.transcript.boxes[-1].text == "Reply 5.")
        await workers_idle(pilot)
        assert tavern.variables.variables(pid).local == {"turns": 5}
    tavern.close()
    # Restart: a new service and app on the same database open the same playthrough.
    again = make_tavern(scripted, import_corpus=False)
    assert again.variables.variables(pid).local == {"turns": 5}
    app = TavernApp(again)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Counter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        chat = app.screen
        assert isinstance(chat, ChatScreen) and chat.playthrough_id == pid
        assert chat.transcript.boxes[-1].text == "Reply 5."  # the variant shown when it closed
        scripted.enqueue("Reply 6.")
        await send(pilot, chat, "turn 6")
        assert turn_in(scripted.requests[-1]) == "This is turn 6"
        assert again.variables.variables(pid).local == {"turns": 6}
