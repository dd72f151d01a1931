"""An opening draft's first line shows under the greeting as soon as Enter is pressed, and what the
person types right after (while the draft is made a playthrough) is in the new chat's composer,
not lost with the draft screen."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tavern_tui.service import Tavern
from tavern_tui.service.openings import OpeningService
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.widgets.message_box import MessageBox
from tests.tui.conftest import ScriptedProvider, open_character, wait_until
from tests.tui.test_app import SIZE


async def test_keys_typed_while_the_first_line_starts_the_playthrough_stay(
        corpus_tavern: Tavern, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    made = threading.Event()
    begin = OpeningService.begin

    def slow_begin(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.wait(30)  # the playthrough is being made: the person goes on typing
        return begin(self, *args, **kwargs)

    monkeypatch.setattr(OpeningService, "begin", slow_begin)
    scripted.enqueue("Welcome, traveller.")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Skynet", playthrough=False)
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        draft = app.screen
        await pilot.press(*"Hello", "enter")
        # The line shows under the greeting at once, while the playthrough is still being made.
        await wait_until(pilot, lambda: [box.text for box in draft.query(MessageBox)] == ["Hello"])
        assert not made.is_set()
        await pilot.press(*"and more")
        await wait_until(pilot, lambda: draft.prompt.value == "and more")
        made.set()
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        chat = app.screen
        await wait_until(pilot, lambda: [b.text for b in chat.transcript.boxes][-2:]
                         == ["Hello", "Welcome, traveller."])
        assert chat.prompt.value == "and more"
