"""A swipe repaints only the transcript's tail (benchmarks `swipe_repaint`): the last box shows
the other variant in place, and the screen is laid out again only when the box's height changes."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.screen import Screen

from tavern_tui.tui import theming
from tavern_tui.tui.widgets.message_box import MessageBody
from tavern_tui.tui.widgets.transcript import Transcript
from tavern_tui.views import MessageView
from tests.tui.conftest import screen_text

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def _view(seq: int, content: str, *, session: int = 1) -> MessageView:
    role = "user" if seq % 2 else "assistant"
    return MessageView(ref=(session, seq), role=role, origin="customer" if role == "user" else "agent",
                       natural=True, kind=f"{role}/message", source=None, content=content,
                       speaker="Ann" if role == "user" else "Seraphina", created_at=NOW)


class _Chat(App[None]):
    def get_theme_variable_defaults(self) -> dict[str, str]:
        return theming.app_variable_defaults(self.current_theme)

    def compose(self) -> ComposeResult:
        yield Transcript(window=4, max_mounted=8)


@pytest.fixture
def layouts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The layout passes of the screen (each lays out every mounted widget), by the widgets that asked."""
    seen: list[str] = []
    real = Screen._refresh_layout

    def refresh_layout(self: Screen[object], *args: object, **kwargs: object) -> None:
        seen.append(",".join(sorted(type(w).__name__ for w in self._layout_widgets)) or type(self).__name__)
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Screen, "_refresh_layout", refresh_layout)
    yield seen


async def _laid_out(pilot: Pilot[None], layouts: list[str]) -> None:
    """Let the app run until a pause lays nothing out (a mount takes a second pass once the new
    widgets have sizes), then forget the passes seen."""
    for _ in range(50):
        layouts.clear()
        await pilot.pause()
        if not layouts:
            return
    raise AssertionError(f"the screen is still being laid out: {layouts}")


def _history() -> list[MessageView]:
    return [_view(seq, f"Line {seq}: the glade is quiet.") for seq in range(1, 7)]


async def _shown(app: _Chat, pilot: Pilot[None], layouts: list[str]) -> tuple[Transcript, list[MessageView]]:
    """The transcript showing six messages, laid out (the passes seen so far forgotten)."""
    transcript = app.query_one(Transcript)
    history = _history()
    await transcript.show(history, total=len(history))
    await _laid_out(pilot, layouts)
    return transcript, history


async def test_a_swipe_to_a_variant_as_tall_shows_it_in_the_last_box_without_a_layout(layouts: list[str]) -> None:
    app = _Chat()
    async with app.run_test(size=(80, 24)) as pilot:
        transcript, history = await _shown(app, pilot, layouts)
        boxes = transcript.boxes
        last = boxes[-1]
        height = last.size.height

        variant = _view(6, "Line 6 (b): the glade is still.", session=2)
        assert await transcript.sync([*history[:-1], variant], total=len(history))
        await pilot.pause()

        assert transcript.boxes == boxes  # nothing remounted: the same box shows the variant
        assert last.view == variant
        assert last.body.content.markup == "Line 6 (b): the glade is still."  # type: ignore[union-attr]
        assert last.size.height == height
        assert "Line 6 (b): the glade is still." in screen_text(app)
        assert "Line 6: the glade" not in screen_text(app)
        assert layouts == []  # only the body is repainted: no layout pass of the screen


async def test_a_swipe_to_a_taller_variant_lays_the_screen_out_and_the_box_grows(layouts: list[str]) -> None:
    app = _Chat()
    async with app.run_test(size=(80, 24)) as pilot:
        transcript, history = await _shown(app, pilot, layouts)
        last = transcript.boxes[-1]
        rows = last.query_one(MessageBody).size.height

        variant = _view(6, "Line 6 (c).\n\nShe waits.\n\nThen she speaks.", session=3)
        assert await transcript.sync([*history[:-1], variant], total=len(history))
        await pilot.pause()

        assert last.view == variant and transcript.boxes[-1] is last
        assert layouts  # the screen is laid out again: the box grows and the view follows
        assert last.query_one(MessageBody).size.height > rows


