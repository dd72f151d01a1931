"""The home screen paints its first list (read with sqlite3, `service.first_screen`) while the
service is still opening (`tui.opening.OpeningTavern`), then fills in the playthroughs once it
is open; a service that fails to open ends the app and `run` says why."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import cast

import pytest
from textual.widgets import OptionList, Static

from tavern_tui.config import Settings
from tavern_tui.errors import StoreError
from tavern_tui.service import Tavern
from tavern_tui.service.first_screen import first_screen
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.opening import OpeningTavern
from tavern_tui.tui.screens.home import HomeScreen
from tests.conftest import seed_database
from tests.tui.conftest import ScriptedProvider, wait_until

SIZE = (120, 40)


@pytest.fixture
def corpus_url(tmp_path: Path, database_templates: dict[str, Path]) -> str:
    """An embedded database with the corpus cards (the first list is read only from SQLite)."""
    url = f"sqlite:///{tmp_path / 'first.sqlite3'}"
    seed_database(database_templates["corpus"], url)
    return url


def _home(app: TavernApp) -> HomeScreen:
    screen = app.screen
    assert isinstance(screen, HomeScreen)
    return screen


async def test_the_first_list_is_painted_before_the_service_opens(corpus_url: str,
                                                                   scripted: ScriptedProvider) -> None:
    settings = Settings(db_url=corpus_url)
    before = Tavern(settings, provider=scripted)
    coding = before.library.find_character("Coding Sensei")
    played = before.playthroughs.new_playthrough(coding.id)  # the last played: the cursor starts here
    names = [c.name for c in before.library.characters()]
    before.close()

    gate, asked = threading.Event(), threading.Event()
    opened: list[Tavern] = []

    def open_service() -> Tavern:
        asked.set()
        gate.wait(30)
        opened.append(Tavern(settings, provider=scripted))
        return opened[0]

    first = first_screen(corpus_url)
    assert first is not None
    opening = OpeningTavern(settings, open_service)
    app = TavernApp(cast(Tavern, opening), first=first)
    try:
        async with app.run_test(size=SIZE) as pilot:
            characters = _home(app).query_one("#characters", OptionList)
            await wait_until(pilot, lambda: characters.option_count == len(names))
            await wait_until(pilot, asked.is_set)  # opening began once the first frame was up
            assert opening.opened() is None  # painted while the service is still opening
            assert _home(app).highlighted_character is not None
            assert _home(app).highlighted_character.name == "Coding Sensei"
            assert [c.name for c in _home(app)._all] == names
            # The card pane needs no read (the first frame has its layout); the playthroughs do.
            card = str(_home(app).query_one("#character-details", Static).render())
            assert card.startswith("from coding_sensei_v2.png\nby RossAscends")  # FACTS.md: its creator
            playthroughs = _home(app).query_one("#playthroughs", OptionList)
            assert [str(playthroughs.get_option_at_index(i).prompt) for i in range(playthroughs.option_count)] == [
                "Reading the playthroughs…"]
            gate.set()
            await wait_until(pilot, lambda: opening.opened() is not None
                             and f"#{played.id}" in str(playthroughs.get_option_at_index(0).prompt))
            assert _home(app).highlighted_character.name == "Coding Sensei"  # the re-read kept the cursor
            changed = Settings(db_url=corpus_url, user_name="Ada")
            await opened[0].apply_settings(changed)  # as the settings screen does
            assert opening.settings is changed  # the open service's, not the ones it opened with
    finally:
        gate.set()
        for tavern in opened:
            tavern.close()


async def test_a_service_that_cannot_open_ends_the_app_and_says_why(corpus_url: str) -> None:
    settings = Settings(db_url=corpus_url)

    def open_service() -> Tavern:
        raise StoreError("cannot open the database: disk I/O error")

    first = first_screen(corpus_url)
    opening = OpeningTavern(settings, open_service)
    app = TavernApp(cast(Tavern, opening), first=first)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.return_code is not None)
    with pytest.raises(StoreError, match="disk I/O error"):
        await asyncio.to_thread(opening.wait)


async def test_showing_archived_ones_says_so_once_they_are_listed(corpus_url: str) -> None:
    settings = Settings(db_url=corpus_url)
    before = Tavern(settings)
    before.library.archive_character(before.library.find_character("Shodan").id)
    before.close()
    gate, opened = threading.Event(), []

    def open_service() -> Tavern:
        gate.wait(30)
        opened.append(Tavern(settings))
        return opened[0]

    opening = OpeningTavern(settings, open_service)
    app = TavernApp(cast(Tavern, opening), first=first_screen(corpus_url))
    said = "Archived ones are listed (marked)."
    try:
        async with app.run_test(size=SIZE) as pilot:
            characters = _home(app).query_one("#characters", OptionList)
            await wait_until(pilot, lambda: characters.option_count > 0)
            await pilot.press("ctrl+u")  # before the service is open: the list cannot show them yet
            assert "Shodan" not in [c.name for c in _home(app)._all]
            assert said not in [n.text for n in app.notices]
            gate.set()
            await wait_until(pilot, lambda: "Shodan" in [c.name for c in _home(app)._all])
            await wait_until(pilot, lambda: said in [n.text for n in app.notices])
    finally:
        gate.set()
        for tavern in opened:
            tavern.close()
