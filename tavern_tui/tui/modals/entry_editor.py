"""Provides `EntryEditor`, the modal that edits one world-info entry and saves its book."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Checkbox, Input, Label, Select, TextArea

from tavern_tui.lore.model import Position, WorldBook, WorldInfoEntry
from tavern_tui.tui.lore_labels import POSITION_NAMES
from tavern_tui.tui.screens.base import TavernCalls
from tavern_tui.tui.typed_first import after_typed_keys
from tavern_tui.tui.widgets.save_cancel import SaveCancelModal, refusal_text
from tavern_tui.views import WorldBookView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern


def split_keys(text: str) -> list[str]:
    """"a, b ,,c" → ["a", "b", "c"]."""
    return [key.strip() for key in text.split(",") if key.strip()]


def _number(value: str, field: str, *, integer: bool) -> int | float:
    try:
        return int(value) if integer else float(value)
    except ValueError:
        raise ValueError(f"{field} must be a {'whole number' if integer else 'number'}, not {value!r}") from None


class EntryEditor(TavernCalls, SaveCancelModal[WorldBookView | None]):
    """Edits entry `index` of a book; Save stores the whole book through the service.

    Save / Cancel behave as in the other editors (`SaveCancelModal`): when the form or the
    service refuses the book (a `FormatError`, e.g. two entries with one uid), the error is
    shown and the editor stays open with the edits; Cancel (Esc) discards them, and does
    nothing while a save runs. Dismisses with the saved book's view, or None.

    Its frame is `SaveCancelModal`'s; its `DEFAULT_CSS` sets the widths. The box is never wider
    than the screen: at 80x24 it fills it, the form scrolls (Tab scrolls to the focused field)
    and the error line and Save / Cancel stay at the foot. Below 100 columns (`-narrow`) there is
    less room around the fields, so the Order row (Order, Probability, Constant, Disabled) fits
    80 columns whole. The Depth field shows only for @depth entries (`-at-depth`).

    | id / class | part |
    | --- | --- |
    | `editor-box` | the box (100 wide at most) |
    | `editor-row` | a row of fields, one line high |
    | `editor-label` | a field's label, 12 wide (`-inner`: one after a field, in the same row) |
    | `-short` | a number field, 10 wide (the other inputs take the row's rest) |
    | `position` | the position select (40 wide at most) |
    | `depth-label`, `depth` | the Depth label and field |
    | `content` | the content text area, 10 lines |
    """

    DEFAULT_CSS = """
    EntryEditor #editor-box {
        width: 100;
        max-width: 100%;
    }

    EntryEditor.-narrow #editor-box {
        padding: 1 1;
    }

    EntryEditor.-narrow Checkbox {
        margin-left: 1;
    }

    EntryEditor .editor-row {
        height: 1;
        margin-bottom: 1;
    }

    EntryEditor .editor-label {
        width: 12;
    }

    EntryEditor .editor-label.-inner {
        margin-left: 2;
    }

    EntryEditor Input {
        width: 1fr;
    }

    EntryEditor Input.-short {
        width: 10;
    }

    EntryEditor #position {
        width: 1fr;
        max-width: 40;
    }

    EntryEditor Checkbox {
        margin-left: 2;
    }

    EntryEditor #depth-label, EntryEditor #depth { display: none; }
    EntryEditor.-at-depth #depth-label, EntryEditor.-at-depth #depth { display: block; }

    EntryEditor #content {
        height: 10;
        margin-bottom: 1;
    }
    """

    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-narrow"), (100, "-wide")]
    """`-narrow` below 100 columns, where the box (100 wide) shrinks to the screen (`DEFAULT_CSS`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="entry.cancel"),
        Binding("ctrl+s", "save", "Save", id="entry.save", priority=True),
    ]

    def __init__(self, tavern: Tavern, book_id: int, book: WorldBook, index: int, *,
                 save: Callable[[WorldBook], WorldBookView] | None = None) -> None:
        super().__init__()
        self.tavern = tavern
        self.book_id = book_id
        self._save = save or (lambda edited: tavern.lore.save_world_book(book_id, edited))
        """Stores the edited book (in a worker): a library book by default; a card's own book
        passes `WorldInfoService.save_card_book` (a new revision of the card)."""
        self.book = book
        self.index = index
        self.entry: WorldInfoEntry = book.entries[index]

    def compose(self) -> ComposeResult:
        entry = self.entry
        positions = [(f"{int(p)} · {short} ({long})", int(p)) for p, (short, long) in POSITION_NAMES.items()]
        # The form scrolls inside the box, whose height and width never exceed the screen's
        # (80x24 included); the error line and Save / Cancel stay docked at its foot.
        with Vertical(id="editor-box", classes="modal-box") as box:
            box.border_title = Content(f"{self.book.name} · entry {entry.uid}")  # a str is markup
            with VerticalScroll(id="editor-form", can_focus=False, classes="modal-form"):
                with Horizontal(classes="editor-row"):
                    yield Label("UID", classes="editor-label", markup=False)
                    yield Input(str(entry.uid), id="uid", type="integer" if isinstance(entry.uid, int) else "text",
                                compact=True, classes="-short")
                    yield Label("Title", classes="editor-label -inner", markup=False)
                    yield Input(entry.comment, id="title", compact=True)
                with Horizontal(classes="editor-row"):
                    yield Label("Keys", classes="editor-label", markup=False)
                    yield Input(", ".join(entry.key), id="keys", placeholder="comma-separated", compact=True)
                with Horizontal(classes="editor-row"):
                    yield Label("Secondary", classes="editor-label", markup=False)
                    yield Input(", ".join(entry.keysecondary), id="keysecondary", placeholder="comma-separated",
                                compact=True)
                yield Label("Content", classes="editor-label", markup=False)
                yield TextArea(entry.content, id="content", soft_wrap=True)
                with Horizontal(classes="editor-row"):
                    yield Label("Position", classes="editor-label", markup=False)
                    yield Select(positions, value=int(entry.position), allow_blank=False, id="position",
                                 compact=True)
                    yield Label("Depth", classes="editor-label -inner", id="depth-label", markup=False)
                    yield Input(str(entry.depth), id="depth", type="integer", compact=True, classes="-short")
                with Horizontal(classes="editor-row"):
                    yield Label("Order", classes="editor-label", markup=False)
                    yield Input(str(entry.order), id="order", type="integer", compact=True, classes="-short")
                    yield Label("Probability", classes="editor-label -inner", markup=False)
                    yield Input(f"{entry.probability:g}", id="probability", type="number", compact=True,
                                classes="-short")
                    yield Checkbox("Constant", entry.constant, id="constant", compact=True)
                    yield Checkbox("Disabled", entry.disable, id="disable", compact=True)
            with Vertical(id="editor-foot", classes="modal-foot"):
                yield from self.compose_save_cancel()

    def on_mount(self) -> None:
        self._show_depth(self.entry.position)
        self.query_one("#keys", Input).focus()

    def _show_depth(self, position: Position) -> None:
        # Depth only means something for @depth entries; the field is hidden otherwise.
        self.set_class(position is Position.AT_DEPTH, "-at-depth")

    @on(Select.Changed, "#position")
    def _position_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, int):
            self._show_depth(Position(event.value))

    def edited_entry(self) -> WorldInfoEntry:
        """The entry as the form now says.

        Raises:
            ValueError: a number field does not hold a number (the message names the field).
        """
        entry = self.entry
        uid_text = self._text("#uid")
        uid: int | str = _number(uid_text, "UID", integer=True) if isinstance(entry.uid, int) else uid_text
        if uid == "":
            raise ValueError("UID must not be empty")
        probability = _number(self._text("#probability") or "100", "Probability", integer=False)
        if not 0 <= probability <= 100:
            raise ValueError(f"Probability must be between 0 and 100, not {probability:g}")
        # Keys are re-split only when their text changed: a regex key may itself hold a comma.
        keys_text, secondary_text = self._text("#keys"), self._text("#keysecondary")
        position = self.query_one("#position", Select).value
        return dataclasses.replace(
            entry,
            uid=uid,
            comment=self.query_one("#title", Input).value,
            key=list(entry.key) if keys_text == ", ".join(entry.key) else split_keys(keys_text),
            keysecondary=(list(entry.keysecondary) if secondary_text == ", ".join(entry.keysecondary)
                          else split_keys(secondary_text)),
            content=self.query_one("#content", TextArea).text,
            constant=self.query_one("#constant", Checkbox).value,
            disable=self.query_one("#disable", Checkbox).value,
            position=Position(position) if isinstance(position, int) else entry.position,
            order=int(_number(self._text("#order") or "0", "Order", integer=True)),
            probability=probability,
            depth=int(_number(self._text("#depth") or "0", "Depth", integer=True)),
        )

    def _text(self, selector: str) -> str:
        return self.query_one(selector, Input).value.strip()

    @after_typed_keys
    def action_save(self) -> None:
        """Store the book with this entry replaced (in a worker); on failure say why and stay open."""
        if not self.begin_save():
            return
        try:
            edited = self.edited_entry()
        except ValueError as exc:
            self.save_refused(str(exc))
            return
        book = copy.deepcopy(self.book)
        book.entries[self.index] = edited

        def save() -> WorldBookView | Exception:
            try:
                return self._save(book)
            except Exception as exc:  # a refusal stays on screen; anything else must not leave the editor stuck
                return exc

        self.call(save, title="Cannot save the world book", then=self._saved)

    def _saved(self, result: WorldBookView | Exception) -> None:
        if isinstance(result, Exception):
            self.save_refused(f"Not saved: {refusal_text(result)}")
        else:
            self.save_done(result)
