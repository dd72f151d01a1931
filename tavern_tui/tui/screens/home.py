"""Provides `HomeScreen`: the imported characters, the highlighted one's playthroughs, import."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from tavern_tui.service import CharacterView, ImportResult, PlaythroughView, Tavern
from tavern_tui.tui.labels import character_summary, draft_summary, relative_time
from tavern_tui.tui.messages import DraftChosen, ImportFinished, PlaythroughChosen, WorldBooksRequested
from tavern_tui.tui.modals.import_screen import (
    CharacterPicker,
    ImportScreen,
    import_results,
    notify_failures,
    notify_warnings,
    summarise,
)
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
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import GroupView, OpeningView, distinct_labels

DRAFT_PREFIX = "d"
"""Option ids of opening drafts in the playthroughs list start with it (playthroughs are bare ids)."""

EMPTY_TEXT = ("No characters yet.\n\n"
              "Import a character card (.png or .json) with `tavern import FILE`,\n"
              "or press ctrl+o here and pick or paste its path.")
"""What the home screen says when nothing is imported."""


class HomeScreen(TavernScreen[None]):
    """Lists characters (Enter: latest playthrough, else its newest opening draft, else a new
    draft) and their playthroughs and drafts (a draft is marked as such, issue 20); then the
    group chats (`home_groups`: Enter opens the newest playthrough of the group, else a new one).

    Posts `PlaythroughChosen` for the app to open; imports run in a thread worker.
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

    def __init__(self, tavern: Tavern, now: Callable[[], datetime]) -> None:
        super().__init__(tavern)
        self._now = now
        self._characters: dict[int, CharacterView] = {}
        self._typed_ahead: list[str] | None = None  # keys typed while a chat is being opened
        self._all: list[CharacterView] = []  # every character; the list shows those matching the filter
        self._groups: list[GroupView] = []  # every group, listed after the characters
        self._playthroughs: dict[int, PlaythroughView] = {}  # the highlighted character's, as listed
        self.filter = ""
        """What was typed on this screen: the characters list shows the names (or tags, creator)
        holding it, case-insensitively; "#word" matches tags only (a tag starting with it)."""
        self.show_archived = False
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
        def read() -> tuple[list[CharacterView], int | None, list[GroupView]]:
            recent = self.tavern.playthroughs.playthroughs(limit=1)
            return self._read_characters(), recent[0].character_id if recent else None, self.tavern.groups.groups()

        self.call(read, title="Cannot read the characters", group="characters",
                  then=lambda found: self._show_characters(*found))
        self.query_one("#characters", OptionList).focus()

    def on_key(self, event: events.Key) -> None:
        """While a chat is being opened (Enter was pressed, its playthrough is read or
        created in a worker), printable keys are kept for its composer instead of reaching
        this screen's keys (n, i, w, p): Enter on a character, then typing at once, loses nothing."""
        if self._typed_ahead is not None and event.is_printable and event.character:
            self._typed_ahead.append(event.character)
            event.stop()
            event.prevent_default()
            return
        # Type-to-search: printable keys (not `?`, the help) filter the characters.
        if event.is_printable and event.character and event.character != "?":
            self._set_filter(self.filter + event.character)
        elif event.key == "backspace" and self.filter:
            self._set_filter(self.filter[:-1])
        else:
            return
        event.stop()
        event.prevent_default()

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

    def _matches(self, character: CharacterView) -> bool:
        needle = self.filter.casefold().strip()
        if not needle:
            return True
        if needle.startswith("#") and len(needle) > 1:  # tags only (SillyTavern filters by tag apart)
            return any(tag.casefold().startswith(needle[1:]) for tag in character.tags)
        return any(needle in text.casefold() for text in (character.name, character.creator or "", *character.tags))

    def _choose(self, playthrough_id: int) -> None:
        typed = "".join(self._typed_ahead or [])
        self._typed_ahead = None
        self.post_message(PlaythroughChosen(playthrough_id, typed))

    def _choose_draft(self, draft_id: int) -> None:
        typed = "".join(self._typed_ahead or [])
        self._typed_ahead = None
        self.post_message(DraftChosen(draft_id, typed))

    def on_screen_resume(self) -> None:
        self._typed_ahead = None
        # Coming back from a chat: message counts and the order of playthroughs changed.
        if self.is_mounted:
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

    def refresh_characters(self, select: int | None = None) -> None:
        """Re-read the characters in a worker, keeping the cursor on the same one.

        Args:
            select: id of a character to put the cursor on instead.
        """
        def read() -> tuple[list[CharacterView], list[GroupView]]:
            return self._read_characters(), self.tavern.groups.groups()

        self.call(read, title="Cannot read the characters", group="characters",
                  then=lambda found: self._show_characters(found[0], select, found[1]))

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
        characters = [c for c in characters if self._matches(c)]
        shown_groups = [g for g in self._groups if group_matches(g, self.filter.casefold().strip())]
        self._characters = {c.id: c for c in characters}
        listing.border_title = Content(f"Characters · {self.filter!r} ({len(characters)}/{len(self._all)}) · Esc clears"
                                if self.filter else "Characters")
        labels = distinct_labels(self._all)  # characters sharing a name show their file and id
        listing.set_options([*(Option(self._character_prompt(c, labels[c.id]), id=str(c.id)) for c in characters),
                             *(Option(group_prompt(g), id=group_option_id(g)) for g in shown_groups)])
        if characters or shown_groups:
            ids = [str(c.id) for c in characters] + [group_option_id(g) for g in shown_groups]
            listing.highlighted = ids.index(current) if current in ids else 0
        self.refresh_playthroughs()

    @staticmethod
    def _character_prompt(character: CharacterView, label: str | None = None) -> Text:
        prompt = Text(label or character.name, style="bold")
        if character.archived:
            prompt.append(" · archived", style="dim italic")
        prompt.append("\n" + character_summary(character), style="dim")
        return prompt

    @staticmethod
    def _playthrough_prompt(playthrough: PlaythroughView, now: datetime) -> Text:
        # The title first (issue 20 item 4: given, else the first line, else the date), then the facts.
        prompt = Text(playthrough.chat_title, style="bold")
        prompt.append("\n" + played_summary(playthrough, now), style="dim")
        names = names_line(playthrough)
        if names:
            prompt.append("\n" + names, style="dim")
        return prompt

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
            listing.set_options(Option(self._playthrough_prompt(p, now), id=str(p.id)) for p in found)
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
        listing.set_options([*(Option(self._playthrough_prompt(p, now), id=str(p.id)) for p in found),
                             *(Option(draft_summary(d, now), id=f"{DRAFT_PREFIX}{d.id}") for d in drafts or [])])
        if found or drafts:
            listing.highlighted = 0
        else:
            listing.add_option(Option("No playthroughs yet: Enter on the character starts one", disabled=True))
        listing.border_title = Content(f"Playthroughs of {character.name}")  # a str is markup
        details.update(self._details(character))

    @staticmethod
    def _details(character: CharacterView) -> str:
        lines = [f"from {character.source_name}"]
        if character.creator:
            lines.append(f"by {character.creator}")
        if character.tags:
            lines.append("tags: " + ", ".join(character.tags))
        description = " ".join(character.description.split())
        if description:
            lines.append("")
            lines.append(description if len(description) <= 400 else description[:399].rstrip() + "…")
        return "\n".join(lines)

    @on(OptionList.OptionHighlighted, "#characters")
    def _character_highlighted(self) -> None:
        self.refresh_playthroughs()

    @on(OptionList.OptionSelected, "#characters")
    def _character_selected(self, event: OptionList.OptionSelected) -> None:
        group_id = group_id_of(event.option.id)
        if group_id is not None:  # a group: its newest playthrough, else a new one
            self._typed_ahead = []
            self.call(latest_or_new, self.tavern, group_id, title="Cannot open the group", then=self._choose,
                      failed=lambda _: self._stop_typing_ahead())
            return
        character = self._characters.get(int(event.option.id or 0))
        if character is None:
            return
        self._typed_ahead = []
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
            self._typed_ahead = []
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

    def action_new_playthrough(self) -> None:
        """Make an opening draft of the highlighted character and open it."""
        character, group = self.highlighted_character, self.highlighted_group
        if group is not None:  # a new chat with the same cast
            self.call(self.tavern.groups.new_playthrough, group.id, title="Cannot start a playthrough",
                      then=lambda created: self._choose(created.id))
            return
        if character is None:
            self.notify("Import a character first (press ctrl+o).", severity="warning")
            return
        self._start_playthrough(character)

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

    @property
    def highlighted_playthrough(self) -> PlaythroughView | None:
        """The playthrough under the playthroughs list's cursor (not a draft), if any."""
        option = self.query_one("#playthroughs", OptionList).highlighted_option
        if option is None or not option.id or option.id.startswith(DRAFT_PREFIX):
            return None
        return self._playthroughs.get(int(option.id))

    def action_rename_playthrough(self) -> None:
        """ctrl+e: ask for the highlighted playthrough's title (empty: back to the default one)."""
        chat = self.highlighted_playthrough
        if chat is None:
            self.notify("Highlight a playthrough first (Tab to the playthroughs list).", severity="warning")
            return
        from tavern_tui.tui.modals.text_prompt import TextPrompt

        def answered(title: str | None) -> None:
            if title is None or title.strip() == chat.chat_title:
                return
            self.call(self.tavern.playthroughs.rename, chat.id, title, title="Cannot rename the playthrough",
                      then=lambda view: self._renamed(view))

        self.app.push_screen(TextPrompt(f"Rename {chat.title}", "New title (empty: its first line, else its date):",
                                        chat.chat_title), answered)

    def _renamed(self, view: PlaythroughView) -> None:
        self.notify(f"#{view.id} is now {view.chat_title!r}.", title="Renamed")
        self.refresh_playthroughs()

    def action_play_as(self) -> None:
        """ctrl+y: choose the name the highlighted playthrough's new lines are written under (an
        imported chat: the persona's or the file's; old lines keep theirs)."""
        chat = self.highlighted_playthrough
        if chat is None:
            self.notify("Highlight a playthrough first (Tab to the playthroughs list).", severity="warning")
            return
        from tavern_tui.tui.modals.choose import ChooseScreen

        def choose(names: tuple[str, str]) -> None:
            default, imported = names
            if not imported or imported == default:
                self.notify(f"#{chat.id} plays as {chat.user_name}; its lines were all written under that name. "
                            "The persona (F8) names you in new playthroughs.", title="Play as")
                return
            labels = [f"{default} · your persona's name (the default)", f"{imported} · the imported chat's name"]
            self.app.push_screen(ChooseScreen(f"New lines of {chat.title} are written as…", labels,
                                              hint="Lines already written keep their name · Enter chooses · Esc "
                                                   "cancels", selected=1 if chat.user_name == imported else 0),
                                 lambda index: picked(index, imported))

        def picked(index: int | None, imported: str) -> None:
            if index is not None:
                self.call(self.tavern.playthroughs.play_as, chat.id, imported if index == 1 else "",
                          title="Cannot change the name", then=self._named)

        self.call(self.tavern.playthroughs.name_choices, chat.id, title="Cannot read the names", then=choose)

    def _named(self, view: PlaythroughView) -> None:
        self.notify(f"#{view.id}: new lines are written as {view.user_name}.", title="Play as")
        self.refresh_playthroughs()

    def action_archive_playthrough(self) -> None:
        """ctrl+a: archive the highlighted playthrough after a yes (hidden, nothing deleted), or
        bring an archived one back."""
        chat = self.highlighted_playthrough
        if chat is None:
            self.notify("Highlight a playthrough first (Tab to the playthroughs list).", severity="warning")
            return
        if chat.archived:
            self.call(self.tavern.playthroughs.archive, chat.id, False, title="Cannot unarchive the playthrough",
                      then=lambda view: self._archived(view))
            return
        from tavern_tui.tui.modals.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self.call(self.tavern.playthroughs.archive, chat.id, True, title="Cannot archive the playthrough",
                          then=lambda view: self._archived(view))

        self.app.push_screen(ConfirmScreen(f"Archive {chat.title} ({chat.chat_title})?\n\nIt leaves the lists; "
                                           "nothing is deleted. ctrl+u shows archived ones, ctrl+a there brings "
                                           "it back.", confirm="Archive"), answered)

    def _archived(self, view: PlaythroughView) -> None:
        self.notify(f"#{view.id} {view.chat_title!r} " + ("archived (ctrl+u shows it)." if view.archived
                                                          else "is back in the lists."), title="Archive")
        self.refresh_playthroughs()

    def action_toggle_archived(self) -> None:
        """ctrl+u: list archived characters and playthroughs too, or hide them again."""
        self.show_archived = not self.show_archived
        self.notify("Archived ones are listed (marked)." if self.show_archived else "Archived ones are hidden.",
                    timeout=2)
        self.refresh_characters()

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

    def action_import_cards(self) -> None:
        """Ask for a path, then import it in a thread worker."""
        def chosen(path: str | None) -> None:
            if path:
                self.notify(f"Importing {path}…", timeout=2)
                self._import(path)

        self.app.push_screen(ImportScreen(), chosen)

    @work(thread=True, group="import", exit_on_error=False, description="import cards")
    def _import(self, path: str, character: str | None = None) -> None:
        # Runs off the UI thread: reads files and writes SQLite, then hands the results back.
        self.post_message(import_results(self.tavern, path, "character", character))

    def on_import_finished(self, message: ImportFinished) -> None:
        """Refresh the lists and say in one line what each file became ("Imported 4 world books,
        1 chat"); failures and warnings in one toast each, in full on ctrl+l. The cursor moves
        only to a character that is new; a chat whose character is missing asks for it."""
        new_characters = [r for r in message.results if r.ok and not r.duplicate and r.kind == "character"]
        self.refresh_characters(select=new_characters[0].id if new_characters else None)
        if message.results:
            line, severity = summarise(message.results)
            self.notify(line, title="Import", severity=severity)  # type: ignore[arg-type]
        notify_failures(self, message.results)
        notify_warnings(self, message.results)
        for result in message.results:
            if result.needs_character:
                self._ask_character(result)
        if not message.results:
            self.notify("No .png, .json or .jsonl files found there.", title="Import", severity="warning")

    def _ask_character(self, result: ImportResult) -> None:
        """Offer the character list for a chat whose character is not in the library, then
        import it again with the one picked (the CLI's `--character`)."""
        characters = [(c.id, c.name) for c in self._all]
        if not characters:
            self.notify(result.error or result.path, title="Import failed", severity="error", timeout=10)
            return

        def picked(character_id: int | None) -> None:
            if character_id is not None:
                self._import(result.path, str(character_id))

        self.app.push_screen(CharacterPicker(result.path, result.error or "", characters), picked)


def played_summary(playthrough: PlaythroughView, now: datetime) -> str:
    """"#3 · 2,000 messages · 1,989 summarised · 5 min ago": what was played (a summary's
    originals counted, not the summary), and how much of it a summary now stands for."""
    played = playthrough.played_count or playthrough.message_count
    parts = [f"#{playthrough.id}", f"{played:,} message{'' if played == 1 else 's'}"]
    if playthrough.summarised_count:
        parts.append(f"{playthrough.summarised_count:,} summarised")
    parts.append(relative_time(playthrough.updated_at, now))
    if playthrough.archived:
        parts.append("archived")
    return " · ".join(parts)


def names_line(playthrough: PlaythroughView) -> str:
    """"you play as Ada (imported lines: User) · ctrl+y" for an imported chat whose own name for
    the person is not the one new lines get; "" otherwise."""
    imported = playthrough.imported_user
    if not imported or imported == playthrough.user_name:
        return ""
    return f"you play as {playthrough.user_name} (imported lines: {imported}) · ctrl+y changes"
