"""Provides `HomeScreen`: the imported characters, the highlighted one's playthroughs, import.

The screen lists, filters and opens; its parts live beside it: `home_rows` (the list entries and
the card pane's text), `home_groups` (group chats in the lists), `home_playthroughs` (the
playthrough actions: new, rename, play as, archive) and `home_import` (the card import flow).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tavern_tui.tui.labels import draft_summary
from tavern_tui.tui.messages import DraftChosen, PlaythroughChosen, WorldBooksRequested
from tavern_tui.tui.opening import opened_service
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.screens.home_groups import (
    group_details,
    group_id_of,
    group_matches,
    group_option_id,
    group_playthroughs,
    group_prompt,
    latest_or_new,
)
from tavern_tui.tui.screens.home_import import HomeImport
from tavern_tui.tui.screens.home_playthroughs import HomePlaythroughs
from tavern_tui.tui.screens.home_rows import (
    DRAFT_PREFIX,
    character_details,
    character_matches,
    character_prompt,
    playthrough_prompt,
)
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import CharacterView, GroupView, OpeningView, PlaythroughView, distinct_labels

if TYPE_CHECKING:
    from tavern_tui.service import Tavern
    from tavern_tui.service.first_screen import FirstScreen

EMPTY_TEXT = ("No characters yet.\n\n"
              "Import a character card (.png or .json) with `tavern import FILE`,\n"
              "or press ctrl+o here and pick or paste its path.")
"""What the home screen says when nothing is imported."""


class HomeScreen(HomePlaythroughs, HomeImport, TavernScreen[None]):
    """Lists characters (Enter: latest playthrough, else its newest opening draft, else a new
    draft) and their playthroughs and drafts (a draft is marked as such, issue 20); then the
    group chats (`home_groups`: Enter opens the newest playthrough of the group, else a new one).

    Posts `PlaythroughChosen` for the app to open. Mixed in: the playthrough actions
    (`HomePlaythroughs`) and the card import, run in a thread worker (`HomeImport`).
    """

    # No single letters: typing filters the character list (issue 21 item 4), so every command
    # is on a key that cannot be typed by accident.
    BINDINGS = [
        Binding("ctrl+n", "new_playthrough", "New playthrough", id="home.new_playthrough",
                tooltip="Make an opening draft: pick the greeting, nothing is played until you send"),
        Binding("ctrl+o", "import_cards", "Import", id="home.import"),
        Binding("f2", "world_books", "World books", id="home.world_books"),
        Binding("f8", "persona", "Persona", id="home.persona"),
        Binding("ctrl+f", "app.search", "Search", id="home.search",
                tooltip="Find a line in any chat, on any branch"),
        Binding("ctrl+k", "card", "Card", id="home.card",
                tooltip="The highlighted character's whole card: every field, edit, archive"),
        Binding("ctrl+e", "rename_playthrough", "Rename", id="home.rename", show=False,
                tooltip="Give the highlighted playthrough a title"),
        Binding("ctrl+a", "archive_playthrough", "Archive", id="home.archive", show=False,
                tooltip="Hide the highlighted playthrough from the lists (nothing is deleted), or bring it back"),
        Binding("ctrl+y", "play_as", "Play as", id="home.play_as", show=False,
                tooltip="The name the highlighted playthrough's new lines are written under"),
        Binding("ctrl+u", "toggle_archived", "Show archived", id="home.show_archived", show=False,
                tooltip="List archived characters and playthroughs too, or hide them again"),
        Binding("f5", "refresh", "Refresh", id="home.refresh", show=False),
        Binding("escape", "clear_filter", "Clear filter", id="home.clear_filter", show=False),
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}  # the palette lists this screen's keys

    def __init__(self, tavern: Tavern, now: Callable[[], datetime], first: FirstScreen | None = None) -> None:
        super().__init__(tavern)
        self._now = now
        self._first = first  # the first list, read before the service opened: shown at once
        self._characters: dict[int, CharacterView] = {}
        self._typed_ahead: list[str] | None = None  # keys typed while a chat is being opened
        self._cursor_on = ""  # the option the cursor was last on: clearing a filter goes back to it
        self._all: list[CharacterView] = []  # every character; the list shows those matching the filter
        self._groups: list[GroupView] = []  # every group, listed after the characters
        self._playthroughs: dict[int, PlaythroughView] = {}  # the highlighted character's, as listed
        self.filter = ""
        """What was typed on this screen: the characters list shows the names (or tags, creator)
        holding it, case-insensitively; "#word" matches tags only (a tag starting with it)."""
        self.show_archived = False
        self._left = False
        """Another screen was pushed over this one since it was shown (its lists may be stale)."""
        """ctrl+u: archived characters and playthroughs are listed too (marked)."""

    def compose(self) -> ComposeResult:
        yield ScreenTitle("tavern-tui  ·  Enter plays a character's latest playthrough (or starts one)",
                          id="home-title", markup=False)
        yield Static(EMPTY_TEXT, id="empty", markup=False)
        with Horizontal(id="home-panes"):
            characters = OptionList(id="characters", classes="pane", markup=False)
            characters.border_title = "Characters"
            yield characters
            with Vertical(id="character-side"):
                playthroughs = OptionList(id="playthroughs", classes="pane", markup=False)
                playthroughs.border_title = "Playthroughs"
                playthroughs.border_subtitle = "^e rename · ^a archive · ^u all"
                yield playthroughs
                details = Static("", id="character-details", markup=False)
                details.border_title = "Card"
                details.border_subtitle = "^k whole card"
                yield details
        yield FitFooter()

    def on_mount(self) -> None:
        # Start on the character played last, so reopening the app shows where the person left off.
        self.query_one("#characters", OptionList).focus()
        first, self._first = self._first, None
        if first is not None:
            # Painted now; the playthroughs and the groups follow once the service is open (the
            # characters are read again then, the cursor staying where the person moved it).
            self._show_characters(list(first.characters), first.last_played)
            self.refresh_characters()
            return

        def read() -> tuple[list[CharacterView], int | None, list[GroupView]]:
            return self._read_characters(), self.tavern.library.last_played_character(), self.tavern.groups.groups()

        self.call(read, title="Cannot read the characters", group="characters",
                  then=lambda found: self._show_characters(*found))

    def on_key(self, event: events.Key) -> None:
        """While a chat is being opened (Enter was pressed, its playthrough is read or
        created in a worker), printable keys are kept for its composer instead of reaching
        this screen's keys (n, i, w, p): Enter on a character, then typing at once, loses nothing."""
        if self._typed_ahead is not None and event.is_printable and event.character:
            self._typed_ahead.append(event.character)
            event.stop()
            event.prevent_default()
            return
        if event.key == "enter" and self._typed_ahead is None and self._enter_opens():
            # Keys reach this screen before the list's Enter binding selects, and a fast typist's
            # next keys before the selection does: from this Enter on they are the chat's.
            self._typed_ahead = []
            return  # not stopped: the list's binding selects
        # Type-to-search: printable keys (not `?`, the help) filter the characters.
        if event.is_printable and event.character and event.character != "?":
            self._set_filter(self.filter + event.character)
        elif event.key == "backspace" and self.filter:
            self._set_filter(self.filter[:-1])
        else:
            return
        event.stop()
        event.prevent_default()

    def _enter_opens(self) -> bool:
        """Does Enter here open something: a list with a selectable option under its cursor?"""
        focused = self.focused
        if not isinstance(focused, OptionList) or focused.id not in ("characters", "playthroughs"):
            return False
        option = focused.highlighted_option
        return option is not None and not option.disabled

    def _set_filter(self, text: str) -> None:
        self.filter = text
        self._show_characters(self._all, None, self._groups)

    def action_clear_filter(self) -> None:
        """Esc: show every character again."""
        if self.filter:
            self._set_filter("")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            return bool(self.filter)
        return True

    def _choose(self, playthrough_id: int) -> None:
        typed = "".join(self._typed_ahead or [])
        self._typed_ahead = None
        self.post_message(PlaythroughChosen(playthrough_id, typed))

    def _choose_draft(self, draft_id: int) -> None:
        typed = "".join(self._typed_ahead or [])
        self._typed_ahead = None
        self.post_message(DraftChosen(draft_id, typed))

    def on_screen_suspend(self) -> None:
        self._left = True

    def on_screen_resume(self) -> None:
        self._typed_ahead = None
        # Coming back from a chat: message counts and the order of playthroughs changed. (Not
        # when first shown: `on_mount` reads them; a second read would cost the start a worker.)
        if self.is_mounted and self._left:
            self.refresh_characters()

    @property
    def highlighted_character(self) -> CharacterView | None:
        """The character under the cursor, if any."""
        option = self.query_one("#characters", OptionList).highlighted_option
        if option is None or not option.id or group_id_of(option.id) is not None:
            return None
        return self._characters.get(int(option.id))

    @property
    def highlighted_group(self) -> GroupView | None:
        """The group under the cursor, if any."""
        option = self.query_one("#characters", OptionList).highlighted_option
        wanted = group_id_of(option.id if option else None)
        return next((g for g in self._groups if g.id == wanted), None)

    def refresh_characters(self, select: int | None = None, *, shown: str = "") -> None:
        """Re-read the characters in a worker, keeping the cursor on the same one.

        Args:
            select: id of a character to put the cursor on instead.
            shown: a toast once the new list is on the screen (not before: on a start the read
                waits for the service).
        """
        def read() -> tuple[list[CharacterView], list[GroupView]]:
            return self._read_characters(), self.tavern.groups.groups()

        def show(found: tuple[list[CharacterView], list[GroupView]]) -> None:
            self._show_characters(found[0], select, found[1])
            if shown:
                self.notify(shown, timeout=2)

        self.call(read, title="Cannot read the characters", group="characters", then=show)

    def _read_characters(self) -> list[CharacterView]:
        return self.tavern.library.characters(include_archived=self.show_archived)

    def _show_characters(self, characters: list[CharacterView], select: int | None,
                         groups: list[GroupView] | None = None) -> None:
        self._all = list(characters)
        self._groups = list(groups) if groups is not None else self._groups
        self.set_class(not characters, "-empty")
        listing = self.query_one("#characters", OptionList)
        group = self.highlighted_group
        current = str(select) if select is not None else (
            group_option_id(group) if group else str(getattr(self.highlighted_character, "id", "")))
        current = current or self._cursor_on  # a filter that matched nothing kept no cursor
        needle = self.filter.casefold().strip()
        characters = [c for c in characters if character_matches(c, needle)]
        shown_groups = [g for g in self._groups if group_matches(g, needle)]
        self._characters = {c.id: c for c in characters}
        listing.border_title = Content(f"Characters · {self.filter!r} ({len(characters)}/{len(self._all)}) · Esc clears"
                                if self.filter else "Characters")
        labels = distinct_labels(self._all)  # characters sharing a name show their file and id
        listing.set_options([*(Option(character_prompt(c, labels[c.id]), id=str(c.id)) for c in characters),
                             *(Option(group_prompt(g), id=group_option_id(g)) for g in shown_groups)])
        if characters or shown_groups:
            ids = [str(c.id) for c in characters] + [group_option_id(g) for g in shown_groups]
            listing.highlighted = ids.index(current) if current in ids else 0
        self.refresh_playthroughs()

    def refresh_playthroughs(self) -> None:
        """Show the highlighted character's playthroughs, most recently played first."""
        listing = self.query_one("#playthroughs", OptionList)
        details = self.query_one("#character-details", Static)
        character = self.highlighted_character
        if character is None and self.highlighted_group is not None:
            self._refresh_group_playthroughs(self.highlighted_group)
            return
        if character is None:  # none at all, or the filter matches none: no one's playthroughs stay up
            listing.clear_options()
            details.update("")
            listing.border_title = Content("Playthroughs")
            if self.filter and self._all:
                listing.add_option(Option(Text(f"No character matches {self.filter!r} · Esc clears the filter"),
                                          disabled=True))
            return
        # The card pane and the title need no read: shown now, so the first frame has its layout
        # (on a start the service may still be opening; its playthroughs follow).
        details.update(character_details(character))
        listing.border_title = Content(f"Playthroughs of {character.name}")  # a str is markup
        if listing.option_count == 0:
            listing.add_option(Option("Reading the playthroughs…", disabled=True))
        self.call(self._read_playthroughs, character.id, title="Cannot read the playthroughs",
                  group="playthroughs", exclusive=True,
                  then=lambda found: self._show_playthroughs(character, *found))

    def _refresh_group_playthroughs(self, group: GroupView) -> None:
        def show(found: list[PlaythroughView]) -> None:
            if self.highlighted_group is None or self.highlighted_group.id != group.id:
                return  # the cursor moved on
            now = self._now()
            self._playthroughs = {p.id: p for p in found}
            listing = self.query_one("#playthroughs", OptionList)
            listing.set_options(Option(playthrough_prompt(p, now), id=str(p.id)) for p in found)
            if found:
                listing.highlighted = 0
            listing.border_title = Content(f"Playthroughs of {group.name}")
            self.query_one("#character-details", Static).update(group_details(group))

        self.call(group_playthroughs, self.tavern, group.id, self.show_archived, title="Cannot read the playthroughs",
                  group="playthroughs", exclusive=True, then=show)

    def _read_playthroughs(self, character_id: int) -> tuple[list[PlaythroughView], list[OpeningView]]:
        # In the worker: the character's playthroughs, then its opening drafts.
        return (self.tavern.playthroughs.playthroughs(character_id, include_archived=self.show_archived),
                self.tavern.openings.drafts(character_id))

    def _show_playthroughs(self, character: CharacterView, found: list[PlaythroughView],
                           drafts: list[OpeningView] | None = None) -> None:
        if getattr(self.highlighted_character, "id", None) != character.id:
            return  # the cursor moved on; its own read follows
        listing = self.query_one("#playthroughs", OptionList)
        details = self.query_one("#character-details", Static)
        now = self._now()
        self._playthroughs = {p.id: p for p in found}
        listing.set_options([*(Option(playthrough_prompt(p, now), id=str(p.id)) for p in found),
                             *(Option(draft_summary(d, now), id=f"{DRAFT_PREFIX}{d.id}") for d in drafts or [])])
        if found or drafts:
            listing.highlighted = 0
        else:
            listing.add_option(Option("No playthroughs yet: Enter on the character starts one", disabled=True))
        listing.border_title = Content(f"Playthroughs of {character.name}")  # a str is markup
        details.update(character_details(character))

    @on(OptionList.OptionHighlighted, "#characters")
    def _character_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._cursor_on = event.option.id or ""
        self.refresh_playthroughs()

    @on(OptionList.OptionSelected, "#characters")
    def _character_selected(self, event: OptionList.OptionSelected) -> None:
        group_id = group_id_of(event.option.id)
        if group_id is not None:  # a group: its newest playthrough, else a new one
            self._typed_ahead = self._typed_ahead or []
            self.call(latest_or_new, self.tavern, group_id, title="Cannot open the group", then=self._choose,
                      failed=lambda _: self._stop_typing_ahead())
            return
        character = self._characters.get(int(event.option.id or 0))
        if character is None:
            self._stop_typing_ahead()
            return
        self._typed_ahead = self._typed_ahead or []
        if opened_service(self.tavern) is None:  # the library is still opening: say the Enter was taken
            self.notify(f"Opening {character.name} as soon as the library has loaded…", title="Opening", timeout=4)
        self.call(self._latest, character.id, title="Cannot open the character",
                  then=lambda latest: self._play(character, latest), failed=lambda _: self._stop_typing_ahead())

    def _latest(self, character_id: int) -> PlaythroughView | OpeningView | None:
        # In the worker: the latest playthrough, else the newest draft (Enter does not pile up drafts).
        latest = self.tavern.playthroughs.latest_playthrough(character_id)
        if latest is not None:
            return latest
        drafts = self.tavern.openings.drafts(character_id)
        return drafts[0] if drafts else None

    def _play(self, character: CharacterView, latest: PlaythroughView | OpeningView | None) -> None:
        if latest is None:
            self._start_playthrough(character)
        elif isinstance(latest, OpeningView):
            self._choose_draft(latest.id)
        else:
            self._choose(latest.id)

    @on(OptionList.OptionSelected, "#playthroughs")
    def _playthrough_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option.id:
            self._typed_ahead = self._typed_ahead or []
            if event.option.id.startswith(DRAFT_PREFIX):
                self._choose_draft(int(event.option.id.removeprefix(DRAFT_PREFIX)))
            else:
                self._choose(int(event.option.id))

    def _start_playthrough(self, character: CharacterView) -> None:
        if self._typed_ahead is None:
            self._typed_ahead = []
        # An opening draft (seed 000 §7): no session and no model call until its first send.
        self.call(self.tavern.openings.new_draft, character.id, title="Cannot start a playthrough",
                  then=lambda created: self._choose_draft(created.id), failed=lambda _: self._stop_typing_ahead())

    def _stop_typing_ahead(self) -> None:
        self._typed_ahead = None

    def action_card(self) -> None:
        """ctrl+k: the highlighted character's card screen."""
        character = self.highlighted_character
        if character is None and self.highlighted_group is not None:
            self.notify("A group has no card of its own: highlight one of its members for theirs.")
            return
        if character is None:
            self.notify("Import a character first (press ctrl+o).", severity="warning")
            return
        from tavern_tui.tui.screens.card import CardScreen

        self.app.push_screen(CardScreen(self.tavern, character.id))

    def action_world_books(self) -> None:
        """Open the world-book pane (the library, no playthrough)."""
        self.post_message(WorldBooksRequested())

    def action_persona(self) -> None:
        """Open the persona pane (no playthrough: marks use the default sensitivity ceiling)."""
        from tavern_tui.tui.screens.persona import PersonaScreen
        self.app.push_screen(PersonaScreen(self.tavern))

    def action_refresh(self) -> None:
        """Re-read characters and playthroughs."""
        self.refresh_characters()
