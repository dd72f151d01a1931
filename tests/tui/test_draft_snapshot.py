"""SVG snapshots of the opening draft screen (its fitted footer: the greeting keys as one group,
Preview kept at 80 columns) and of a chat whose composer holds an impersonated line (F4), at
120×40 and 80×24 (regenerate with `--snapshot-update`)."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.draft import DraftScreen
from tests.tui.conftest import ScriptedProvider, open_character, wait_until, workers_idle

SIZES = [(120, 40), (80, 24)]

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_draft(snap_compare, corpus_tavern: Tavern, size: tuple[int, int]) -> None:
    async def ready(pilot: Pilot[object]) -> None:
        await workers_idle(pilot)
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, DraftScreen) and pilot.app.screen.draft)
        await workers_idle(pilot)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=size, run_before=ready)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_impersonated_line_in_the_composer(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                                           size: tuple[int, int]) -> None:
    scripted.enqueue("I look around the glade, then back at her.")

    async def ready(pilot: Pilot[object]) -> None:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                         and pilot.app.screen.is_mounted and bool(pilot.app.screen.transcript.boxes))
        chat = pilot.app.screen
        await workers_idle(pilot)
        await pilot.press("f4")
        await wait_until(pilot, lambda: not chat.generating and bool(chat.prompt.value))
        await workers_idle(pilot)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=size, run_before=ready)
