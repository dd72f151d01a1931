"""SVG snapshots of the screens issue 21 changed, at 120×40 and 80×24: home, a chat with
timestamps on, settings, help and the import picker (regenerate with `--snapshot-update`)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from textual.pilot import Pilot

from tavern_tui.config import TuiSettings
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.import_screen import ImportScreen
from tavern_tui.tui.screens.chat import TOKEN_DELAY, ChatScreen
from tavern_tui.tui.screens.help import HelpScreen
from tavern_tui.tui.screens.settings import SettingsScreen
from tests.tui.conftest import ScriptedProvider, open_character, started_on, wait_until, workers_idle

SIZES = [(120, 40), (80, 24)]

STARTED = datetime(2026, 12, 3, 18, 30, tzinfo=UTC)  # the day a chat without a first line is titled by

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


def _app(tavern: Tavern) -> TavernApp:
    seraphina = tavern.library.find_character("Seraphina")
    played = tavern.playthroughs.new_playthrough(seraphina.id)
    started_on(tavern, played.id, STARTED)
    return TavernApp(tavern, now=lambda: played.updated_at + timedelta(minutes=5))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_home(snap_compare, corpus_tavern: Tavern, size: tuple[int, int]) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        await workers_idle(pilot)
        await pilot.pause()

    assert snap_compare(_app(corpus_tavern), terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_chat_with_timestamps(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                              size: tuple[int, int]) -> None:
    corpus_tavern.settings = dataclasses.replace(corpus_tavern.settings,
                                                 tui=TuiSettings(timestamps=True, message_numbers=True))
    scripted.enqueue("Rest now; you are safe here.")

    async def chat(pilot: Pilot[object]) -> None:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                         and pilot.app.screen.is_mounted and bool(pilot.app.screen.transcript.boxes))
        screen = pilot.app.screen
        await pilot.press(*"Where am I?")
        await pilot.press("enter")
        await wait_until(pilot, lambda: not screen.generating and len(screen.transcript.boxes) >= 3)
        await pilot.pause(TOKEN_DELAY + 0.2)
        await workers_idle(pilot)
        # Times change every run: show them, then freeze what the snapshot reads.
        for box in screen.transcript.boxes:
            header = box.header
            header.extras = header.extras.split(" · ")[0] + " · 2026-12-03 12:00"
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=size, run_before=chat)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_settings(snap_compare, corpus_tavern: Tavern, size: tuple[int, int]) -> None:
    async def open_settings(pilot: Pilot[object]) -> None:
        await workers_idle(pilot)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, SettingsScreen) and pilot.app.screen.is_mounted)
        pilot.app.screen.query_one("#settings-title").update("Settings · config file: config.toml")
        await workers_idle(pilot)
        await pilot.pause()

    assert snap_compare(_app(corpus_tavern), terminal_size=size, run_before=open_settings)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_help(snap_compare, corpus_tavern: Tavern, size: tuple[int, int]) -> None:
    async def open_help(pilot: Pilot[object]) -> None:
        await workers_idle(pilot)
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, HelpScreen) and pilot.app.screen.is_mounted)
        await pilot.pause()

    assert snap_compare(_app(corpus_tavern), terminal_size=size, run_before=open_help)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_import_picker(snap_compare, corpus_tavern: Tavern, corpus_dir, monkeypatch, size: tuple[int, int]) -> None:
    monkeypatch.chdir(corpus_dir)  # the tree starts in the current folder: the corpus, the same every run

    async def open_import(pilot: Pilot[object]) -> None:
        await workers_idle(pilot)
        await pilot.press("ctrl+o")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ImportScreen) and pilot.app.screen.is_mounted)
        await pilot.pause(1.0)  # the tree reads the folder in its own worker

    assert snap_compare(_app(corpus_tavern), terminal_size=size, run_before=open_import)
