"""The library in the TUI (issue 20 items 4 and 5): the search screen (ctrl+f on home and in a
chat, "Search" in the palette) opening a hit on its branch at that message; the home screen's
titles, rename, archive and archived toggle, tag filter; the card screen (every field, creator
notes, edit as a revision, archive) and the card's own lorebook in the world-book pane."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, OptionList, Static, TextArea

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.modals.confirm import ConfirmScreen
from tavern_tui.tui.modals.entry_editor import EntryEditor
from tavern_tui.tui.modals.text_prompt import TextPrompt
from tavern_tui.tui.screens.card import CardScreen, FieldEditor
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.home import HomeScreen
from tavern_tui.tui.screens.lore import LoreScreen
from tavern_tui.tui.screens.search import SearchScreen
from tests.tui.conftest import ScriptedProvider, open_character, search_settled, wait_until, workers_idle

SIZE = (120, 40)

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


async def seraphina_with_an_old_branch(tavern: Tavern, scripted: ScriptedProvider) -> tuple[int, str]:
    """A Seraphina chat whose second reply was regenerated: the cormorant line sits on an old branch."""
    character = tavern.library.find_character("Seraphina")
    pid = tavern.playthroughs.new_playthrough(character.id).id
    scripted.enqueue("The lamp needs oil.")
    scripted.enqueue("A cormorant nests under the gallery.")
    scripted.enqueue("Fog tonight.")
    await drain(tavern.steps.send(pid, "What needs doing?"))
    await drain(tavern.steps.send(pid, "Anything alive up there?"))
    await drain(tavern.steps.regenerate(pid))
    return pid, "cormorant"


async def highlight(pilot: Pilot[object], tavern: Tavern, name: str) -> None:
    listing = pilot.app.screen.query_one("#characters", OptionList)
    await wait_until(pilot, lambda: listing.option_count > 0)
    names = [str(listing.get_option_at_index(i).prompt).split("\n")[0] for i in range(listing.option_count)]
    listing.highlighted = names.index(name)
    await workers_idle(pilot)
    await pilot.pause()


async def search_for(pilot: Pilot[object], text: str) -> SearchScreen:
    await pilot.press("ctrl+f")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, SearchScreen) and pilot.app.screen.is_mounted)
    screen = pilot.app.screen
    assert isinstance(screen, SearchScreen)
    await pilot.press(*text)
    await search_settled(pilot, screen)
    await wait_until(pilot, lambda: bool(screen.hits) or "Nothing" in str(
        screen.query_one("#search-status", Static).render()))
    return screen


async def test_search_from_home_opens_the_hit_on_its_branch_at_that_message(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    pid, word = await seraphina_with_an_old_branch(corpus_tavern, scripted)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await workers_idle(pilot)
        screen = await search_for(pilot, word)
        [hit] = screen.hits
        assert (hit.playthrough_id, hit.speaker, hit.on_head) == (pid, "Seraphina", False)
        results = screen.query_one("#search-results", OptionList)
        shown = str(results.get_option_at_index(0).prompt)
        assert "another branch" in shown and "Seraphina: A cormorant nests under the gallery." in shown
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and app.screen.cursor_ref is not None)
        chat = app.screen
        assert isinstance(chat, ChatScreen) and chat.playthrough_id == pid
        # The branch was switched to the one holding the line, and the cursor sits on it.
        assert chat.cursor_ref == hit.ref
        assert chat.cursor_message is not None and chat.cursor_message.content == "A cormorant nests under the gallery."
        assert corpus_tavern.playthroughs.messages(pid)[-1].content == "A cormorant nests under the gallery."


async def test_search_from_a_chat_and_archived_chats_only_with_the_toggle(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    pid, word = await seraphina_with_an_old_branch(corpus_tavern, scripted)
    corpus_tavern.playthroughs.archive(pid)
    other = corpus_tavern.playthroughs.new_playthrough(corpus_tavern.library.find_character("Shodan").id).id
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Shodan")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        assert app.screen.playthrough_id == other
        assert app.screen.focused is app.screen.prompt  # ctrl+f is not the composer's: priority binding
        screen = await search_for(pilot, word)
        assert screen.hits == []
        assert "ctrl+t: archived chats too" in str(screen.query_one("#search-status", Static).render())
        await pilot.press("ctrl+t")
        await wait_until(pilot, lambda: bool(screen.hits))
        assert screen.query_one("#search-archived", Checkbox).value
        assert [h.playthrough_id for h in screen.hits] == [pid] and screen.hits[0].archived
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and app.screen.playthrough_id == pid)
        # The hit's chat took the place of the chat the search was opened over (Esc goes home).
        assert [type(s) for s in app.screen_stack[1:]] == [HomeScreen, ChatScreen]


async def test_the_palette_lists_search(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await workers_idle(pilot)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "Search" in commands
        commands["Search"].callback()
        await wait_until(pilot, lambda: isinstance(app.screen, SearchScreen)
                         and bool(app.screen.query("#search-query")))
        await pilot.press(*"glade")
        await wait_until(pilot, lambda: "Nothing found" in str(app.screen.query_one("#search-status", Static).render()))


async def test_home_lists_titles_renames_and_archives_a_playthrough(
        corpus_tavern: Tavern, scripted: ScriptedProvider) -> None:
    seraphina = corpus_tavern.library.find_character("Seraphina")
    pid = corpus_tavern.playthroughs.new_playthrough(seraphina.id).id
    scripted.enqueue("Rest.")
    await drain(corpus_tavern.steps.send(pid, "Where is the glade?"))
    corpus_tavern.openings.new_draft(seraphina.id)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        home = app.screen
        await highlight(pilot, corpus_tavern, "Seraphina")
        listing = home.query_one("#playthroughs", OptionList)
        prompts = [str(listing.get_option_at_index(i).prompt) for i in range(listing.option_count)]
        assert prompts[0] == f"Where is the glade?\n#{pid} · 3 messages · just now"
        assert prompts[1].startswith("draft · greeting 1/1 · not played yet")
        await pilot.press("tab", "ctrl+e")
        await wait_until(pilot, lambda: isinstance(app.screen, TextPrompt) and app.screen.is_mounted)
        field = app.screen.query_one(Input)
        assert field.value == "Where is the glade?"
        field.value = ""
        await pilot.press(*"Glade nights", "enter")
        await wait_until(pilot, lambda: str(listing.get_option_at_index(0).prompt).startswith("Glade nights\n"))
        assert corpus_tavern.playthroughs.playthrough(pid).chat_title == "Glade nights"
        await pilot.press("ctrl+a")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")))
        await pilot.press("y")
        await wait_until(pilot, lambda: listing.option_count == 1)
        assert corpus_tavern.playthroughs.playthrough(pid).archived
        await pilot.press("ctrl+u")
        await wait_until(pilot, lambda: listing.option_count == 2)
        assert str(listing.get_option_at_index(0).prompt).endswith(" · archived")
        listing.highlighted = 0
        await pilot.press("ctrl+a")  # on an archived one: back at once, no question
        await wait_until(pilot, lambda: not corpus_tavern.playthroughs.playthrough(pid).archived)


async def test_the_home_filter_by_tag(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        home = app.screen
        listing = home.query_one("#characters", OptionList)
        await wait_until(pilot, lambda: listing.option_count > 1)
        await pilot.press(*"#util")  # Coding Sensei's tags: coding, utility, assistant (FACTS.md)
        names = [str(listing.get_option_at_index(i).prompt).split("\n")[0] for i in range(listing.option_count)]
        assert names == ["Coding Sensei"]


async def test_the_card_screen_shows_every_field_edits_as_a_revision_and_archives(corpus_tavern: Tavern) -> None:
    sensei = corpus_tavern.library.find_character("Coding Sensei")
    notes = corpus_tavern.library.card_view(sensei.id).fields["creator_notes"]
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await highlight(pilot, corpus_tavern, "Coding Sensei")
        await pilot.press("ctrl+k")
        await wait_until(pilot, lambda: isinstance(app.screen, CardScreen) and app.screen.card is not None)
        card = app.screen
        fields = card.query_one("#card-fields", OptionList)
        rows = [str(fields.get_option_at_index(i).prompt).split("\n")[0] for i in range(fields.option_count)]
        assert "Creator notes · not sent" in rows and "Tags · not sent" in rows and "Description" in rows
        fields.highlighted = [r.split(" ·")[0] for r in rows].index("Creator notes")
        await pilot.pause()
        assert str(card.query_one("#card-value", Static).render()).strip() == (notes or "(empty)").strip()
        fields.highlighted = [r.split(" ·")[0] for r in rows].index("Scenario")
        await pilot.press("e")
        await wait_until(pilot, lambda: isinstance(app.screen, FieldEditor) and app.screen.is_mounted)
        app.screen.query_one(TextArea).text = "A dojo at dawn."
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: card.card is not None and card.card.character.revision == 1)
        assert corpus_tavern.library.card_view(sensei.id).fields["scenario"] == "A dojo at dawn."
        await pilot.press("a")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmScreen) and bool(app.screen.query("#no")))
        await pilot.press("y")
        await wait_until(pilot, lambda: card.card is not None and card.card.character.archived)
        await pilot.press("escape")
        listing = app.screen.query_one("#characters", OptionList)
        await workers_idle(pilot)
        names = [str(listing.get_option_at_index(i).prompt).split("\n")[0] for i in range(listing.option_count)]
        assert "Coding Sensei" not in names


async def test_the_cards_own_lorebook_is_edited_in_the_world_book_pane(corpus_tavern: Tavern,
                                                                      corpus_dir: Path) -> None:
    [result] = corpus_tavern.imports.import_paths([corpus_dir / "stateful" / "qingkong_li_mvu.png"])
    found = corpus_tavern.lore.card_book(result.id)  # type: ignore[arg-type]
    assert found is not None
    name = corpus_tavern.library.character(result.id).name  # type: ignore[arg-type]
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await highlight(pilot, corpus_tavern, name)
        await pilot.press("ctrl+k")
        await wait_until(pilot, lambda: isinstance(app.screen, CardScreen) and app.screen.card is not None)
        fields = app.screen.query_one("#card-fields", OptionList)
        fields.highlighted = fields.option_count - 1  # the Lorebook row
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, LoreScreen) and app.screen.book is not None)
        lore = app.screen
        assert lore.card_id == result.id and lore.book.name == found[0].name
        lore.entries.focus()
        await pilot.pause()
        lore.action_edit_entry()
        await wait_until(pilot, lambda: isinstance(app.screen, EntryEditor) and bool(app.screen.query("#content")))
        editor = app.screen
        await pilot.pause()
        editor.query_one("#content", TextArea).text = "Edited in the pane."
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: isinstance(app.screen, LoreScreen) and app.screen.is_mounted)
        await workers_idle(pilot)
        assert corpus_tavern.library.character(result.id).revision == 1  # type: ignore[arg-type]
        book, _ = corpus_tavern.lore.card_book(result.id)  # type: ignore[arg-type,misc]
        assert "Edited in the pane." in [e.content for e in book.entries]


async def _type_search(pilot: Pilot[object]) -> None:
    await workers_idle(pilot)
    await pilot.press("ctrl+f")
    await wait_until(pilot, lambda: isinstance(pilot.app.screen, SearchScreen) and pilot.app.screen.is_mounted)
    await pilot.press(*"cormorant")
    screen = pilot.app.screen
    await search_settled(pilot, screen)
    await wait_until(pilot, lambda: bool(screen.hits))  # type: ignore[attr-defined]
    await workers_idle(pilot)
    await pilot.pause()


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_search_screen_snapshot(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                                size: tuple[int, int]) -> None:
    asyncio.run(seraphina_with_an_old_branch(corpus_tavern, scripted))
    assert snap_compare(TavernApp(corpus_tavern), terminal_size=size, run_before=_type_search)


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
def test_home_with_drafts_and_titles_snapshot(snap_compare, corpus_tavern: Tavern, scripted: ScriptedProvider,
                                              size: tuple[int, int]) -> None:
    seraphina = corpus_tavern.library.find_character("Seraphina")
    played = corpus_tavern.playthroughs.new_playthrough(seraphina.id)
    scripted.enqueue("Rest now.")
    asyncio.run(drain(corpus_tavern.steps.send(played.id, "Where is the glade?")))
    corpus_tavern.playthroughs.rename(corpus_tavern.playthroughs.new_playthrough(seraphina.id).id, "Second night")
    corpus_tavern.openings.new_draft(seraphina.id)
    latest = corpus_tavern.playthroughs.playthroughs(seraphina.id)[0]
    app = TavernApp(corpus_tavern, now=lambda: latest.updated_at + timedelta(minutes=5))

    async def run_before(pilot: Pilot[object]) -> None:
        await highlight(pilot, corpus_tavern, "Seraphina")

    assert snap_compare(app, terminal_size=size, run_before=run_before)
