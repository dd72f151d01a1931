"""Provides `TavernApp`, the Textual application (a router between screens), and `run`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, cast

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.logging import TextualHandler
from textual.screen import Screen
from textual.widgets import Input

from tavern_tui.config import TuiSettings
from tavern_tui.config.store import save_config
from tavern_tui.tui import theming
from tavern_tui.tui.exit_watch import QUIT_SIGNALS, ExitWatchdog
from tavern_tui.tui.kept_text import put_back
from tavern_tui.tui.messages import DraftChosen, PlaythroughChosen, WorldBooksRequested
from tavern_tui.tui.opening import OpeningTavern, opened_service
from tavern_tui.tui.screens.home import HomeScreen

if TYPE_CHECKING:
    from tavern_tui.service import Tavern
    from tavern_tui.service.first_screen import FirstScreen
    from tavern_tui.tui.screens.notices import Notice


def _utc_now() -> datetime:
    return datetime.now(UTC)


LAST_WRITES_WAIT = 3.0
"""Seconds the app waits, as it ends, for the writes handed to `TavernApp.write_before_exit`
(within the quit watchdog's grace, `exit_watch.EXIT_GRACE`)."""


__all__ = ["QUIT_SIGNALS", "TavernApp", "run"]


class TavernApp(App[None]):
    """The tavern-tui application: opens on the home screen and routes to chats.

    Args:
        tavern: the service every operation goes through (the app never opens a database
            itself), or an `OpeningTavern` it starts opening once the first frame is painted.
        now: the clock for relative times ("5 min ago"); tests freeze it.
        first: the home screen's first list, read before the service opened (shown at once).
    """

    TITLE = "tavern-tui"
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (theming.WIDE_AT, "-wide")]
    """Below 100 columns every screen has the class `-narrow` (app.tcss stacks side-by-side panes)."""
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="app.quit", priority=True),
        Binding("f1", "help", "Help", id="app.help", show=False),  # the palette key says "f1 help"
        # Textual's own palette binding, with a label saying where help is (issue 21 item 2): it is
        # docked on the right of every footer and never left out. The label is the footer's (two
        # keys in one); the F1 help lists the key by its tooltip (`help.FOOTER_ONLY`).
        Binding("ctrl+p", "command_palette", "palette · f1 help", id="app.palette", show=False, priority=True,
                tooltip="Open the command palette"),
        # `?` only where it cannot be typed (check_action hands it to a focused text field).
        Binding("question_mark", "help_key", "Help", id="app.help_key", show=False),
        # Priority: resolved as the key arrives, so the keys typed after it go to the settings
        # screen, not to the composer under it (a trial: the URL typed at once landed in the chat);
        # a screen that saves with ctrl+s keeps it (`check_action`).
        Binding("ctrl+s", "settings", "Settings", id="app.settings", show=False, priority=True),
        Binding("ctrl+l", "notices", "Notifications", id="app.notices", show=False,
                tooltip="Every notification of this run, in full"),
    ]

    def __init__(self, tavern: Tavern, *, now: Callable[[], datetime] = _utc_now,
                 first: FirstScreen | None = None) -> None:
        # The stylesheet is located when the app is built, not at import (the CLI imports lazily).
        super().__init__(css_path=theming.css_path())
        self.tavern = tavern
        self.now = now
        self._first = first
        if isinstance(tavern, OpeningTavern):
            tavern.failed = self._opening_failed
        self._loop: asyncio.AbstractEventLoop | None = None
        loaded = theming.load_themes()
        for theme in loaded.themes:
            self.register_theme(theme)
        self._theme_failures = loaded.failed
        self.notices: list[Notice] = []
        """Every notification of this run, in full (ctrl+l lists them)."""
        self._last_writes: set[asyncio.Future[object]] = set()
        self.unsent: dict[int, str] = {}
        """Per playthrough, what was typed into a chat that could not open (a database another
        process held locked): it comes back in that chat's composer when it opens."""
        remembered = tavern.settings.tui.theme
        if remembered and remembered in self.available_themes:
            self.theme = remembered
        elif any(t.name == theming.DEFAULT_THEME for t in loaded.themes):
            self.theme = theming.DEFAULT_THEME
        keymap: dict[str, str] = {}
        self._keymap_problems: list[str] = []
        if tavern.settings.keys:  # resolving imports every screen: only when there is a `[keys]` remap
            from tavern_tui.tui.keymap import resolve_keymap

            keymap, self._keymap_problems = resolve_keymap(tavern.settings.keys,
                                                           str(tavern.settings.config_path or "config.toml"))
        if keymap:
            self.set_keymap(keymap)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        """The app's own CSS variables (speaker colours, marks), which themes may override."""
        return theming.app_variable_defaults(self.current_theme)

    def on_mount(self) -> None:
        self.push_screen(HomeScreen(self.tavern, self.now, self._first))
        self._first = None
        self._loop = asyncio.get_running_loop()
        if self._theme_failures:
            self.notify("\n".join(self._theme_failures), title="Some themes did not load", severity="warning")
        problems = list(self.tavern.settings.warnings) + self._keymap_problems
        if problems:
            self.notify(f"{len(problems)} setting{'s' if len(problems) != 1 else ''} ignored: {problems[0]}"
                        + (" … (ctrl+l lists them all)" if len(problems) > 1 else ""),
                        title="Config file", severity="warning", timeout=10)
            for problem in problems:
                self.record_notice("warning", "Config file", problem)
        self._theme_ready = True

    def on_ready(self) -> None:
        """The first frame is on the screen: open the service now if it is not open yet."""
        if isinstance(self.tavern, OpeningTavern):
            self.tavern.start()

    def _opening_failed(self, _error: BaseException) -> None:
        # In the opening thread: quit; `run` raises the error once the app is gone, and the
        # command says what went wrong as when the service is opened before the app.
        with contextlib.suppress(RuntimeError):  # the app already ended
            self.call_from_thread(self.exit)

    def notify(self, message: str, *, title: str = "", severity: str = "information",  # type: ignore[override]
               timeout: float | None = None, markup: bool = False) -> None:
        """Show a toast, and keep it in full for the notifications screen (ctrl+l).

        The message is always literal text (`markup` is ignored): toasts show error messages,
        names and config keys such as `[tools]` or "no [DONE]", which markup would swallow, and a
        widget's or screen's `notify` passes `markup=True` to the app unless told otherwise.
        """
        self.record_notice(severity, title, message)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)  # type: ignore[arg-type]

    def record_notice(self, severity: str, title: str, text: str) -> None:
        """Keep a notice for the notifications screen without a toast (an import's every warning)."""
        from tavern_tui.tui.screens.notices import Notice  # the screen loads on first use, not at start

        self.notices.append(Notice(_utc_now(), severity, title, text))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "settings":
            return not self._screen_binds("ctrl+s")
        if action == "help_key":
            # The footer asks this while the first screen paints: TextArea is not imported for it
            # (~10 ms, with its syntax highlighting); a TextArea on screen has imported it already.
            text_area = sys.modules.get("textual.widgets._text_area")
            kinds = (Input, text_area.TextArea) if text_area is not None else (Input,)
            if isinstance(self.focused, kinds):
                return False  # `?` is typed into a text field; F1 still opens the help
        return True

    def _screen_binds(self, key: str) -> bool:
        """The current screen, or a widget in its focus chain, binds `key` itself (a save on ctrl+s)."""
        # The nodes' own maps, not `Screen._binding_chain`: that copies every map of the chain, and
        # this runs for each footer check (a key a focused text field consumes is no save either way).
        focused = self.screen.focused
        nodes = focused.ancestors_with_self if focused is not None else (self.screen,)
        return any(key in node._bindings.key_to_bindings for node in nodes if node is not self)  # noqa: SLF001

    def action_help_key(self) -> None:
        """`?` outside a text field: the help."""
        self.action_help()

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The palette's app commands: Settings, Keys (the help), Notifications, then Textual's."""
        yield SystemCommand("Settings", "Endpoint, model, API key, world info, theme… (ctrl+s)", self.action_settings)
        yield SystemCommand("Help: keys of this screen", "Every key here, by group (F1)", self.action_help)
        yield SystemCommand("Notifications", "Every notification of this run, in full (ctrl+l)",
                            self.action_notices)
        yield SystemCommand("Search", "Find a line in any chat, on any branch (ctrl+f)", self.action_search)
        yield from super().get_system_commands(screen)

    def action_help(self) -> None:
        """Open the keys of the current screen (not over another help)."""
        from tavern_tui.tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.screen))

    def action_search(self) -> None:
        """Open the search over every chat (not twice); Enter on a hit opens that chat at that
        message, on its branch, in place of the screens above home (issue 20 item 4)."""
        from tavern_tui.tui.screens.search import SearchScreen

        if not isinstance(self.screen, SearchScreen):
            self.push_screen(SearchScreen(self.tavern), self._search_closed)

    def _search_closed(self, opened: tuple[int, tuple[tuple[int, int], ...]] | None) -> None:
        if opened is None:
            return
        while len(self.screen_stack) > 2 and not isinstance(self.screen, HomeScreen):
            self.pop_screen()  # the chat (or pane) the search was opened over gives way to the hit's chat
        playthrough_id, refs = opened
        self.post_message(PlaythroughChosen(playthrough_id, focus=refs))

    def action_settings(self) -> None:
        """Open the settings screen (not twice)."""
        from tavern_tui.tui.screens.settings import SettingsScreen  # (its endpoint probe imports httpx)

        if not isinstance(self.screen, SettingsScreen):
            self.push_screen(SettingsScreen(self.tavern))

    def action_notices(self) -> None:
        """Open the list of this run's notifications."""
        from tavern_tui.tui.screens.notices import NoticesScreen

        if not isinstance(self.screen, NoticesScreen):
            self.push_screen(NoticesScreen(self.notices))

    def apply_tui_settings(self, tui: TuiSettings) -> None:
        """Use the saved `[tui]` choices now: the theme, and the chat's labels (each chat screen
        re-reads them through `tavern.settings.tui`)."""
        if tui.theme and tui.theme in self.available_themes and self.theme != tui.theme:
            self.theme = tui.theme
        for screen in self.screen_stack:
            hook = getattr(screen, "settings_changed", None)
            if hook is not None:
                hook()

    def watch_theme(self, theme: str) -> None:
        """Remember a theme chosen in the palette (or settings) in the config file's `[tui]`."""
        if not getattr(self, "_theme_ready", False) or type(self.screen).__name__ == "SettingsScreen":
            return  # the start, or a preview in the settings screen (its Save remembers it)
        path = self.tavern.settings.config_path
        if path is None or theme == self.tavern.settings.tui.theme:
            return
        import dataclasses

        settings = self.tavern.settings
        self.tavern.settings = dataclasses.replace(settings, tui=dataclasses.replace(settings.tui, theme=theme))
        self.tavern.ctx.settings = self.tavern.settings
        self.run_worker(lambda: save_config(path, {"tui": {"theme": theme}}), thread=True, group="config",
                        exit_on_error=False, description="remember the theme")

    def request_exit(self) -> None:
        """Quit like Ctrl+Q from any thread (a quit signal, a lost terminal): a streaming reply
        is cancelled and settled with its text. Does nothing before the app runs."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self.exit)

    def write_before_exit(self, fn: Callable[..., object], *args: object, title: str) -> None:
        """Run a service write that must outlive the screen asking for it (a chat's pending draft
        as the chat closes, the app quitting) in a thread, off the event loop. The app waits for
        it (up to `LAST_WRITES_WAIT` seconds) before it ends; its error is logged under `title`."""
        write: asyncio.Future[object] = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        self._last_writes.add(write)

        def ended(done: asyncio.Future[object]) -> None:
            self._last_writes.discard(done)
            if not done.cancelled() and done.exception() is not None:
                logging.getLogger(__name__).error("%s: %r", title, done.exception())

        write.add_done_callback(ended)

    async def on_unmount(self) -> None:
        """Finish the writes handed to `write_before_exit` (the screens closed first), then close
        the provider's HTTP client on the loop that used it."""
        self._loop = None
        if self._last_writes:
            await asyncio.wait(set(self._last_writes), timeout=LAST_WRITES_WAIT)
        opened = opened_service(self.tavern)
        if opened is not None:  # (a service still opening has made no HTTP client)
            await opened.aclose_provider()

    def on_playthrough_chosen(self, message: PlaythroughChosen) -> None:
        """Open the chosen playthrough in a chat screen on top of the home screen."""
        from tavern_tui.tui.screens.chat import ChatScreen  # imported on first use: start-up paints home sooner

        kept = self.unsent.pop(message.playthrough_id, "")
        self.push_screen(ChatScreen(self.tavern, message.playthrough_id, typed=put_back(kept, message.typed),
                                    send=message.send,
                                    focus=message.focus))

    def on_draft_chosen(self, message: DraftChosen) -> None:
        """Open an opening draft on top of the home screen (issue 20 item 1)."""
        from tavern_tui.tui.screens.draft import DraftScreen

        self.push_screen(DraftScreen(self.tavern, message.draft_id, typed=message.typed))

    def on_world_books_requested(self, message: WorldBooksRequested) -> None:
        """Open the world-book pane (from a chat it knows the playthrough)."""
        from tavern_tui.tui.screens.lore import LoreScreen  # first use: it loads the lore engine

        self.push_screen(LoreScreen(self.tavern, message.playthrough_id))


