"""Provides `LoreScreen`: the world-book library, a book's entries, bindings, and the tester."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.timer import Timer
from textual.widgets import DataTable, Input, OptionList, Static
from textual.widgets.option_list import Option

from tavern_tui.errors import TavernError
from tavern_tui.lore.model import WorldBook
from tavern_tui.tui.labels import clip, plural
from tavern_tui.tui.lore_labels import binding_labels
from tavern_tui.tui.messages import ImportFinished
from tavern_tui.tui.modals.entry_editor import EntryEditor
from tavern_tui.tui.modals.import_screen import ImportScreen, import_results, notify_warnings
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.widgets.entry_table import EntryTable
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.lore_tester import LoreTester
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.views import PlaythroughView, WorldBookView, distinct_labels

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

EMPTY_TEXT = ("No world books yet.\n\n"
              "Press i and type the path of a world book (.json from SillyTavern, Chub, Agnai, NovelAI\n"
              "or RisuAI) or a folder of them, or run `tavern import FILE`.")
"""What the pane says when the library is empty."""

LIBRARY_TEXT_WIDTH = 26
"""Characters of a book's name or summary line that fit the library pane (after the 2-column mark)."""

FILTER_DEBOUNCE = 0.1
"""Seconds of quiet typing before the entry filter applies."""

CARD_BOOK_NOTE = "The card's own book always applies here"
"""Shown in a chat's pane: the embedded book is part of every step but cannot be bound."""

Opened = tuple[PlaythroughView, int | None, tuple[int, str] | None, str]
"""What the pane reads of the chat it opens from: the playthrough, its card's book entries (None: no
book), its preset (id, name; None: the built-in default) and what it plays (a group's name, else
its character's)."""


