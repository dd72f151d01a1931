"""Opening a search hit puts the message cursor on the hit itself, also when the stored message
count disagrees with the messages shown (a deleted message, an edit above the hit): the
transcript's indexes come from the messages it holds, and `page_to_ref` finds a box by ref."""

from __future__ import annotations

import pytest
from textual.widgets import OptionList

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.chat import ChatScreen
from tavern_tui.tui.screens.search import SearchScreen
from tavern_tui.tui.widgets.transcript import WINDOW
from tests.tui.conftest import ScriptedProvider, open_character, search_settled, wait_until, workers_idle

SIZE = (120, 40)

pytestmark = pytest.mark.usefixtures("no_cursor_blink")


async def drain(updates) -> None:  # type: ignore[no-untyped-def]
    async for _ in updates:
        pass


async def chat_with_an_edit_and_a_delete(tavern: Tavern, scripted: ScriptedProvider) -> int:
    """A Seraphina chat: four exchanges, the first reply deleted, the second one edited."""
    pid = tavern.playthroughs.new_playthrough(tavern.library.find_character("Seraphina").id).id
    lines = [("Where am I?", "In the glade."), ("Who are you?", "A guardian of beasts."),
             ("I'll be back in five.", "Take care."), ("Back.", "Welcome back.")]
    for said, reply in lines:
        scripted.enqueue(reply)
        await drain(tavern.steps.send(pid, said))
    messages = tavern.playthroughs.messages(pid)
    tavern.timeline.delete_message(pid, messages[2].ref)  # "In the glade."
    messages = tavern.playthroughs.messages(pid)
    tavern.timeline.edit_message(pid, messages[2].ref, "Edited: who are you really?")
    return pid


@pytest.mark.parametrize(("query", "expected"), [
    ("back in five", "I'll be back in five."),
    ("beasts", "A guardian of beasts."),
])
async def test_a_search_hit_opens_with_the_cursor_on_that_message(
        corpus_tavern: Tavern, scripted: ScriptedProvider, query: str, expected: str) -> None:
    pid = await chat_with_an_edit_and_a_delete(corpus_tavern, scripted)
    app = TavernApp(corpus_tavern)  # a fresh app: as after a restart
    async with app.run_test(size=SIZE) as pilot:
        await workers_idle(pilot)
        await pilot.press("ctrl+f")
        await wait_until(pilot, lambda: isinstance(app.screen, SearchScreen) and app.screen.is_mounted)
        search = app.screen
        assert isinstance(search, SearchScreen)
        await pilot.press(*query)
        await search_settled(pilot, search)
        await wait_until(pilot, lambda: bool(search.hits))
        assert search.query_one("#search-results", OptionList).option_count >= 1
        await pilot.press("down", "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and app.screen.cursor_ref is not None)
        chat = app.screen
        assert isinstance(chat, ChatScreen) and chat.playthrough_id == pid
        assert chat.cursor_message is not None and chat.cursor_message.content == expected
        # No phantom "earlier message" above a chat that is shown whole.
        assert chat.transcript.earlier_count == 0
        assert [b.text for b in chat.transcript.boxes][1:3] == ["Where am I?", "Edited: who are you really?"]


async def test_page_to_ref_finds_a_message_read_further_back(corpus_tavern: Tavern,
                                                            scripted: ScriptedProvider) -> None:
    pid = corpus_tavern.playthroughs.new_playthrough(corpus_tavern.library.find_character("Seraphina").id).id
    for n in range(2 * WINDOW + 5):  # more than the chat screen reads at first (4 windows of messages)
        scripted.enqueue(f"reply {n}")
        await drain(corpus_tavern.steps.send(pid, f"line {n}"))
    messages = corpus_tavern.playthroughs.messages(pid)
    corpus_tavern.timeline.delete_message(pid, messages[-3].ref)  # the stored count is one too many now
    target = corpus_tavern.playthroughs.messages(pid)[3]
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        await open_character(pilot, "Seraphina")
        await wait_until(pilot, lambda: isinstance(app.screen, ChatScreen)
                                        and app.screen.is_mounted and bool(app.screen.transcript.boxes))
        await workers_idle(pilot)
        transcript = app.screen.transcript
        assert target.ref not in {b.view.ref for b in transcript.boxes if b.view is not None}
        box = await transcript.page_to_ref([(0, 0), target.ref])
        assert box is not None and box.view is not None and box.view.ref == target.ref
        assert box.text == target.content == "line 1"
        assert await transcript.page_to_ref([(0, 0)]) is None
