"""SVG snapshots of the main screens at 120×40 (regenerate with `--snapshot-update`, then look at them)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList

from tavern_tui.errors import AuthenticationError
from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import TOKEN_DELAY, ChatScreen
from tavern_tui.tui.screens.lore import LoreScreen
from tavern_tui.tui.screens.tree import TreeScreen
from tests.tui.conftest import ScriptedProvider, open_character, started_on, wait_until, workers_idle

SIZE = (120, 40)

STARTED = datetime(2026, 12, 3, 18, 30, tzinfo=UTC)  # the day a chat without a first line is titled by

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


async def _chat_with_one_exchange(pilot: Pilot[object]) -> None:
    await open_character(pilot, "Seraphina")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                     and pilot.app.screen.is_mounted and bool(pilot.app.screen.transcript.boxes))
    chat = pilot.app.screen
    await pilot.press(*"Where am I?")
    await pilot.press("enter")
    # On worker states, not `workers.wait_for_complete()`: that raises when the step's worker
    # failed, which the provider-error snapshot's step does on purpose.
    await workers_idle(pilot)
    await wait_until(pilot, lambda: not chat.generating)
    # The streamed box is redrawn as the stored message when it settles: wait for that drawing.
    await wait_until(pilot, lambda: chat.transcript.boxes[-1].view is not None
                     and not chat.transcript.boxes[-1].has_class("-streaming"))
    # The status line's token estimate is debounced: let its timer fire and its worker finish,
    # so a loaded machine does not catch it half-way.
    await pilot.pause(TOKEN_DELAY + 0.2)
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def test_home_screen(snap_compare, corpus_tavern: Tavern) -> None:
    seraphina = corpus_tavern.library.find_character("Seraphina")
    played = corpus_tavern.playthroughs.new_playthrough(seraphina.id)
    started_on(corpus_tavern, played.id, STARTED)
    # Freeze the clock relative to the stored time, so the list says "5 min ago" on every run.
    app = TavernApp(corpus_tavern, now=lambda: played.updated_at + timedelta(minutes=5))

    async def highlight_seraphina(pilot: Pilot[object]) -> None:
        listing = pilot.app.screen.query_one("#characters", OptionList)
        await wait_until(pilot, lambda: listing.option_count > 0)  # read in a worker
        listing.highlighted = [c.name for c in corpus_tavern.library.characters()].index("Seraphina")
        await workers_idle(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=highlight_seraphina)


def test_chat_with_greeting_and_one_exchange(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("*Seraphina sets a cup of warm tea beside you.* ",
                     '"You are in my glade, deep in the forest of Eldoria. ', "Rest now; you are safe here.\"")
    assert snap_compare(TavernApp(corpus_tavern), terminal_size=SIZE, run_before=_chat_with_one_exchange)


def test_chat_after_a_provider_error(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    scripted.enqueue("*Seraphina opens her mouth to ", AuthenticationError("Invalid API key", status=401))
    assert snap_compare(TavernApp(corpus_tavern), terminal_size=SIZE, run_before=_chat_with_one_exchange)


def test_lore_screen_in_a_chat_with_the_tester(snap_compare, corpus_tavern: Tavern, corpus_dir) -> None:
    [book] = corpus_tavern.imports.import_paths([corpus_dir / "worldbooks" / "eldoria_st_staging.json"])
    seraphina = corpus_tavern.library.find_character("Seraphina")
    corpus_tavern.lore.bind_world_book(book.id, "character", seraphina.id)  # marked "this character"

    async def _test_in_the_lore_pane(pilot: Pilot[object]) -> None:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen)
                         and pilot.app.screen.is_mounted and bool(pilot.app.screen.transcript.boxes))
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, LoreScreen)
                         and pilot.app.screen.tester.result is not None)
        lore = pilot.app.screen
        text = "what are the shadowfang beasts"
        await pilot.press("t", *text)
        await wait_until(pilot, lambda: lore.tester.result_text == text)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=SIZE, run_before=_test_in_the_lore_pane)


def test_tree_screen_after_swipes_an_edit_and_a_branch(snap_compare, corpus_tavern: Tavern,
                                                       scripted: ScriptedProvider) -> None:
    for reply in ("*Seraphina smiles.* You are safe here.", "*Seraphina frowns.* You should rest.",
                  "*Seraphina laughs.* Welcome to my glade!", "*She pours tea.* Drink this; it helps."):
        scripted.enqueue(reply)

    async def _open_the_tree(pilot: Pilot[object]) -> None:
        await _chat_with_one_exchange(pilot)
        chat = pilot.app.screen
        assert isinstance(chat, ChatScreen)
        for _ in range(2):  # two more replies, then back to the second
            await pilot.press("ctrl+right")
            await pilot.app.workers.wait_for_complete()
            await wait_until(pilot, lambda: not chat.generating)
        await pilot.press("ctrl+left")
        await pilot.press(*"Thank you.")
        await pilot.press("enter")
        await pilot.app.workers.wait_for_complete()
        await wait_until(pilot, lambda: not chat.generating)
        pid = chat.playthrough_id
        question = corpus_tavern.playthroughs.messages(pid)[1]
        corpus_tavern.timeline.edit_message(pid, question.ref, "Where am I? What happened?")
        corpus_tavern.timeline.branch_playthrough(pid, question.ref)
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(pilot.app.screen, TreeScreen)
                         and pilot.app.screen.current is not None)
        await pilot.pause()

    assert snap_compare(TavernApp(corpus_tavern), terminal_size=SIZE, run_before=_open_the_tree)
