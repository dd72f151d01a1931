"""Provides `TavernApp`, the Textual application (a router between screens), and `run`."""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from datetime import UTC, datetime

from textual.app import App
from textual.binding import Binding
from textual.logging import TextualHandler

from tavern_tui.service import Tavern
from tavern_tui.tui import theming
from tavern_tui.tui.messages import PlaythroughChosen, WorldBooksRequested
from tavern_tui.tui.screens.home import HomeScreen


def _utc_now() -> datetime:
    return datetime.now(UTC)


QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
"""Signals the app treats as Quit (a streaming reply settles first)."""


class TavernApp(App[None]):
    """The tavern-tui application: opens on the home screen and routes to chats.

    Args:
        tavern: the service every operation goes through (the app never opens a database itself).
        now: the clock for relative times ("5 min ago"); tests freeze it.
    """

    TITLE = "tavern-tui"
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True),
    ]

    def __init__(self, tavern: Tavern, *, now: Callable[[], datetime] = _utc_now) -> None:
        # The stylesheet is located when the app is built, not at import (the CLI imports lazily).
        super().__init__(css_path=theming.css_path())
        self.tavern = tavern
        self.now = now
        loaded = theming.load_themes()
        for theme in loaded.themes:
            self.register_theme(theme)
        self._theme_failures = loaded.failed
        if any(t.name == theming.DEFAULT_THEME for t in loaded.themes):
            self.theme = theming.DEFAULT_THEME

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """The app's own CSS variables (speaker colours, marks), which themes may override."""
        return theming.app_variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        self.push_screen(HomeScreen(self.tavern, self.now))
        # SIGTERM and SIGHUP (a closed terminal, `tmux kill-pane`) quit like Ctrl+Q, so a streaming
        # reply is cancelled and settled with its text (issue 23 item 1), not cut off by the default kill.
        loop = asyncio.get_running_loop()
        for sig in QUIT_SIGNALS:
            loop.add_signal_handler(sig, self.exit)
        if self._theme_failures:
            self.notify("\n".join(self._theme_failures), title="Some themes did not load", severity="warning")

    async def on_unmount(self) -> None:
        """Close the provider's HTTP client on the loop that used it."""
        loop = asyncio.get_running_loop()
        for sig in QUIT_SIGNALS:
            loop.remove_signal_handler(sig)
        await self.tavern.aclose_provider()

    def on_playthrough_chosen(self, message: PlaythroughChosen) -> None:
        """Open the chosen playthrough in a chat screen on top of the home screen."""
        from tavern_tui.tui.screens.chat import ChatScreen
        self.push_screen(ChatScreen(self.tavern, message.playthrough_id, typed=message.typed))

    def on_world_books_requested(self, message: WorldBooksRequested) -> None:
        """Open the world-book pane (from a chat it knows the playthrough)."""
        from tavern_tui.tui.screens.lore import LoreScreen
        self.push_screen(LoreScreen(self.tavern, message.playthrough_id))


def run(tavern: Tavern) -> None:
    """Run the TUI on `tavern` until the person quits (the CLI's `tavern` / `tavern tui`).

    While it runs, log records go to Textual's log (devtools) instead of the CLI's stderr
    handler, which would write over the screen.
    """
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [TextualHandler()]
    try:
        TavernApp(tavern).run()
    finally:
        root.handlers = saved