async def test_a_sync_with_nothing_changed_lays_nothing_out(layouts: list[str]) -> None:
    app = _Chat()
    async with app.run_test(size=(80, 24)) as pilot:
        transcript, history = await _shown(app, pilot, layouts)

        assert not await transcript.sync(list(history), total=len(history))
        await pilot.pause()

        assert transcript.earlier_count == 2  # the 2 held above the window of 4: the marker line shows
        assert layouts == []


async def test_the_queue_strip_shown_unchanged_lays_nothing_out(layouts: list[str]) -> None:
    # Every swipe and step re-reads the inbox and shows it: unchanged, the screen is not laid out.
    from tavern_tui.tui.widgets.composer import Composer
    from tavern_tui.tui.widgets.inbox_queue import QueueEditor
    from tavern_tui.views import InboxItemView

    class _Strip(App[None]):
        def compose(self) -> ComposeResult:
            composer = Composer(id="prompt")
            yield QueueEditor(composer, id="inbox")
            yield composer

    app = _Strip()
    async with app.run_test(size=(80, 24)) as pilot:
        strip = app.query_one(QueueEditor)
        item = InboxItemView(id="7", position=1, target="next-turn", text="Wait for me.", queued_at=NOW)
        strip.show([item])
        await _laid_out(pilot, layouts)
        strip.show([item])
        strip.show([InboxItemView(id="7", position=1, target="next-turn", text="Wait for me.", queued_at=NOW)])
        await pilot.pause()
        assert layouts == []
        strip.show([])
        await pilot.pause()
        assert layouts and strip.has_class("-empty")


def _long(seq: int, label: str, *, session: int) -> MessageView:
    """A reply of 40 paragraphs: far taller than the 24-row view."""
    return _view(seq, "\n\n".join(f"{label} paragraph {n}." for n in range(40)), session=session)


async def _reading_a_long_reply(app: _Chat, pilot: Pilot[None]) -> tuple[Transcript, list[MessageView]]:
    """Five short messages and a long last reply, shown and laid out, the view at its end."""
    transcript = app.query_one(Transcript)
    history = [*_history()[:-1], _long(6, "First", session=1)]
    await transcript.show(history, total=len(history))
    for _ in range(20):
        await pilot.pause()
        if transcript.max_scroll_y > 0 and transcript.scroll_y == transcript.max_scroll_y:
            break
    return transcript, history


def _top_offset(transcript: Transcript) -> int:
    return transcript.boxes[-1].virtual_region.y - round(transcript.scroll_y)


async def test_a_swipe_while_reading_the_top_of_a_long_reply_shows_the_other_variant_from_the_same_place() -> None:
    # A trial: reading the top of a long reply, a swipe showed the other variant's end.
    app = _Chat()
    async with app.run_test(size=(80, 24)) as pilot:
        transcript, history = await _reading_a_long_reply(app, pilot)
        transcript.scroll_to(y=transcript.boxes[-1].virtual_region.y - 3, animate=False, immediate=True)
        await pilot.pause()
        assert _top_offset(transcript) == 3

        assert await transcript.sync([*history[:-1], _long(6, "Second", session=2)], total=len(history))
        await pilot.pause()
        assert _top_offset(transcript) == 3
        assert "Second paragraph 0." in screen_text(app)


async def test_a_swipe_at_the_end_of_a_long_reply_shows_the_other_variant_from_its_start() -> None:
    app = _Chat()
    async with app.run_test(size=(80, 24)) as pilot:
        transcript, history = await _reading_a_long_reply(app, pilot)
        assert _top_offset(transcript) < 0  # the reply's top is above the view

        assert await transcript.sync([*history[:-1], _long(6, "Second", session=2)], total=len(history))
        await pilot.pause()
        assert _top_offset(transcript) == 0
        assert "Second paragraph 0." in screen_text(app)
        assert "Second paragraph 39." not in screen_text(app)


async def test_a_swipe_to_a_variant_that_fits_shows_the_end_of_the_chat_and_follows_it() -> None:
    app = _Chat()
    async with app.run_test(size=(80, 24)) as pilot:
        transcript, history = await _reading_a_long_reply(app, pilot)

        assert await transcript.sync([*history[:-1], _view(6, "Short.", session=2)], total=len(history))
        await pilot.pause()
        assert transcript.scroll_y == transcript.max_scroll_y
        assert transcript.is_anchored and "Short." in screen_text(app)
