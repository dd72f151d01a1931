"""Paging earlier messages in keeps the reading place in the same paint: the new boxes are laid
out and the view scrolled past them before the screen is drawn again, so no frame shows the new
boxes at the old scroll offset (a trial caught that frame while pressing PageUp, and a PageUp
pressed then skipped a dozen messages)."""

from __future__ import annotations

from typing import Any

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.widgets.transcript import WINDOW, Transcript
from tests.tui.conftest import wait_until, workers_idle
from tests.tui.test_app import SIZE, open_seraphina


async def _near_the_top(tavern: Tavern, pilot: Any) -> Transcript:
    """A new Seraphina chat of 81 messages, made as `pilot`'s app starts (call it first thing), then
    opened, its transcript scrolled three rows below the top of its first window (no page-in yet)."""
    seraphina = tavern.library.find_character("Seraphina")
    pid = tavern.playthroughs.new_playthrough(seraphina.id).id
    for i in range(40):
        async for _ in tavern.steps.send(pid, f"line {i}"):
            pass
    chat = await open_seraphina(pilot)
    await workers_idle(pilot)
    transcript = chat.transcript
    await wait_until(pilot, lambda: 0 < transcript.max_scroll_y <= transcript.scroll_y, timeout=30)
    transcript.scroll_to(y=3, animate=False, immediate=True)
    await pilot.pause()
    return transcript


async def test_a_page_in_keeps_the_place_before_the_next_paint(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        transcript = await _near_the_top(corpus_tavern, pilot)
        reading = transcript.boxes[0]
        offset = reading.virtual_region.y - round(transcript.scroll_y)
        assert await transcript.load_earlier() == WINDOW
        # No refresh has run since the mount: the place is kept already.
        assert transcript.scroll_y > 3
        assert reading.virtual_region.y - round(transcript.scroll_y) == offset
        await pilot.pause()
        assert reading.virtual_region.y - round(transcript.scroll_y) == offset  # and stays after it


async def test_a_page_up_near_the_top_pages_in_and_moves_a_whole_page(corpus_tavern: Tavern) -> None:
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        transcript = await _near_the_top(corpus_tavern, pilot)
        reading, page = transcript.boxes[0], transcript.scrollable_content_region.height
        before = reading.virtual_region.y - round(transcript.scroll_y)
        await pilot.press("pageup")  # the chat's key: the composer keeps the focus
        await wait_until(pilot, lambda: len(transcript.boxes) == 2 * WINDOW
                         and transcript.scroll_y == transcript.scroll_target_y, timeout=30)
        await pilot.pause()
        # A whole page up from where it was, not the three rows left above the old top.
        assert reading.virtual_region.y - round(transcript.scroll_y) == before + page
