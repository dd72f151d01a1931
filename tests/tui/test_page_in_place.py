"""Paging earlier messages in keeps the reading place in the same paint: the new boxes are laid
out and the view scrolled past them before the screen is drawn again, so no frame shows the new
boxes at the old scroll offset (a trial caught that frame while pressing PageUp, and a PageUp
pressed then skipped a dozen messages)."""

from __future__ import annotations

from typing import Any

import pytest
from textual import events
from textual.screen import Screen

from tavern_tui.service import Tavern
from tavern_tui.tui.app import TavernApp
from tavern_tui.tui.widgets.message_box import MessageBox
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


@pytest.mark.parametrize("focused", ["composer", "transcript"])
async def test_a_page_up_near_the_top_pages_in_and_moves_a_whole_page(corpus_tavern: Tavern, focused: str) -> None:
    """Whether the composer has the focus (the chat's key) or the transcript (the message
    cursor's, where the scroll container's own key answered and paged in only at the very top)."""
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        transcript = await _near_the_top(corpus_tavern, pilot)
        if focused == "transcript":
            transcript.focus()
            await pilot.pause()
        reading, page = transcript.boxes[0], transcript.scrollable_content_region.height
        before = reading.virtual_region.y - round(transcript.scroll_y)
        await pilot.press("pageup")
        await wait_until(pilot, lambda: len(transcript.boxes) == 2 * WINDOW
                         and transcript.scroll_y == transcript.scroll_target_y, timeout=30)
        await pilot.pause()
        # A whole page up from where it was, not the three rows left above the old top.
        assert reading.virtual_region.y - round(transcript.scroll_y) == before + page


def _top_message(screen: Screen[Any], transcript: Transcript) -> int | None:
    """The index of the first message the screen's compositor places in the transcript's
    rows (what the frame painted shows), or None when no message is."""
    region = transcript.region
    for y in range(region.y, region.bottom):
        widget: Any = screen.get_widget_at(region.x + 4, y)[0]
        while widget is not None and not isinstance(widget, MessageBox):
            widget = widget.parent
        if widget is not None:
            return transcript.message_index(widget)
    return None


async def test_no_frame_painted_during_a_page_up_shows_a_message_above_where_it_stops(
        corpus_tavern: Tavern, monkeypatch: Any) -> None:
    """Every frame drawn while a PageUp pages in and scrolls shows, at the top of the transcript,
    a message between where the reader was and where the press stops: inside the page-in's
    batch a layout pass queued a paint of the map it had built before the scroll was set, and
    that frame showed the new batch's first messages (a trial in tmux saw it on every page-in)."""
    painted: list[int | None] = []
    watching: list[Transcript] = []
    paint = Screen._compositor_refresh

    def recording(screen: Screen[Any]) -> None:
        paint(screen)
        if watching:
            painted.append(_top_message(screen, watching[0]))

    monkeypatch.setattr(Screen, "_compositor_refresh", recording)
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        transcript = await _near_the_top(corpus_tavern, pilot)
        reading = transcript.message_index(transcript.boxes[0])
        watching.append(transcript)
        await pilot.press("pageup")
        await wait_until(pilot, lambda: len(transcript.boxes) == 2 * WINDOW
                         and transcript.scroll_y == transcript.scroll_target_y, timeout=30)
        await pilot.pause()
        stopped = painted[-1]
        assert stopped is not None and stopped < reading  # it moved up
        assert None not in painted
        assert all(stopped <= top <= reading for top in painted), painted
        assert painted == sorted(painted, reverse=True), painted  # only ever up


async def test_two_quick_page_ups_move_two_pages(corpus_tavern: Tavern) -> None:
    """A PageUp pressed while the last one still scrolls goes on from where that one was going
    (Textual's page key starts its scroll after the next refresh, from the row shown then: a
    second press sent before it moved from the same row, and one page was lost)."""
    app = TavernApp(corpus_tavern)
    async with app.run_test(size=SIZE) as pilot:
        transcript = await _near_the_top(corpus_tavern, pilot)
        await transcript.load_earlier()
        await pilot.pause()
        page = transcript.scrollable_content_region.height
        start = transcript.max_scroll_y
        assert start > 2 * page
        transcript.scroll_to(y=start, animate=False, immediate=True)
        await pilot.pause()
        for _ in range(2):  # as a terminal sends them: the second before the first's scroll ends
            key = events.Key("pageup", None)
            key.set_sender(app)
            app._driver.send_message(key)  # type: ignore[union-attr]
        await wait_until(pilot, lambda: transcript.scroll_y < start
                         and not app.animator.is_being_animated(transcript, "scroll_y"), timeout=30)
        await pilot.pause()
        assert transcript.scroll_y == start - 2 * page
