"""Provides `ChatQueue`, the chat screen's side of the inbox strip (`widgets.inbox_queue.QueueEditor`):
reading the inbox and showing it, handing the strip ↑ and F9, and carrying out what it posts: an
edit saved and a queued item canceled become inbox calls (then the inbox is re-read), and ↑ with
nothing queued opens the last line you sent for editing.

The strip owns the editing itself (which item, the draft held aside, the composer's text while
an item is edited); the screen asks it (`queue.editing`, `queue.items`, `queue.draft`).

Mixed into `ChatScreen` (before `TavernScreen`); a `MessagePump`, so its `@on` handlers are
collected. The narrow interface to the chat: `tavern`, `playthrough_id`, `transcript`, `queue`,
`generating`, `call` and `_reload` (`ChatReading`).
"""

from __future__ import annotations

from textual import on
from textual.message_pump import MessagePump

from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.widgets.composer import Composer
from tavern_tui.tui.widgets.inbox_queue import QueueEditor
from tavern_tui.views import InboxItemView


class ChatQueue(MessagePump):
    """Mixed into the chat screen: showing the playthrough's queued lines and storing their edits."""

    def _show_queue(self, items: list[InboxItemView]) -> None:
        had = bool(self.queue.items)
        self.queue.show(items)
        if had != bool(items):
            self.refresh_bindings()  # "Cancel queued" came or went

    def _refresh_queue(self) -> None:
        """Re-read the inbox (in a worker) and show it above the composer."""
        self.call(self.tavern.inbox.pending, self.playthrough_id, title="Cannot read the inbox",
                  then=self._show_queue)

    @on(Composer.EditPrevious, "#prompt")
    def _edit_previous(self, event: Composer.EditPrevious) -> None:
        self.queue.edit_previous()

    def action_cancel_queued(self) -> None:
        """Cancel the queued item being edited, or else the last one; it never reaches the model."""
        self.queue.cancel()

    @on(QueueEditor.EditSaved, "#inbox")
    def _save_queued_edit(self, event: QueueEditor.EditSaved) -> None:
        self.call(self.tavern.inbox.edit, self.playthrough_id, event.item_id, event.text,
                  title="Cannot edit the queued message", severity="warning",
                  then=lambda _: self._refresh_queue(), failed=lambda _: self._refresh_queue())

    @on(QueueEditor.CancelRequested, "#inbox")
    def _cancel_queued(self, event: QueueEditor.CancelRequested) -> None:
        self.call(self.tavern.inbox.cancel, self.playthrough_id, event.item_id,
                  title="Cannot cancel the queued message", severity="warning",
                  then=lambda item: self._cancelled(item), failed=lambda _: self._refresh_queue())

    def _cancelled(self, item: InboxItemView) -> None:
        self.notify(f"Canceled queued message {item.position}.", timeout=3)
        self._refresh_queue()

    @on(QueueEditor.EditLastSent, "#inbox")
    def _edit_last_sent(self, event: QueueEditor.EditLastSent) -> None:
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
