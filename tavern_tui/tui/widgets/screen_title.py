"""Provides `ScreenTitle`: the one-line bold title bar at the top of each full screen."""

from __future__ import annotations

from textual.widgets import Static


class ScreenTitle(Static):
    """A screen's title line: one row, `$primary` bold text on `$panel`.

    It takes `Static`'s arguments; screens keep their own id on it (`#chat-title`, …) and
    `update()` it as the screen's state changes. It has no state classes.
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
