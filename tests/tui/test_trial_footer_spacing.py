"""The key footer keeps a space between entries and between the keys of one binding, whether it
fits roomy or compact: "^← ^→ Swipe ^r Regen", never "Swipe^r Regen" or "^←^→ Greeting"."""

from __future__ import annotations

import pytest

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.screens.tree import TreeScreen
from tests.tui.conftest import ScriptedProvider, open_character, wait_until, workers_idle

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


def footer_text(app: object) -> str:
    """The footer row as the terminal shows it, blank cells included (the screenshot's text leaves
    out the blank cells between widgets, which are what this is about)."""
    return app.screen._compositor.render_strips()[-1].text.rstrip()  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_chat_footer_keeps_a_space_between_entries(corpus_tavern: Tavern, scripted: ScriptedProvider,
                                                         size: tuple[int, int]) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=size) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        await workers_idle(pilot)
        await pilot.pause()
        text = footer_text(app)
        assert text.startswith(" ^← ^→ Swipe ^r Regen f3 Continue "), text


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_tree_and_draft_footers_keep_a_space_between_keys_and_labels(
        corpus_tavern: Tavern, scripted: ScriptedProvider, size: tuple[int, int]) -> None:
    character = corpus_tavern.library.find_character("Seraphina")
    pid = corpus_tavern.playthroughs.new_playthrough(character.id).id
    scripted.enqueue("The lamp needs oil.")
    async for _ in corpus_tavern.steps.send(pid, "What needs doing?"):
        pass
    async for _ in corpus_tavern.steps.regenerate(pid):  # two alternatives: the tree's ← → apply
        pass
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=size) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(app.screen, TreeScreen) and app.screen.loaded)
        await workers_idle(pilot)
        await pilot.pause()
        tree = footer_text(app)
        # At 80 columns the alternatives' keys are the first the footer hides (the tree's FOOTER_DROP).
        expected = "← → Alternatives ⏎ Jump here esc Back" if size[0] >= 120 else "⏎ Jump here esc Back"
        assert expected in tree and "Alternatives⏎" not in tree, tree
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen) and app.screen.is_mounted)
        await pilot.press("escape")
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)
        await open_character(pilot, "Skynet", playthrough=False)
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        await workers_idle(pilot)
        await pilot.pause()
        draft = footer_text(app)
        assert "^← ^→ Greeting " in draft, draft