class LoreScreen(TavernScreen[None]):
    """World books: the library (left), the highlighted book's entries, and the tester (right).

    Opened from the home screen it knows no playthrough: bindings are global only, and the tester
    runs the highlighted book alone. Opened from a chat it also binds to the character, the
    playthrough and the preset the playthrough uses, marks the books that apply there, and the
    tester previews the next step on the current chat (every effective book, the card's own
    included). Every service call runs in a thread worker (`TavernScreen.call`).
    """

    BINDINGS = [
        Binding("escape", "back", "Back", id="lore.back"),
        Binding("g", "toggle_binding('global')", "Global", id="lore.bind_global"),
        Binding("c", "toggle_binding('character')", "Character", id="lore.bind_character"),
        Binding("p", "toggle_binding('playthrough')", "Playthrough", id="lore.bind_playthrough"),
        Binding("P", "toggle_binding('preset')", "Preset", id="lore.bind_preset"),
        Binding("e", "edit_entry", "Edit", id="lore.edit", show=False),
        Binding("s", "sort_next", "Sort", id="lore.sort"),
        Binding("r", "reverse_sort", "Reverse", id="lore.reverse_sort", show=False),
        Binding("slash", "focus_filter", "Filter", id="lore.filter"),
        Binding("t", "focus_tester", "Test", id="lore.tester"),
        Binding("i", "import_books", "Import", id="lore.import"),
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}

    FOOTER_DROP = ("quit", "sort_next", "toggle_binding('preset')", "toggle_binding('playthrough')",
                   "toggle_binding('character')")
    """The keys the footer hides first on a narrow terminal (80 columns keeps Back, Global, Filter,
    Test and Import; every key stays in the command palette)."""

    books = getters.query_one("#books", OptionList)
    entries = getters.query_one("#entries", EntryTable)
    tester = getters.query_one("#tester", LoreTester)

    def __init__(self, tavern: Tavern, playthrough_id: int | None = None, *, character_id: int | None = None) -> None:
        super().__init__(tavern, playthrough_id)
        self.character_id: int | None = character_id
        """The character in view (the chat's, or the card screen's): its card's own book is listed too."""
        self._start_on_card = character_id is not None and playthrough_id is None  # opened from the card screen
        self.character_name = ""
        self.chat_name = ""
        """What the chat in view plays: a group's name (a group chat), else its character's."""
        self.preset: tuple[int, str] | None = None
        """The (id, name) of the preset the playthrough in view uses; None: the built-in default."""
        self.views: dict[int, WorldBookView] = {}
        self._labels: dict[int, str] = {}
        """The library by book id, as last read."""
        self.book_id: int | None = None
        self.card_id: int | None = None
        """The character whose card's own book is highlighted instead of a library book (issue 20 item 5)."""
        self._card_revision: int | None = None
        self.card_views: dict[int, WorldBookView] = {}
        """The cards' own books by character id, as last read (`WorldInfoService.card_books`)."""
        self.book: WorldBook | None = None
        """The highlighted book (an editable copy from the service)."""
        self._filter_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield ScreenTitle("", id="lore-title", markup=False)
        with Horizontal(id="lore-panes"):
            with Vertical(id="lore-library"):
                books = OptionList(id="books", classes="pane", markup=False)
                books.border_title = "Library"
                yield books
                yield Static("", id="card-book-note", markup=False)
            with Vertical(id="lore-main"):
                yield Input(placeholder="Filter entries by title, keys or content… (/)", id="entry-filter",
                            classes="pane")
                yield EntryTable(id="entries", classes="pane")
                yield Static(EMPTY_TEXT, id="lore-empty", markup=False)
                tester = LoreTester(id="tester", classes="pane")
                tester.border_title = "Tester"
                yield tester
        yield FitFooter(drop=self.FOOTER_DROP)

    def on_mount(self) -> None:
        if self.playthrough_id is None:
            self._opened(None)
            return
        pid = self.playthrough_id

        def read() -> Opened | TavernError:
            try:
                playthrough = self.tavern.playthroughs.playthrough(pid)
                preset_id = playthrough.preset_id  # a preset's books apply while the chat uses it
                preset = None if preset_id is None else (preset_id,
                                                         self.tavern.presets.find_preset(str(preset_id)).name)
                group = self.tavern.groups.group_of(pid)  # a group chat's titles name the group
                return (playthrough, self.tavern.library.character(playthrough.character_id).book_entries, preset,
                        group.name if group is not None else playthrough.character_name)
            except TavernError as exc:  # the pane still opens, on the library alone
                return exc

        self.call(read, title="Cannot open the playthrough", then=self._opened)

    def _opened(self, opened: Opened | TavernError | None) -> None:
        title = "World books · Enter on an entry edits it"
        if isinstance(opened, TavernError):
            self.notify(str(opened), title="Cannot open the playthrough", severity="error")
            self.playthrough_id = None
        elif opened is not None:
            playthrough, card_entries, self.preset, self.chat_name = opened
            self.character_id, self.character_name = playthrough.character_id, playthrough.character_name
            title = f"World books · {self.chat_name} #{playthrough.id} · Enter on an entry edits it"
            self._show_card_book_note(card_entries)
        self.set_class(self.playthrough_id is not None, "-in-chat")
        self.query_one("#lore-title", Static).update(title)
        if self.playthrough_id is not None:
            pid = self.playthrough_id
            self.tester.border_title = Content(f"Tester · the next message in {self.chat_name} #{pid}")
            self.tester.set_runner(lambda text: self.tavern.steps.world_info_preview(pid, text))
        self.refresh_library()
        self.refresh_bindings()
        self.books.focus()

    def _show_card_book_note(self, entries: int | None) -> None:
        note = (f"{self.character_name}'s card has no book of its own." if entries is None
                else f"{CARD_BOOK_NOTE} ({self.character_name}'s, {plural(entries, 'entry', 'entries')}); "
                     "it is not in the library and cannot be unbound.")
        self.query_one("#card-book-note", Static).update(note)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_binding" and parameters and parameters[0] != "global":
            return self.playthrough_id is not None
        return True

    # -- library --------------------------------------------------------------------------

    def refresh_library(self, select: int | None = None, then: Callable[[], object] | None = None) -> None:
        """Re-read the books and their bindings in a worker, keeping (or moving to `select`) the
        highlight; then call `then`."""
        def read() -> tuple[list[WorldBookView], dict[int, str], list[WorldBookView]]:
            views = self.tavern.lore.world_books()
            names = {c.id: c.name for c in self.tavern.library.characters()} if views else {}
            # The card's own book of the character in view only (a chat's, or the card screen's).
            cards = [c for c in self.tavern.lore.card_books() if c.id == self.character_id]
            return views, names, cards

        def loaded(found: tuple[list[WorldBookView], dict[int, str], list[WorldBookView]]) -> None:
            views, names, cards = found
            self.card_views = {c.id: c for c in cards}
            self._show_library(views, names, select=select)
            if then is not None:
                then()

        self.call(read, title="Cannot read the world books", then=loaded)

    def _show_library(self, views: list[WorldBookView], names: dict[int, str], select: int | None) -> None:
        self.views = {v.id: v for v in views}
        self._labels = distinct_labels(views)  # books sharing a name show their file and id
        self.set_class(not views, "-empty")
        current = select if select is not None else self.highlighted_book_id
        applying: list[int] = []
        options = []
        for view in views:
            prompt, applies = self._book_prompt(view, names)
            options.append(Option(prompt, id=str(view.id)))
            if applies:
                applying.append(view.id)
        for card in self.card_views.values():
            options.append(Option(self._card_prompt(card), id=f"c{card.id}"))
        self.books.set_options(options)
        # How many there are, in the frame: at 80 columns the list shows one or two at a time. The
        # card's own book is listed after them but is not the library's (the note says so).
        self.books.border_title = f"Library · {plural(len(views), 'book')}" if views else "Library"
        if current is None and applying:  # opening from a chat: start on a book that applies there
            current = applying[0]
        if not views:
            self.set_class(not self.card_views, "-empty")
            if self.card_views:
                self._start_on_card = False
                self.books.highlighted = 0
                self._sync_book()
            else:
                self._show_book(None)
            return
        if select is None and self._start_on_card and self.card_views:
            self._start_on_card = False
            self.card_id = None
            self.books.highlighted = len(views)
            self._sync_book()
            return
        if select is None and self.card_id in self.card_views:  # stay on the card's book being edited
            self.books.highlighted = len(views) + list(self.card_views).index(self.card_id)
            return
        ids = [v.id for v in views]
        index = ids.index(current) if current in ids else 0
        self.books.highlighted = index
        if ids[index] != self.book_id:
            self._show_book(ids[index])

    def _book_prompt(self, view: WorldBookView, names: dict[int, str]) -> tuple[Content, bool]:
        """The library line of a book, and whether it applies to the playthrough in view."""
        where, applies = binding_labels(view, character_id=self.character_id, playthrough_id=self.playthrough_id,
                                        character_names=names, preset_id=self.preset[0] if self.preset else None)
        # Wrapped here, piece by piece, so continuation lines keep the indent.
        lines = [""]
        for piece in [plural(view.entries, "entry", "entries"), *where]:
            joined = f"{lines[-1]} · {piece}" if lines[-1] else piece
            if lines[-1] and len(joined) > LIBRARY_TEXT_WIDTH:
                lines.append(piece)
            else:
                lines[-1] = joined
        summary = "".join(f"\n  {line}" for line in lines)
        # Styles as strings resolve against the theme at render time ($wi-bound comes from app.tcss's variables).
        prompt = Content.assemble(("● " if applies else "  ", "$wi-bound"),
                                  (clip(self._labels.get(view.id, view.name), LIBRARY_TEXT_WIDTH),
                                   "bold"), (summary, "dim"))
        return prompt, applies

    def _card_prompt(self, card: WorldBookView) -> Content:
        """The library line of a card's own book: "card" and its character, ● where it applies."""
        applies = card.id == self.character_id
        summary = f"\n  {plural(card.entries, 'entry', 'entries')} · card of {clip(card.source_name, 14)}"
        return Content.assemble(("● " if applies else "  ", "$wi-bound"),
                                (clip(card.name, LIBRARY_TEXT_WIDTH), "bold italic"), (summary, "dim"))

    @property
    def highlighted_book_id(self) -> int | None:
        """Id of the library book under the cursor (read now, not from a queued event); None on a card's book."""
        option = self.books.highlighted_option
        return int(option.id) if option is not None and option.id and option.id.isdigit() else None

    @property
    def highlighted_card_id(self) -> int | None:
        """The character whose card's own book is under the cursor, if that is what it is on."""
        option = self.books.highlighted_option
        return int(option.id[1:]) if option is not None and option.id and option.id.startswith("c") else None

    @on(OptionList.OptionHighlighted, "#books")
    def _book_highlighted(self) -> None:
        self._sync_book()

    def _sync_book(self) -> None:
        # Keys typed fast can run an action before the highlight events arrive: follow the cursor.
        book_id = self.highlighted_book_id
        card_id = self.highlighted_card_id
        if card_id is not None:
            if card_id != self.card_id and card_id in self.card_views:
                self._show_card_book(card_id)
        elif book_id != self.book_id and book_id in self.views:
            self._show_book(book_id)

    def _show_book(self, book_id: int | None, *, keep_cursor: bool = False) -> None:
        """Read a book in a worker, then load its entries into the table (and, outside a chat, into
        the tester). Until it lands `book` is None (nothing to edit)."""
        self.book_id, self.book, self.card_id = book_id, None, None
        if book_id is None:
            self._fill_book(None, None, keep_cursor)
            return
        self.call(self.tavern.lore.world_book, book_id, editable=False,  # the editor copies before changing
                  title="Cannot read the book", group="book", exclusive=True,
                  then=lambda book: self._fill_book(book_id, book, keep_cursor),
                  failed=lambda _: self._fill_book(None, None, keep_cursor) if self.book_id == book_id else None)

    def _show_card_book(self, character_id: int, *, keep_cursor: bool = False) -> None:
        """Read a card's own book (a new revision of the card when an entry is saved)."""
        self.book_id, self.book, self.card_id = None, None, character_id

        def loaded(found: tuple[WorldBook, int] | None) -> None:
            if self.card_id != character_id:
                return
            self._card_revision = found[1] if found else None
            self._fill_book(None, found[0] if found else None, keep_cursor, card_id=character_id)

        self.call(self.tavern.lore.card_book, character_id, editable=False, title="Cannot read the card's book",
                  group="book", exclusive=True, then=loaded)

    def _fill_book(self, book_id: int | None, book: WorldBook | None, keep_cursor: bool, *,
                   card_id: int | None = None) -> None:
        if book_id != self.book_id or card_id != self.card_id:
            return  # the cursor moved on; that book's read follows
        self.book = book
        self.entries.show(book.entries if book else [], keep_cursor=keep_cursor)
        self.entries.border_title = Content(f"{book.name} · the card's own book (a save is a new card revision)"
                                     if book and card_id is not None else book.name if book else "")
        if self.playthrough_id is None:
            if book is None:
                self.tester.border_title = "Tester"
                self.tester.set_runner(None, "Import a world book to test it (press i).")
            else:
                self.tester.border_title = Content(f"Tester · {book.name} alone, no chat")
                self.tester.set_runner(lambda text: self.tavern.lore.test_world_info([book], [], text))

    @property
    def selected_view(self) -> WorldBookView | None:
        """The highlighted book as the library lists it."""
        self._sync_book()
        return self.views.get(self.book_id) if self.book_id is not None else None

    # -- entries --------------------------------------------------------------------------

    @on(Input.Changed, "#entry-filter")
    def _filter_changed(self) -> None:
        # Refilling a DataTable costs ~0.3 ms a row: wait for a pause in typing on big books.
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(FILTER_DEBOUNCE, self._apply_filter)

    def _apply_filter(self) -> None:
        self._filter_timer = None
        self.entries.set_filter(self.query_one("#entry-filter", Input).value)

    @on(Input.Submitted, "#entry-filter")
    def _filter_submitted(self) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
            self._apply_filter()
        self.entries.focus()

    @on(DataTable.RowSelected, "#entries")
    def _row_selected(self) -> None:
        self.action_edit_entry()

    def action_edit_entry(self) -> None:
        """Open the editor on the entry under the table's cursor."""
        index = self.entries.selected_index
        if self.book is not None and self.card_id is not None and index is not None:
            self._edit_card_entry(self.card_id, index)
            return
        if self.book is None or self.book_id is None or index is None:
            self.notify("No entry selected.", severity="warning")
            return
        book_id = self.book_id

        def saved(view: WorldBookView | None) -> None:
            if view is None:
                return
            self.notify(f"Saved {view.name}.", title="World book")
            self.refresh_library()
            self._show_book(book_id, keep_cursor=True)
            if self.playthrough_id is not None:
                self.tester.rerun()

        self.app.push_screen(EntryEditor(self.tavern, book_id, self.book, index), saved)

    def _edit_card_entry(self, character_id: int, index: int) -> None:
        assert self.book is not None
        revision = self._card_revision

        def saved(view: WorldBookView | None) -> None:
            if view is None:
                return
            self.notify(f"Saved {view.name}: a new revision of {view.source_name}'s card; chats use it from "
                        "their next step.", title="Card lorebook")
            self.refresh_library()
            self._show_card_book(character_id, keep_cursor=True)
            if self.playthrough_id is not None:
                self.tester.rerun()

        save = lambda book: self.tavern.lore.save_card_book(character_id, book,  # noqa: E731
                                                             expected_revision=revision)
        self.app.push_screen(EntryEditor(self.tavern, character_id, self.book, index, save=save), saved)

    def action_sort_next(self) -> None:
        """Sort the entries by the next column."""
        self.entries.sort_next()

    def action_reverse_sort(self) -> None:
        """Flip the sort direction."""
        self.entries.sort_by(self.entries.sort_column)

    def action_focus_filter(self) -> None:
        """Put the cursor in the entry filter."""
        self.query_one("#entry-filter", Input).focus()

    def action_focus_tester(self) -> None:
        """Put the cursor in the tester's input."""
        self.query_one("#tester-input", Input).focus()

    # -- bindings -------------------------------------------------------------------------

    def action_toggle_binding(self, scope: str) -> None:
        """Bind the highlighted book to `scope` ("global", this "character", "playthrough" or the
        "preset" it uses), or unbind it. The service call runs in a worker."""
        view = self.selected_view
        if view is None and self.card_id is not None:
            self.notify("A card's own book always applies with its character; it cannot be bound.",
                        severity="warning")
            return
        if view is None:
            self.notify("No book selected.", severity="warning")
            return
        if scope == "preset" and self.preset is None and self.playthrough_id is not None:
            self.notify("This chat uses the built-in default preset: choose one on the strategy screen (F6) "
                        "to bind books to it.", severity="warning")
            return
        preset_id, preset_name = self.preset or (None, "")
        target = {"global": None, "character": self.character_id, "playthrough": self.playthrough_id,
                  "preset": preset_id}[scope]
        if scope != "global" and target is None:
            return
        bound = (scope if target is None else f"{scope}:{target}") in view.bindings
        where, reach = {"global": ("globally", "every chat"),
                        "character": (f"to {self.character_name}", f"every chat with {self.character_name}"),
                        "playthrough": ("to this playthrough", f"#{self.playthrough_id} only"),
                        "preset": (f"to the preset {preset_name}", f"every chat that uses {preset_name}")}[scope]
        def changed(_: object) -> None:
            change = f"no longer bound {where}" if bound else f"now bound {where} ({reach})"
            self.notify(f"{view.name} is {change}.", title="World book")
            self.refresh_library()
            if self.playthrough_id is not None:
                self.tester.rerun()

        if bound:
            self.call(self.tavern.lore.unbind_world_book, view.id, scope, target, title="Binding failed", then=changed)
        else:
            self.call(self.tavern.lore.bind_world_book, view.id, scope, target, title="Binding failed", then=changed)

    # -- import ---------------------------------------------------------------------------

    def action_import_books(self) -> None:
        """Ask for a path, then import it in a thread worker."""
        def chosen(path: str | None) -> None:
            if path:
                self.notify(f"Importing {path}…", title="Importing", timeout=2)
                self._import(path)

        self.app.push_screen(ImportScreen("Import world books",
                                          "path to a world book .json, or a folder of them"), chosen)

    @work(thread=True, exclusive=True, group="import", exit_on_error=False, description="import world books")
    def _import(self, path: str) -> None:
        # Runs off the UI thread: reads files and writes SQLite, then hands the results back.
        self.post_message(import_results(self.tavern, path, "world_book"))

    def on_import_finished(self, message: ImportFinished) -> None:
        """Refresh the library on the first new book and say what was imported and what failed."""
        books = [r for r in message.results if r.ok and r.kind == "world_book"]
        new = [r for r in books if not r.duplicate]
        cards = [r for r in message.results if r.ok and r.kind == "character" and not r.duplicate]
        first = (new or books or [None])[0]
        self.refresh_library(select=first.id if first else None)
        if new:
            self.notify(f"Imported {plural(len(new), 'world book')}: {', '.join(r.name or r.path for r in new)}",
                        title="Import")
        if len(books) > len(new):
            names = ", ".join(r.name or r.path for r in books if r.duplicate)
            self.notify(f"Already imported: {names}", title="Import")
        if cards:
            self.notify(f"Also imported {plural(len(cards), 'character')} (see the home screen).", title="Import")
        for result in (r for r in message.results if not r.ok):
            self.notify(result.error or result.path, title="Import failed", severity="error", timeout=10)
        notify_warnings(self, message.results)
        if not message.results:
            self.notify("No .json files found there.", title="Import", severity="warning")

    def action_back(self) -> None:
        """Return to where the pane was opened from."""
        self.dismiss()
