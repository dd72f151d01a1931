"""Pilot tests of binding a world book to the chat's preset from the world-book pane (P), on the
real app and service (temp SQLite, corpus book and preset)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from textual.message import Message
from textual.pilot import Pilot

from tavern_tui.service import Tavern, WorldBookView
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.lore_labels import binding_labels
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.lore import LoreScreen
from tests.tui.conftest import noted, notes, open_character, wait_until, workers_idle

SIZE = (120, 40)



def _bindings(tavern: Tavern, book_id: int) -> tuple[str, ...]:
    return next(v.bindings for v in tavern.lore.world_books() if v.id == book_id)


def _import(tavern: Tavern, path: Path) -> tuple[int, str]:
    [result] = tavern.imports.import_paths([path])
    assert result.ok and result.id is not None and result.name
    return result.id, result.name


async def _open_pane(pilot: Pilot[object]) -> LoreScreen:
    """Open Seraphina's chat, then the world-book pane over it, once its library is listed."""
    await open_character(pilot, "Seraphina")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, ChatScreen) and pilot.app.screen.is_mounted)
    await pilot.press("f2")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, LoreScreen) and pilot.app.screen.books.option_count > 0
                     and pilot.app.screen.entries.row_count == 4)
    lore = pilot.app.screen
    assert isinstance(lore, LoreScreen)
    await workers_idle(pilot)
    lore.books.focus()
    return lore


async def test_p_binds_the_book_to_the_chats_preset_and_again_unbinds_it(corpus_tavern: Tavern,
                                                                         corpus_dir: Path) -> None:
    book_id, _ = _import(corpus_tavern, corpus_dir / "worldbooks" / "eldoria_st_staging.json")
    preset_id, preset_name = _import(corpus_tavern, corpus_dir / "presets" / "st_openai_default_staging.json")
    seraphina = corpus_tavern.library.find_character("Seraphina")
    playthrough = corpus_tavern.playthroughs.new_playthrough(seraphina.id)
    corpus_tavern.presets.bind_preset(playthrough.id, preset_id)
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        lore = await _open_pane(pilot)
        assert lore.playthrough_id == playthrough.id and lore.preset == (preset_id, preset_name)
        assert str(lore.books.get_option_at_index(0).prompt).startswith("  eldoria_st_staging")  # applies nowhere yet

        await pilot.press("P")  # the binding and the list's refresh run in workers
        await wait_until(pilot, lambda: "this preset" in str(lore.books.get_option_at_index(0).prompt))
        assert _bindings(corpus_tavern, book_id) == (f"preset:{preset_id}",)
        assert str(lore.books.get_option_at_index(0).prompt) == "● eldoria_st_staging\n  4 entries · this preset"
        await noted(pilot, seen, f"eldoria_st_staging is now bound to the preset {preset_name} "
                                 f"(every chat that uses {preset_name}).")

        await pilot.press("P")
        await wait_until(pilot, lambda: f"eldoria_st_staging is no longer bound to the preset {preset_name}."
                         in notes(seen))
        assert _bindings(corpus_tavern, book_id) == ()


async def test_p_on_a_chat_with_the_default_preset_says_how_to_choose_one(corpus_tavern: Tavern,
                                                                          corpus_dir: Path) -> None:
    book_id, _ = _import(corpus_tavern, corpus_dir / "worldbooks" / "eldoria_st_staging.json")
    seen: list[Message] = []
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        lore = await _open_pane(pilot)
        assert lore.preset is None
        await pilot.press("P")
        await wait_until(pilot, lambda: any("built-in default preset" in n for n in notes(seen)))
        await workers_idle(pilot)
        assert _bindings(corpus_tavern, book_id) == ()


async def test_p_does_nothing_outside_a_chat(corpus_tavern: Tavern, corpus_dir: Path) -> None:
    book_id, _ = _import(corpus_tavern, corpus_dir / "worldbooks" / "eldoria_st_staging.json")
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, LoreScreen) and app.screen.entries.row_count == 4)
        await pilot.press("P")
        await workers_idle(pilot)
        assert _bindings(corpus_tavern, book_id) == ()


def test_the_library_line_names_the_chats_preset_and_other_presets_by_id() -> None:
    book = WorldBookView(1, "Lore", 3, "lore.json", datetime(2026, 12, 1, tzinfo=UTC), ("preset:4", "preset:9"))
    assert binding_labels(book, character_id=3, playthrough_id=7, character_names={}, preset_id=4) == (
        ["this preset", "preset #9"], True)
    assert binding_labels(book, character_id=3, playthrough_id=7, character_names={}, preset_id=None) == (
        ["preset #4", "preset #9"], False)  # the chat is on the built-in default preset
    assert binding_labels(book, character_id=None, playthrough_id=None, character_names={}) == (
        ["preset #4", "preset #9"], False)
