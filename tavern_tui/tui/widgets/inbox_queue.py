"""Provides `QueueEditor`, the strip above the chat's composer: the playthrough's queued lines (its
durable inbox, numbered in claim order), and editing them in the composer.

↑ on the empty composer edits the last queued item, ↑ again the one before (the composer shows
the item's text; the draft typed so far is held aside); Enter saves the edit, Esc leaves the item
as it was, and either way the composer gets its draft back. With nothing queued, ↑ asks for the
last line sent instead. F9 cancels the item being edited, or else the last one. An empty edit is
refused with a warning (F9 is how an item goes).

The widget keeps its own state and edits the `Composer` it is given; it never calls the
services. What needs the database it posts as Messages (`EditSaved`, `CancelRequested`,
`EditLastSent`) for the chat screen to carry out, which then shows the inbox as re-read (`show`).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.message import Message
from textual.widgets import Static

from tavern_tui.tui.widgets.composer import Composer
from tavern_tui.views import InboxItemView


@dataclass
class QueueMessage(Message):
    """A message the queue strip posts (`QueueEditor`'s); `queue` is the strip."""

    queue: QueueEditor

    @property
    def control(self) -> QueueEditor:
        """The strip (for `@on(..., "#id")`)."""
        return self.queue


class QueueEditor(Static):
    """The queued items above the composer, one line each, numbered in claim order, dimmed and
    marked "queued" or "steer"; the one being edited is highlighted and marked "✎ … editing".
    Hidden when empty.

    State: `items` (as last shown), `editing` (the id of the item in the composer, or None) and
    `held_draft` (the composer's draft, put aside while an item is edited). The screen hands it
    the keys: `edit_previous` (↑), `save_edit` (Enter during an edit), `leave_edit` (Esc) and
    `cancel` (F9).

    Posts `EditSaved` (an edit to store), `CancelRequested` (an item to cancel) and
    `EditLastSent` (↑ with nothing queued: the last line sent is to be edited).

    CSS (`DEFAULT_CSS`): muted text, at most 6 rows (then it scrolls); `-empty` hides it.
    """

    DEFAULT_CSS = """
    QueueEditor {
        height: auto;
        max-height: 6;
        padding: 0 1;
        color: $text-muted;
        &.-empty {
            display: none;
        }
    }
    """

    @dataclass
    class EditSaved(QueueMessage):
        """Enter on an edited item: store `text` (stripped, not empty) as item `item_id`'s text.
        The edit has already ended (the composer holds the draft again)."""

        item_id: str
        text: str

    @dataclass
    class CancelRequested(QueueMessage):
        """F9: cancel queued item `item_id` (the one being edited, whose edit has ended, or the last)."""

        item_id: str

    class EditLastSent(QueueMessage):
        """↑ on the empty composer with nothing queued: edit the last line the person sent."""

    def __init__(self, composer: Composer, *, id: str | None = None) -> None:
        super().__init__("", id=id, markup=False)
        self.composer = composer
        """The composer the queued items are edited in."""
        self.items: list[InboxItemView] = []
        """The queued items as last shown, in claim order."""
        self.editing: str | None = None
        """The id of the queued item the composer is editing, if any."""
        self.held_draft = ""
        """The composer's draft, put aside while a queued item is edited."""
        self._drawn: tuple[tuple[InboxItemView, ...], str | None] = ((), None)  # what the strip shows
        self.add_class("-empty")

    @property
    def draft(self) -> str:
        """The person's draft: the composer's text, or, while an item is edited, the draft held aside."""
        return self.composer.value if self.editing is None else self.held_draft

    def show(self, items: list[InboxItemView]) -> None:
        """Show `items` (claim order, as the inbox holds them now). An edit whose item is gone
        (claimed or canceled meanwhile, here or elsewhere) ends."""
        if self.editing is not None and all(i.id != self.editing for i in items):
            self.leave_edit()
        self.items = list(items)
        self._draw()

    def edit_previous(self) -> None:
        """↑ on the composer: edit the item before the one being edited (at first the last one),
        holding the draft aside; with nothing queued (and no edit), post `EditLastSent`."""
        items = self.items
        if not items:
            if self.editing is None:
                self.post_message(self.EditLastSent(self))
            return
        index = next((n for n, i in enumerate(items) if i.id == self.editing), len(items))
        if index == 0:
            return
        if self.editing is None:
            self.held_draft = self.composer.value
        item = items[index - 1]
        self.editing = item.id
        self.composer.editing_first_line_up = True
        self.composer.value = item.text
        self._draw()

    def leave_edit(self) -> None:
        """Stop editing a queued item (it stays as it was); the composer gets its draft back."""
        self.editing = None
        self.composer.editing_first_line_up = False
        self.composer.value = self.held_draft
        self.held_draft = ""
        self._draw()

    def save_edit(self, text: str) -> None:
        """Enter during an edit: leave it and post `EditSaved` with the item's id and `text`. An
        empty `text` is refused with a warning and the edit goes on."""
        if self.editing is None:
            return
        if not text:
            self.notify("An edit cannot be empty: F9 cancels the item instead.", severity="warning")
            return
        item_id = self.editing
        self.leave_edit()
        self.post_message(self.EditSaved(self, item_id, text))

    def cancel(self) -> None:
        """F9: post `CancelRequested` for the item being edited (leaving the edit), or else the
        last one; nothing when nothing is queued."""
        if not self.items:
            return
        item_id = self.editing or self.items[-1].id
        if self.editing is not None:
            self.leave_edit()
        self.post_message(self.CancelRequested(self, item_id))

    def _draw(self) -> None:
        self.set_class(not self.items, "-empty")
        drawn = (tuple(self.items), self.editing)
        if drawn == self._drawn:  # unchanged (every swipe and step re-reads it): an update lays the screen out
            return
        self._drawn = drawn
        text = Text(no_wrap=True, overflow="ellipsis")
        for n, item in enumerate(self.items):
            if n:
                text.append("\n")
            first, *more = item.text.splitlines() or [""]
            extra = f" (+{len(more)} lines)" if more else ""
            kind = "steer" if item.steer else "queued"
            if item.id == self.editing:  # marked in words too: reverse video alone is easy to miss
                text.append(f"✎ {item.position} · {kind} · editing · {first}{extra}", style="reverse bold")
            else:
                text.append(f"{item.position} · {kind} · {first}{extra}", style="dim")
        self.update(text)
