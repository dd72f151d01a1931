"""Provides `ScreenTitle`: the one-line bold title bar at the top of each full screen."""

from __future__ import annotations

from textual.app import RenderResult
from textual.content import Content
from textual.widgets import Static


def fit_words(text: str, width: int) -> int:
    """Where to cut `text` so that it and a trailing "…" fit `width` cells, at a word boundary
    (before the last " · " part that does not fit, else the last space); `len(text)` when it fits.
    Never cuts a word unless the first word alone is wider than `width`."""
    if len(text) <= width:
        return len(text)
    room = max(0, width - 1)
    for separator in (" · ", " "):
        cut = text.rfind(separator, 0, room + 1)
        if cut > 0:
            return len(text[:cut].rstrip())
    return room


class ScreenTitle(Static):
    """A screen's title line: one row, `$primary` bold text on `$panel`.

    It takes `Static`'s arguments; screens keep their own id on it (`#chat-title`, …) and
    `update()` it as the screen's state changes. It has no state classes. A title wider than
    the screen ends with "…" at a word boundary (issue 21 item 8: never cut mid-word).
    """

    DEFAULT_CSS = """
    ScreenTitle {
        height: 1;
        padding: 0 1;
        background: $panel;
        color: $primary;
        text-style: bold;
    }
    """

    def render(self) -> RenderResult:
        visual = self.visual
        width = self.content_region.width
        if not isinstance(visual, Content) or width <= 0 or len(visual.plain) <= width:
            return visual
        return visual[: fit_words(visual.plain, width)] + Content("…")
