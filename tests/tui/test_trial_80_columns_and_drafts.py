"""Pilot tests from a new user's trial at 80x24 and 120x40: the strategy pane lists strategies and
presets at 80 columns; the edit of your last line starts at its end and its hint fits; a cleared
composer is the draft even when the app quits before the draft was written; the composer's and
the opening draft's hints fit 80 columns."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.app import App
from textual.geometry import Region
from textual.widgets import OptionList, Static, TextArea

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.screens.chat import sending
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.widgets.composer import Composer
from tests.tui.conftest import ScriptedProvider, open_character, wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina, send
from tests.tui.test_strategy import highlight, open_strategy

NARROW = (80, 24)


@pytest.fixture
def presets(corpus_tavern: Tavern, corpus_dir: Path) -> int:
    """Import every preset of the corpus (four: with the built-in default, five listed); how many."""
    results = corpus_tavern.imports.import_paths(sorted((corpus_dir / "presets").glob("*.json")))
    assert all(r.ok and r.kind == "preset" for r in results)
    return len(results)


def drawn(app: App[object], region: Region) -> list[str]:
    """The text drawn in `region` of the screen, row by row."""
    strips = app.screen._compositor.render_strips()  # type: ignore[attr-defined]
    return [strips[y].text[region.x:region.right] for y in range(region.y, region.bottom)]


def rows_of(app: App[object], listing: OptionList) -> list[str]:
    """The rows a list shows inside its border, as plain text."""
    return drawn(app, listing.scrollable_content_region)


def option_shown(app: App[object], listing: OptionList) -> bool:
    """Every line of the list's highlighted option is drawn inside the list."""
    option = listing.highlighted_option
    assert option is not None
    rows = [row.strip() for row in rows_of(app, listing)]
    lines = [line.strip() for line in str(option.prompt).split("\n")]
    return any(rows[at:at + len(lines)] == lines for at in range(len(rows)))




async def test_the_strategy_pane_lists_strategies_and_presets_at_80_columns(corpus_tavern: Tavern,
                                                                           presets: int) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await open_seraphina(pilot)
        screen = await open_strategy(pilot)
        await pilot.pause()
        assert screen.preset_list.option_count == presets + 1
        for listing in (screen.strategies, screen.preset_list):
            assert listing.region.height >= 3 + 2, listing.region  # a few rows inside the border
            # Drawn once the list has scrolled to its highlight (a loaded box is a frame late).
            await wait_until(pilot, lambda listing=listing: option_shown(app, listing))
        hint = screen.query_one("#strategy-hint-short", Static)
        assert [row.rstrip() for row in drawn(app, hint.content_region)] == [str(hint.content)]  # whole, one row
        assert screen.query_one("#preview").region.height >= 3
        # The last of each list, moved to with the keys, is shown too (the list scrolls).
        assert app.focused is screen.strategies
        for listing in (screen.strategies, screen.preset_list):
            for at in (listing.option_count - 1, 0):
                await highlight(pilot, listing, listing.get_option_at_index(at).id or "")
                await pilot.pause()
                assert option_shown(app, listing), (at, rows_of(app, listing))
            await pilot.press("tab")  # on to the presets
            assert app.focused is screen.preset_list or listing is screen.preset_list


async def test_editing_the_last_line_starts_at_its_end_and_the_hint_fits_80_columns(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        chat = await open_seraphina(pilot)
        await send(pilot, chat, "I am tierd")
        await pilot.press("up")  # nothing queued: the last line sent
        await wait_until(pilot, lambda: isinstance(app.screen, EditMessageScreen) and app.screen.is_mounted)
        area = app.screen.query_one("#edit-text", TextArea)
        assert area.cursor_location == area.document.end
        await pilot.press(*" and cold")  # typing goes after the text, as in the composer
        assert area.text == "I am tierd and cold"
        hint = app.screen.query_one("#edit-hint", Static)
        assert "ctrl+s" in str(hint.content) and "Esc" in str(hint.content)
        assert [row.rstrip() for row in drawn(app, hint.content_region)] == [str(hint.content)]  # whole, one row


async def test_a_composer_cleared_right_before_quitting_stays_empty_after_a_restart(
        make_tavern: Callable[..., Tavern], scripted: ScriptedProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    tavern = make_tavern(scripted)
    app = TavernApp(tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        pid = chat.playthrough_id
        await pilot.press(*"half a thought")
        await wait_until(pilot, lambda: tavern.inbox.draft(pid) == "half a thought")
        await workers_idle(pilot)
        # The next draft write is still waiting for quiet when the app quits (whatever the machine's speed).
        monkeypatch.setattr(sending, "DRAFT_DELAY", 60.0)
        await pilot.press("ctrl+u")
        assert chat.prompt.value == ""
        await pilot.press("ctrl+q")  # the app's quit key
        await wait_until(pilot, lambda: not app.is_running)
    assert tavern.inbox.draft(pid) == ""
    again = TavernApp(make_tavern(scripted, import_corpus=False))  # a new run on the same database
    async with again.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        await workers_idle(pilot)
        assert chat.prompt.value == ""


async def test_text_typed_right_before_a_chat_closes_is_kept_as_its_draft(corpus_tavern: Tavern,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        monkeypatch.setattr(sending, "DRAFT_DELAY", 60.0)
        await pilot.press(*"second thoughts")
        assert chat.prompt.value == "second thoughts"
        chat.dismiss()  # as a search hit's chat or a new branch replaces it: no Esc
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await wait_until(pilot, lambda: corpus_tavern.inbox.draft(chat.playthrough_id) == "second thoughts")


def composer_row(app: App[object], composer: Composer) -> str:
    """The composer's first row of text as drawn."""
    return drawn(app, composer.content_region)[0]


async def test_the_composer_hint_fits_80_columns_and_is_whole_at_120(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        chat = await open_seraphina(pilot)
        await wait_until(pilot, lambda: "User" in str(chat.prompt.placeholder))
        await pilot.pause()
        hint = str(chat.prompt.placeholder)
        assert "Enter sends" in hint and "new line" in hint and "Esc stops a reply or goes back" in hint
        assert len(hint) <= chat.prompt.content_region.width
        assert hint in composer_row(app, chat.prompt)
        await pilot.resize_terminal(*SIZE)
        await wait_until(pilot, lambda: "shift+Enter or ctrl+J" in str(chat.prompt.placeholder))
        await pilot.pause()
        assert str(chat.prompt.placeholder) in composer_row(app, chat.prompt)


async def test_the_opening_draft_hint_fits_80_columns(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=NARROW) as pilot:
        await open_character(pilot, "Skynet", playthrough=False)  # never played: an opening draft
        await wait_until(pilot, lambda: isinstance(app.screen, DraftScreen) and app.screen.draft is not None)
        draft = app.screen
        assert isinstance(draft, DraftScreen)
        await wait_until(pilot, lambda: "User" in str(draft.prompt.placeholder))
        await pilot.pause()
        hint = str(draft.prompt.placeholder)
        assert "First line" in hint and "Enter starts the playthrough" in hint and "Esc keeps the draft" in hint
        assert hint in composer_row(app, draft.prompt)
