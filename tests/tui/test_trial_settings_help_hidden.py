"""A new user's trial: Esc in the settings asks before it discards unsaved edits and the header
names the config file without claiming a save; the F1 help lists the palette key by what it
does; a SillyTavern line hidden from the prompt is marked in the chat as never sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.message import Message
from textual.widgets import Input

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.help import HelpScreen, help_rows
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.screens.settings import SettingsScreen
from tavern_tui.tui.widgets.message_header import MessageHeader
from tests.tui.conftest import noted, notes, screen_text, wait_until, workers_idle
from tests.tui.test_app import open_seraphina
from tests.tui.test_help_new_keys import _help_text

SIZE = (120, 40)
ASKS = "Esc again within 4 s discards your changes (ctrl+s saves)."


async def _open_settings(pilot) -> SettingsScreen:  # type: ignore[no-untyped-def]
    await workers_idle(pilot)
    await pilot.press("ctrl+s")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, SettingsScreen) and pilot.app.screen.is_mounted)
    await workers_idle(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, SettingsScreen)
    return screen


async def test_esc_in_settings_asks_before_discarding_unsaved_changes(corpus_tavern: Tavern,
                                                                      isolated_profile: Path) -> None:
    seen: list[Message] = []
    model = corpus_tavern.settings.provider.model
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await _open_settings(pilot)
        await pilot.press("escape")  # nothing changed: leaves at once, without asking
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)
        assert ASKS not in notes(seen)

        settings = await _open_settings(pilot)
        settings.query_one("#model", Input).value = "some-other-model"
        await pilot.press("escape")
        await noted(pilot, seen, ASKS)
        assert app.screen is settings  # the edit is still there to save
        assert settings.query_one("#model", Input).value == "some-other-model"
        await pilot.press("escape")  # a second Esc within the time discards it
        await wait_until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen.is_mounted)
        assert corpus_tavern.settings.provider.model == model
        assert not (isolated_profile / "config.toml").exists()  # nothing was written


async def test_settings_header_names_the_config_file_without_claiming_a_save(corpus_tavern: Tavern,
                                                                            isolated_profile: Path) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await _open_settings(pilot)
        title = next(line for line in screen_text(app).splitlines() if "Settings ·" in line)
        assert "config file:" in title and "config.toml" in title
        assert "saved" not in title.lower()


async def test_chat_help_lists_the_palette_key_by_what_it_does(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)
        [palette] = [row for rows in help_rows(chat).values() for row in rows if row.binding_id == "app.palette"]
        assert palette.description == "Open the command palette"
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen) and app.screen.is_mounted)
        [line] = [line for line in (await _help_text(pilot)).splitlines() if "app.palette" in line][:1]
        assert "^p" in line and "Open the command palette" in line
        assert "f1 help" not in line


async def test_an_imported_hidden_line_is_marked_as_never_sent(corpus_tavern: Tavern) -> None:
    header = {"user_name": "Ann", "character_name": "Seraphina", "create_date": "2024-7-12@01h31m37s",
              "chat_metadata": {}}
    lines = [
        {"name": "Seraphina", "is_user": False, "is_system": False, "send_date": "2024-07-12T01:31:37.000Z",
         "mes": "Welcome, traveller.", "extra": {}},
        {"name": "System narrator", "is_user": False, "is_system": True, "send_date": "2024-07-12T01:32:00.000Z",
         "mes": "The fire crackles.", "extra": {}},
        {"name": "Ann", "is_user": True, "is_system": False, "send_date": "2024-07-12T01:33:00.000Z",
         "mes": "Thank you.", "extra": {}},
    ]
    payload = "\n".join(json.dumps(o) for o in (header, *lines)) + "\n"
    result = corpus_tavern.chat_files.import_chat_bytes(payload.encode(), "hidden.jsonl")
    assert result.error is None
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        chat = await open_seraphina(pilot)  # the imported chat is her latest
        await wait_until(pilot, lambda: len(chat.transcript.boxes) == len(lines))
        boxes = chat.transcript.boxes
        hidden = next(box for box in boxes if box.view is not None and box.view.content == "The fire crackles.")
        assert hidden.view.hidden
        assert hidden.query_one(MessageHeader).mark == "hidden · not sent"
        assert all(box.query_one(MessageHeader).mark != "hidden · not sent" for box in boxes if box is not hidden)
        await pilot.pause()
        assert "hidden · not sent" in screen_text(app)


@pytest.mark.usefixtures("isolated_profile")
async def test_saving_a_model_the_environment_overrides_says_so(corpus_tavern: Tavern,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # Precedence (config): flags, then the environment, then the file: a saved model loses to TAVERN_MODEL.
    monkeypatch.setenv("TAVERN_MODEL", "x")
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        settings = await _open_settings(pilot)
        settings.query_one("#model", Input).value = "yyy"
        await pilot.press("ctrl+s")
        await noted(pilot, seen, "TAVERN_MODEL is set in the environment and will win over what you saved when "
                                 "tavern starts again (unset to use the file).")
        assert corpus_tavern.settings.provider.model == "yyy"  # this run uses what was saved
