"""Provides `QueueControl`, the chat's side of the inbox strip (`widgets.inbox_queue.QueueEditor`):
reading the inbox and showing it, and carrying out what the strip posts: an edit saved and a
queued item canceled become inbox calls (then the inbox is re-read), and ↑ with nothing queued
opens the last line you sent for editing.

The strip owns the editing itself (which item, the draft held aside, the composer's text while
an item is edited); the chat asks it (`queue.editing`, `queue.items`, `queue.draft`). The chat
screen holds one `QueueControl` (`ChatScreen.inbox`) and hands it the strip's Messages; the
control reaches the chat only through `ChatHost`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tavern_tui.tui.modals.edit_message import EditMessageScreen

if TYPE_CHECKING:
    from tavern_tui.tui.screens.chat.host import ChatHost
    from tavern_tui.views import InboxItemView


class QueueControl:
    """The playthrough's queued lines: shown above the composer, their edits and cancels stored.

    Args:
        chat: the chat screen (`ChatHost`); its strip is `chat.queue`.
    """

    def __init__(self, chat: ChatHost) -> None:
        self.chat = chat
        self._shown = 0  # how many times the strip was shown: a read begun before a show is stale

    def show(self, items: list[InboxItemView]) -> None:
        """Show `items` (claim order) in the strip; the footer's "Cancel queued" follows."""
        self._shown += 1
        queue = self.chat.queue
        had = bool(queue.items)
        queue.show(items)
        if had != bool(items):
            self.chat.refresh_bindings()  # "Cancel queued" came or went

    def refresh(self) -> None:
        """Re-read the inbox (in a worker) and show it above the composer."""
        chat = self.chat
        chat.call(chat.tavern.inbox.pending, chat.playthrough_id, title="Cannot read the inbox", then=self.show)

    def follow(self) -> None:
        """Re-read the inbox (in a worker) for lines queued elsewhere; shown only when they differ
        and nothing was shown here meanwhile (a line queued here since is not taken away)."""
        chat, began = self.chat, self._shown

        def followed(items: list[InboxItemView]) -> None:
            now = [(i.id, i.text) for i in items]
            if self._shown == began and now != [(i.id, i.text) for i in chat.queue.items]:
                self.show(items)

        chat.call(chat.tavern.inbox.pending, chat.playthrough_id, title="Cannot read the inbox",
                  group="follow-inbox", exclusive=True, then=followed)

    def save_edit(self, item_id: str, text: str) -> None:
        """Store `text` as queued item `item_id`'s (the strip's `EditSaved`), then re-read the inbox."""
        chat = self.chat
        chat.call(chat.tavern.inbox.edit, chat.playthrough_id, item_id, text,
                  title="Cannot edit the queued message", severity="warning",
                  then=lambda _: self.refresh(), failed=lambda _: self.refresh())

    def cancel(self, item_id: str) -> None:
        """Cancel queued item `item_id` (the strip's `CancelRequested`); it never reaches the model."""
        chat = self.chat
        chat.call(chat.tavern.inbox.cancel, chat.playthrough_id, item_id,
                  title="Cannot cancel the queued message", severity="warning",
                  then=self._cancelled, failed=lambda _: self.refresh())

    def _cancelled(self, item: InboxItemView) -> None:
        self.chat.notify(f"Canceled queued message {item.position}.", timeout=3)
        self.refresh()

    def edit_last_sent(self) -> None:
        """↑ with nothing queued (the strip's `EditLastSent`): edit your last message (the
        fork-preserving edit the tree makes: a surface replacement; the original stays in the
        log). Nothing while a reply streams or before you said anything."""
        chat = self.chat
        if chat.generating:
            return
        mine = [b.view for b in chat.transcript.boxes if b.view is not None and b.view.role == "user"]
        if not mine:
            return
        last = mine[-1]

        def save(edited: str | None) -> None:
            if edited is not None and edited != last.content:
                chat.call(chat.tavern.timeline.edit_message, chat.playthrough_id, last.ref, edited,
                          title="Cannot edit", then=lambda _: chat.reload())

        chat.app.push_screen(EditMessageScreen(last.speaker, last.content), save)
