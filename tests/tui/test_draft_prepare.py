"""A draft's first send that the provider cannot prepare (no usable endpoint URL, a config it
refuses) leaves the draft screen as it was: the line back in its composer, the draft listed, no
playthrough made and no request sent; the toast says what to fix."""

from __future__ import annotations

from typing import Any

import pytest
from textual.message import Message
from textual.pilot import Pilot

from tavern_tui.errors import CallConfigError
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.draft import DraftScreen
from tests.tui.conftest import ScriptedProvider, notes, open_character, wait_until, workers_idle

SIZE = (120, 40)
PROBLEM = "the endpoint URL 'localhost:5001' has no http:// or https:// scheme; set [provider] base_url"


async def send_from_a_new_draft(pilot: Pilot[object], name: str, line: str) -> DraftScreen:
    """Open the character's opening draft from the home screen and send `line` from it; the draft screen."""
    app = pilot.app
    await open_character(pilot, name, playthrough=False)
    await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
    draft = app.screen
    assert isinstance(draft, DraftScreen)
    await pilot.press(*line, "enter")
    return draft


async def test_a_first_send_that_cannot_be_prepared_keeps_the_draft_and_the_line(
        corpus_tavern: Tavern, scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(model: str, config: Any) -> Any:
        raise CallConfigError(PROBLEM)

    monkeypatch.setattr(scripted, "prepare", refuse)
    skynet = corpus_tavern.library.find_character("Skynet")
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        draft = await send_from_a_new_draft(pilot, "Skynet", "Hello")
        await wait_until(pilot, lambda: any(PROBLEM in n for n in notes(seen)))
        await workers_idle(pilot)
        assert app.screen is draft and draft.prompt.value == "Hello"
        assert [d.character_id for d in corpus_tavern.openings.drafts()] == [skynet.id]
        assert corpus_tavern.playthroughs.playthroughs(skynet.id) == [] and scripted.requests == []
        assert any("the draft and your line are kept" in n for n in notes(seen))


async def test_f9_on_a_draft_with_a_typed_line_asks_first(corpus_tavern: Tavern) -> None:
    from tavern_tui.tui.modals.confirm import ConfirmScreen

    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Skynet", playthrough=False)
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        draft = app.screen
        await pilot.press(*"hello capo", "f9")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # no: the draft and its line stay
        await wait_until(pilot, lambda: app.screen is draft)
        await workers_idle(pilot)
        assert draft.prompt.value == "hello capo" and len(corpus_tavern.openings.drafts()) == 1
        await pilot.press("f9")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen is not draft and not isinstance(app.screen, ConfirmScreen))
        await workers_idle(pilot)
        assert corpus_tavern.openings.drafts() == []
