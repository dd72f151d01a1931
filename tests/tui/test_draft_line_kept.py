"""The first line typed into an opening draft is kept as a chat's unsent text is: going back
(Esc), quitting (ctrl+q) and coming back show it in the draft's message box again; a line that
looks like a secret is never written; a played draft keeps nothing."""

from __future__ import annotations

import asyncio

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.screens.home import HomeScreen
from tests.tui.conftest import ScriptedProvider, open_character, wait_until, workers_idle

SIZE = (120, 40)
LINE = "I step out of the elevator. Hello, SHODAN."


async def _open_draft(pilot, app: TavernApp) -> DraftScreen:  # noqa: ANN001
    await open_character(pilot, "Shodan", playthrough=False)
    await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
    return app.screen  # type: ignore[return-value]


async def test_esc_and_a_restart_keep_the_first_line(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        draft = await _open_draft(pilot, app)
        await pilot.press(*LINE)
        await pilot.press("escape")  # at once: the quiet moment has not passed
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await wait_until(pilot, lambda: corpus_tavern.openings.draft(draft.draft_id).line == LINE)
        await pilot.press("enter")  # the same draft again
        again = await _open_draft_again(pilot, app)
        assert again.draft_id == draft.draft_id and again.prompt.value == LINE
        await pilot.press(*" Quickly.")
    # the app quit with the addition still waiting for its quiet moment
    assert corpus_tavern.openings.draft(draft.draft_id).line == LINE + " Quickly."
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        reopened = await _open_draft(pilot, app)
        assert reopened.prompt.value == LINE + " Quickly."


async def _open_draft_again(pilot, app: TavernApp) -> DraftScreen:  # noqa: ANN001
    await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
    return app.screen  # type: ignore[return-value]


async def test_a_secret_is_not_kept_and_a_played_draft_keeps_nothing(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        draft = await _open_draft(pilot, app)
        await pilot.press(*"my key is sk-proj-A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0")
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await workers_idle(pilot)
        await asyncio.sleep(0)
        assert corpus_tavern.openings.draft(draft.draft_id).line == ""
        await pilot.press("enter")
        again = await _open_draft_again(pilot, app)
        again.prompt.value = ""
        scripted.enqueue("Insect.")
        await pilot.press(*"Hello", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted
                         and [b.text for b in app.screen.transcript.boxes][-2:] == ["Hello", "Insect."])
        await workers_idle(pilot)
        assert corpus_tavern.openings.drafts() == []
