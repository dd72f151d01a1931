"""At 80×24 a group round's status line keeps its progress ("(1 of 2)") in view: the words around
it give way first (at a new user's terminal size)."""

from __future__ import annotations

from rich.cells import cell_len

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.screens.group_round import progress_detail
from tests.tui.conftest import GATE, ScriptedProvider, screen_text, wait_until, workers_idle
from tests.tui.test_group_chat import _glade, _replies, open_group
from tests.tui.test_narrow import NARROW


def test_the_progress_outlasts_the_words() -> None:
    assert progress_detail("Seraphina", 1, 2, None) == "Seraphina replies (1 of 2)"
    assert progress_detail("Seraphina", 1, 2, 26) == "Seraphina replies (1 of 2)"
    assert progress_detail("Seraphina", 1, 2, 25) == "Seraphina (1 of 2)"
    assert progress_detail("Seraphina", 2, 3, 14) == "Sera… (2 of 3)"
    assert progress_detail("Seraphina", 1, 2, 9) == "(1 of 2)"


async def test_at_80_columns_the_status_line_shows_which_member_of_how_many(corpus_tavern: Tavern,
                                                                            scripted: ScriptedProvider) -> None:
    _glade(corpus_tavern)
    scripted.enqueue("The forest ", GATE, "is quiet.")
    scripted.enqueue("Insect.")
    async with TavernApp(corpus_tavern).run_test(size=NARROW) as pilot:
        chat = await open_group(pilot)
        await pilot.press(*"Hello.")
        await pilot.press("enter")
        await wait_until(pilot, lambda: chat.reply_stream.box is not None and
                                        "The forest" in chat.reply_stream.box.text)
        status = chat.status
        await wait_until(pilot, lambda: "(1 of 2)" in status.line)
        assert cell_len(status.line) <= status.content_size.width  # nothing cut
        assert "(1 of 2)" in screen_text(pilot.app)
        scripted.gate.set()
        await wait_until(pilot, lambda: len(_replies(chat)) == 2 and not chat.generating)
        await workers_idle(pilot)
