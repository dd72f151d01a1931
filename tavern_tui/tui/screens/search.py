"""Provides `SearchScreen` (ctrl+f on home and in a chat, "Search" in the palette): find a line
in any chat, on any branch, and open the chat at that message (issue 20 item 4).

The search is the service's (`tavern.chats.search`: the database's own full-text index); this
screen types, lists and opens. Opening moves the chat's head onto the branch holding the
message (`tavern.chats.open_result`) before the screen closes with `(playthrough_id, ref)`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import Checkbox, Input, OptionList, Static
from textual.widgets.option_list import Option

from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.widgets.fit_footer import FitFooter
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import PlaythroughView, SearchResultView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

SEARCH_DELAY = 0.25
"""Seconds of quiet typing before the search runs."""

RESULT_LIMIT = 100
"""At most this many hits are listed (the newest first)."""

Opened = tuple[int, tuple[tuple[int, int], ...]]
"""What the screen closes with: the playthrough opened and the message's (session, seq) refs
(the event the chat shows for it first, then the one it stands for)."""


def result_prompt(hit: SearchResultView, query: str) -> Text:
    """A hit as two lines: "Character · #playthrough chat title · branch" (dim marks for another
    branch and archived; the number tells a branch made into its own playthrough from the one it
    came from, whose first lines and title are the same), then "speaker: snippet" with the
    query's words highlighted."""
    head = Text(hit.character_name, style="bold")
    head.append(f" · #{hit.playthrough_id} {hit.chat_title}")
    head.append(" · this branch" if hit.on_head else " · another branch (opens there)", style="dim")
    if hit.archived:
        head.append(" · archived", style="dim italic")
    line = Text(f"{hit.speaker}: ", style="bold dim")
    body = Text(hit.snippet)
    words = [w for w in re.findall(r"\w+", query) if w]
    if words:
        body.highlight_words(words, style="reverse", case_sensitive=False)
    line.append_text(body)
    return Text("\n").join([head, line])


class SearchScreen(TavernScreen[Opened | None]):
    """A query line, an "archived chats too" box and the hits; Enter on a hit opens it.

    Args:
        character: only this character's chats (an id as text, as `tavern search --character`); None: every chat.
    """

    DEFAULT_CSS = """
    SearchScreen #search-row { height: 3; }
    SearchScreen #search-query { width: 1fr; }
    SearchScreen #search-archived { width: auto; }
    SearchScreen #search-results { height: 1fr; }
    SearchScreen #search-status { height: 1; color: $text-muted; padding: 0 1; }
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="search.back"),
        Binding("ctrl+t", "toggle_archived", "Archived too", id="search.archived", priority=True,
                tooltip="List hits in archived chats as well"),
        Binding("down", "to_results", "Results", id="search.results", show=False),
    ]

    def __init__(self, tavern: Tavern, *, query: str = "", character: str | None = None) -> None:
        super().__init__(tavern)
        self._query = query
        self._character = character
        self._timer: Timer | None = None
        self.hits: list[SearchResultView] = []
        """The hits listed now, in the list's order."""

    def compose(self) -> ComposeResult:
        yield ScreenTitle("Search every chat · Enter on a hit opens it there", id="search-title", markup=False)
        with Horizontal(id="search-row"):
            yield Input(self._query, placeholder="words to find (every word must occur)", id="search-query",
                        classes="pane")
            yield Checkbox("Archived too (ctrl+t)", id="search-archived")
        yield Static("Type to search.", id="search-status", markup=False)
        results = OptionList(id="search-results", classes="pane", markup=False)
        results.border_title = "Hits"
        yield results
        yield FitFooter()

    def on_mount(self) -> None:
        self.query_one("#search-query", Input).focus()
        if self._query.strip():
            self._search()

    @property
    def include_archived(self) -> bool:
        """The "archived too" box is ticked."""
        return self.query_one("#search-archived", Checkbox).value

    @on(Input.Changed, "#search-query")
    def _changed(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(SEARCH_DELAY, self._search)

    @on(Input.Submitted, "#search-query")
    def _submitted(self) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._search(focus=True)

    @on(Checkbox.Changed, "#search-archived")
    def _archived_changed(self) -> None:
        self._search()

    def action_toggle_archived(self) -> None:
        """ctrl+t: hits in archived chats too, or not."""
        box = self.query_one("#search-archived", Checkbox)
        box.value = not box.value

    def action_to_results(self) -> None:
        """↓ from the query line: into the hits."""
        results = self.query_one("#search-results", OptionList)
        if self.hits:
            results.focus()

    def _search(self, focus: bool = False) -> None:
        self._timer = None
        query = self.query_one("#search-query", Input).value
        status = self.query_one("#search-status", Static)
        if not query.strip():
            self._show([], "", focus=False)
            status.update("Type to search.")
            return
        archived = self.include_archived
        status.update("Searching…")
        self.call(self.tavern.chats.search, query, character=self._character, include_archived=archived,
                  limit=RESULT_LIMIT, title="Cannot search", group="search", exclusive=True,
                  then=lambda hits: self._show(hits, query, focus=focus))

    def _show(self, hits: list[SearchResultView], query: str, *, focus: bool) -> None:
        if query != self.query_one("#search-query", Input).value:
            return  # typed on since: that search follows
        self.hits = list(hits)
        results = self.query_one("#search-results", OptionList)
        options: list[Option | None] = []
        for index, hit in enumerate(hits):
            if index:
                options.append(None)  # a rule between hits: each is two or three lines
            options.append(Option(result_prompt(hit, query), id=str(index)))
        results.set_options(options)
        status = self.query_one("#search-status", Static)
        if hits:
            more = " (the newest shown)" if len(hits) >= RESULT_LIMIT else ""
            status.update(f"{len(hits)} hit{'s' if len(hits) != 1 else ''}{more} · ↓ to the list, Enter opens")
            results.highlighted = 0
            if focus:
                results.focus()
        elif query:
            status.update("Nothing found" + ("" if self.include_archived else " (ctrl+t: archived chats too)"))

    @on(OptionList.OptionSelected, "#search-results")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        hit = self.hits[int(event.option.id or 0)]
        self.call(self.tavern.chats.open_result, hit, title="Cannot open that chat",
                  then=lambda chat: self._opened(chat, hit))

    def _opened(self, chat: PlaythroughView, hit: SearchResultView) -> None:
        refs = (hit.shown_ref, hit.ref) if hit.shown_ref and hit.shown_ref != hit.ref else (hit.ref,)
        self.dismiss((chat.id, refs))

    def action_back(self) -> None:
        """Esc: back where the search was opened, nothing opened."""
        self.dismiss(None)
