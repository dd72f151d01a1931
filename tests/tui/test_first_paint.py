"""The home screen paints its first list (read with sqlite3, `service.first_screen`) while the
service is still opening (`tui.opening.OpeningTavern`), then fills in the playthroughs once it
is open; a service that fails to open ends the app and `run` says why."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest
from textual.message import Message
from textual.widgets import OptionList, Static

from tavern_tui.config import Settings
from tavern_tui.errors import StoreError
from tavern_tui.service import Tavern
from tavern_tui.service.first_screen import first_screen
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.opening import OpeningTavern
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tavern_tui.tui.screens.home import HomeScreen
from tests.conftest import seed_database
from tests.tui.conftest import ScriptedProvider, notes, wait_until

SIZE = (120, 40)


@pytest.fixture
def corpus_url(tmp_path: Path, database_templates: dict[str, Path]) -> str:
    """An embedded database with the corpus cards (the first list is read only from SQLite)."""
    url = f"sqlite:///{tmp_path / 'first.sqlite3'}"
    seed_database(database_templates["corpus"], url)
    return url


class HeldOpening:
    """An `OpeningTavern` on `settings` whose opening waits for `gate` (`asked`: it began)."""

    def __init__(self, settings: Settings, provider: object = None) -> None:
        self.gate, self.asked = threading.Event(), threading.Event()
        self.opened: list[Tavern] = []

        def open_service() -> Tavern:
            self.asked.set()
            self.gate.wait(30)
            self.opened.append(Tavern(settings, provider=provider))  # type: ignore[arg-type]
            return self.opened[0]

        self.opening = OpeningTavern(settings, open_service)


@pytest.fixture
def held(corpus_url: str) -> Iterator[Callable[..., HeldOpening]]:
    """Makes held openings on the corpus database; releases and closes them after the test."""
    made: list[HeldOpening] = []

    def make(provider: object = None) -> HeldOpening:
        made.append(HeldOpening(Settings(db_url=corpus_url), provider))
        return made[-1]

    yield make
    for each in made:
        each.gate.set()
        for tavern in each.opened:
            tavern.close()


def _home(app: TavernApp) -> HomeScreen:
    screen = app.screen
    assert isinstance(screen, HomeScreen)
    return screen


async def test_the_first_list_is_painted_before_the_service_opens(corpus_url: str, scripted: ScriptedProvider,
                                                                   held: Callable[..., HeldOpening]) -> None:
    before = Tavern(Settings(db_url=corpus_url), provider=scripted)
    coding = before.library.find_character("Coding Sensei")
    played = before.playthroughs.new_playthrough(coding.id)  # the last played: the cursor starts here
    names = [c.name for c in before.library.characters()]
    before.close()

    first = first_screen(corpus_url)
    assert first is not None
    held_opening = held(scripted)
    opening = held_opening.opening
    app = TavernApp(cast(Tavern, opening), first=first)
    async with app.run_test(size=SIZE) as pilot:
        characters = _home(app).query_one("#characters", OptionList)
        await wait_until(pilot, lambda: characters.option_count == len(names))
        await wait_until(pilot, held_opening.asked.is_set)  # opening began once the first frame was up
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
        held_opening.gate.set()
        await wait_until(pilot, lambda: opening.opened() is not None
                         and f"#{played.id}" in str(playthroughs.get_option_at_index(0).prompt))
        assert _home(app).highlighted_character.name == "Coding Sensei"  # the re-read kept the cursor
        changed = Settings(db_url=corpus_url, user_name="Ada")
        await held_opening.opened[0].apply_settings(changed)  # as the settings screen does
        assert opening.settings is changed  # the open service's, not the ones it opened with


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


async def test_showing_archived_ones_says_so_once_they_are_listed(corpus_url: str,
                                                                  held: Callable[..., HeldOpening]) -> None:
    before = Tavern(Settings(db_url=corpus_url))
    before.library.archive_character(before.library.find_character("Shodan").id)
    before.close()
    held_opening = held()
    app = TavernApp(cast(Tavern, held_opening.opening), first=first_screen(corpus_url))
    said = "Archived ones are listed (marked)."
    async with app.run_test(size=SIZE) as pilot:
        characters = _home(app).query_one("#characters", OptionList)
        await wait_until(pilot, lambda: characters.option_count > 0)
        await pilot.press("ctrl+u")  # before the service is open: the list cannot show them yet
        assert "Shodan" not in [c.name for c in _home(app)._all]
        assert said not in [n.text for n in app.notices]
        held_opening.gate.set()
        await wait_until(pilot, lambda: "Shodan" in [c.name for c in _home(app)._all])
        await wait_until(pilot, lambda: said in [n.text for n in app.notices])


async def test_enter_while_the_library_opens_says_so_and_opens_once_it_has(
        corpus_url: str, scripted: ScriptedProvider, held: Callable[..., HeldOpening]) -> None:
    first = first_screen(corpus_url)
    held_opening = held(scripted)
    opening = held_opening.opening
    seen: list[Message] = []
    app = TavernApp(cast(Tavern, opening), first=first)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        characters = _home(app).query_one("#characters", OptionList)
        await wait_until(pilot, lambda: characters.option_count > 0 and held_opening.asked.is_set())
        name = _home(app).highlighted_character.name  # type: ignore[union-attr]
        await pilot.press("enter")
        await wait_until(pilot, lambda: f"Opening {name} as soon as the library has loaded…" in notes(seen))
        assert isinstance(app.screen, HomeScreen)  # nothing to open before the library is there
        held_opening.gate.set()
        await wait_until(pilot, lambda: isinstance(app.screen, (ChatScreen, DraftScreen)))
