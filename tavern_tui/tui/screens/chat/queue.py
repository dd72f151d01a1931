"""Provides `QueueEditing`, the chat screen's inbox strip: the lines queued while a reply streams
(shown numbered above the composer), ↑ on the empty composer to edit the last one (↑ again the
one before; Enter saves it, Esc leaves it as it was) or, when nothing is queued, the last line
you sent; F9 cancels the item being edited (or the last one).

Mixed into `ChatScreen` (before `TavernScreen`); a `MessagePump`, so its `@on` handler is
collected. The narrow interface to the chat: `tavern`, `playthrough_id`, `transcript`, `prompt`,
`inbox_strip`, `generating`, `call`, `_reload`, and the state the screen's `__init__` sets:
`_editing` (the id of the queued item the composer is editing) and `_held_draft` (the draft put
aside meanwhile).
"""

from __future__ import annotations

from textual import on
from textual.message_pump import MessagePump

from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.widgets.composer import Composer
from tavern_tui.views import InboxItemView


class QueueEditing(MessagePump):
    """Mixed into the chat screen: showing and editing the playthrough's queued lines."""

    def _show_queue(self, items: list[InboxItemView]) -> None:
        had = bool(self.inbox_strip.items)
        if self._editing is not None and all(i.id != self._editing for i in items):
            self._leave_edit()  # claimed or canceled meanwhile (elsewhere too)
        self.inbox_strip.show(items, self._editing)
        if had != bool(items):
            self.refresh_bindings()  # "Cancel queued" came or went

    def _refresh_queue(self) -> None:
        """Re-read the inbox (in a worker) and show it above the composer."""
        self.call(self.tavern.inbox.pending, self.playthrough_id, title="Cannot read the inbox",
                  then=self._show_queue)

    @on(Composer.EditPrevious, "#prompt")
    def _edit_previous(self, event: Composer.EditPrevious) -> None:
        items = self.inbox_strip.items
        if not items:
            if self._editing is None:
                self._edit_last_sent()
            return
        index = next((n for n, i in enumerate(items) if i.id == self._editing), len(items))
        if index == 0:
            return
        if self._editing is None:
            self._held_draft = self.prompt.value
        item = items[index - 1]
        self._editing = item.id
        self.prompt.editing_first_line_up = True
        self.prompt.value = item.text
        self.inbox_strip.show(items, item.id)

    def _leave_edit(self) -> None:
        """Stop editing a queued item; the composer gets its draft back."""
        self._editing = None
        self.prompt.editing_first_line_up = False
        self.prompt.value = self._held_draft
        self._held_draft = ""
        self.inbox_strip.show(self.inbox_strip.items)

    def _save_queued_edit(self, item_id: str, text: str) -> None:
        if not text:
            self.notify("An edit cannot be empty: F9 cancels the item instead.", severity="warning")
            return
        self._leave_edit()
        self.call(self.tavern.inbox.edit, self.playthrough_id, item_id, text, title="Cannot edit the queued message",
                  severity="warning", then=lambda _: self._refresh_queue(), failed=lambda _: self._refresh_queue())

    def action_cancel_queued(self) -> None:
        """Cancel the queued item being edited, or else the last one; it never reaches the model."""
        items = self.inbox_strip.items
        if not items:
            return
        item_id = self._editing or items[-1].id
        if self._editing is not None:
            self._leave_edit()
        self.call(self.tavern.inbox.cancel, self.playthrough_id, item_id, title="Cannot cancel the queued message",
                  severity="warning", then=lambda item: self._cancelled(item), failed=lambda _: self._refresh_queue())

    def _cancelled(self, item: InboxItemView) -> None:
        self.notify(f"Canceled queued message {item.position}.", timeout=3)
        self._refresh_queue()

    def _edit_last_sent(self) -> None:
        """↑ with nothing queued: edit your last message (the fork-preserving edit the tree
        makes: a surface replacement; the original stays in the log)."""
        if self.generating:
            return
        mine = [b.view for b in self.transcript.boxes if b.view is not None and b.view.role == "user"]
        if not mine:
            return
        last = mine[-1]

        def save(edited: str | None) -> None:
            if edited is not None and edited != last.content:
                self.call(self.tavern.timeline.edit_message, self.playthrough_id, last.ref, edited,
                          title="Cannot edit", then=lambda _: self._reload())

        self.app.push_screen(EditMessageScreen(last.speaker, last.content), save)
