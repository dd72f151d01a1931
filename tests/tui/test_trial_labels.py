"""Labels a new user read awkwardly: the persona header's counts, the home screen when the filter
matches no character."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.screens.persona.labels import sent_summary
from tests.tui.conftest import wait_until, workers_idle

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


def test_the_persona_header_says_how_many_entries_are_sent() -> None:
    assert sent_summary(0, 0) == "no entries"
    assert sent_summary(1, 1) == "its entry is sent"
    assert sent_summary(0, 1) == "its entry is not sent"
    assert sent_summary(3, 3) == "all 3 entries sent"
    assert sent_summary(2, 3) == "2 of 3 entries sent"
    assert sent_summary(0, 3) == "none of its 3 entries sent"


async def test_a_filter_matching_no_character_clears_the_playthroughs(corpus_tavern: Tavern) -> None:
    seraphina = corpus_tavern.library.find_character("Seraphina")
    corpus_tavern.playthroughs.new_playthrough(seraphina.id)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=(120, 40)) as pilot:
        home = app.screen
        assert isinstance(home, HomeScreen)
        await workers_idle(pilot)
        playthroughs = home.query_one("#playthroughs", OptionList)
        await pilot.press(*"sera")
        await workers_idle(pilot)
        await wait_until(pilot, lambda: str(playthroughs.border_title) == "Playthroughs of Seraphina")
        assert playthroughs.option_count == 1
        await pilot.press(*"zzq")
        await workers_idle(pilot)
        assert home.highlighted_character is None
        assert str(playthroughs.border_title) == "Playthroughs"
        assert [str(playthroughs.get_option_at_index(i).prompt) for i in range(playthroughs.option_count)] == [
            "No character matches 'serazzq' · Esc clears the filter"]
        await pilot.press("escape")
        await workers_idle(pilot)
        assert home.highlighted_character is not None
        await wait_until(pilot, lambda: str(playthroughs.border_title).startswith("Playthroughs of "))


def test_a_drafts_row_shows_its_typed_first_line() -> None:
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta

    from tavern_tui.tui.labels import draft_summary
    from tavern_tui.views import OpeningView

    now = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)
    draft = OpeningView(1, 1, "CapoGPT", "User", 0, 1, "Hi.", "compat", 0, None, "", [], [],
                        now - timedelta(minutes=5), now - timedelta(minutes=5))
    assert draft_summary(draft, now) == "draft · greeting 1/1 · not played yet · 5 min ago"
    typed = replace(draft, line="hello capo, what is the plan for tonight at the docks?")
    assert draft_summary(typed, now) == ("draft · greeting 1/1 · not played yet · "
                                         "“hello capo, what is the plan for tonigh…” · 5 min ago")