def _stop_tools(tavern: Tavern | OpeningTavern) -> None:
    opened = opened_service(tavern)
    # Only if built (and the service open): settling must not start the area.
    tools = opened.__dict__.get("tools") if opened is not None else None
    if tools is not None:
        tools.close()


def run(tavern: Tavern | OpeningTavern, first: FirstScreen | None = None) -> None:
    """Run the TUI on `tavern` until the person quits (the CLI's `tavern` / `tavern tui`).

    With an `OpeningTavern` and the home screen's `first` list, the list is painted first and
    the service opened behind it; once the app has ended this waits for the opening thread to
    finish, its imports ahead of use too (the caller closes the service), and raises what
    opening it raised (TavernError: the database cannot be opened).

    While it runs, log records go to Textual's log (devtools) instead of the CLI's stderr
    handler, which would write over the screen. SIGTERM, SIGHUP and a lost terminal quit like
    Ctrl+Q; a clean exit that does not finish within a few seconds (a worker blocked on a lock)
    is cut short (`ExitWatchdog`): the handlers stay until the process ends, so a stuck
    shutdown is covered too.
    """
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [TextualHandler()]
    app = TavernApp(cast("Tavern", tavern), first=first)
    watchdog = ExitWatchdog()
    watchdog.on_settle(lambda: _stop_tools(tavern))  # no MCP server process outlives us
    watchdog.install(app.request_exit)
    try:
        app.run()
    finally:
        root.handlers = saved
    if isinstance(tavern, OpeningTavern):
        tavern.start()  # (started already, unless the app ended before its first frame)
        try:
            tavern.wait()
        finally:
            tavern.finish()
