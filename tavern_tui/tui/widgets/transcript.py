"""Provides `Transcript`, the scrolling list of messages that mounts only a window of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tavern_tui.service import MessageView
from tavern_tui.tui.labels import plural
from tavern_tui.tui.widgets.message_box import MessageBox

WINDOW = 20
"""Messages mounted at first, and added per "load earlier": more than a screenful or two of
message widgets only slows opening a chat and every keypress (performance-anchors §2.2;
benchmarks `chat_open`)."""


class Transcript(VerticalScroll):
    """The chat transcript: the last `window` messages, older ones on demand.

    It holds a suffix of the playthrough's messages (the caller need not read a 5,000-message
    chat whole); scrolling to the top (or `load_earlier`) mounts the previous `window` messages
    above, keeping the reading position, and reads further back through `fetch` when the held
    suffix runs out.

    Attributes:
        fetch: `fetch(n)` returns the newest n messages (`tavern.playthroughs.messages(pid, last=n)`);
            it is run in a thread. None when `show` is always given the whole list.

    | child id | part |
    | --- | --- |
    | `#spacer` | takes the height the messages leave free |
    | `#earlier` | the muted "N earlier messages" line at the top |
    """

    DEFAULT_CSS = """
    Transcript {
        padding: 0 1;
        scrollbar-size-vertical: 1;
    }

    Transcript #spacer {
        height: 1fr;
    }

    Transcript #earlier {
        height: 1;
        color: $text-muted;
        text-align: center;
    }
    """

    def __init__(self, *, window: int = WINDOW, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window = window
        self.fetch: Callable[[int], list[MessageView]] | None = None
        self._messages: list[MessageView] = []
        self._offset = 0  # messages older than _messages[0] that are not held
        self._first = 0  # index in _messages of the first mounted message
        self._loading = False

    def compose(self) -> ComposeResult:
        # The spacer takes the height the messages leave free, so a short chat sits just above
        # the prompt (and an anchored scroll never goes negative); it shrinks to nothing once
        # the messages fill the view.
        yield Static("", id="spacer")
        yield Static("", id="earlier", markup=False)

    @property
    def earlier_count(self) -> int:
        """Stored messages older than the first mounted one."""
        return self._offset + self._first

    @property
    def boxes(self) -> list[MessageBox]:
        """The mounted message boxes, oldest first."""
        return list(self.query_children(MessageBox))

    def _update_earlier(self) -> None:
        earlier = self.query_one("#earlier", Static)
        count = self.earlier_count
        earlier.display = count > 0
        earlier.update(f"▲ {plural(count, 'earlier message')} · scroll up or press ctrl+o")

    async def show(self, messages: Sequence[MessageView], total: int | None = None) -> None:
        """Replace the transcript with `messages` (the newest ones; `total` counts them all),
        mounting only the newest window."""
        self._messages = list(messages)
        self._offset = max(0, (total if total is not None else len(self._messages)) - len(self._messages))
        self._first = max(0, len(self._messages) - self.window)
        await self.remove_children(MessageBox)
        await self.mount_all([MessageBox.from_view(m) for m in self._messages[self._first:]])
        self._update_earlier()
        self.anchor()

    async def sync(self, messages: Sequence[MessageView], total: int | None = None) -> bool:
        """Take the stored list (the newest messages; `total` counts them all) after a step,
        swipe or jump; replace only the boxes from the first one that no longer matches.

        Returns:
            True when any box changed.
        """
        boxes = self.boxes
        anchor = boxes[0].view.ref if boxes and boxes[0].view is not None else None
        start = next((i for i, m in enumerate(messages) if m.ref == anchor), None) if anchor else None
        if start is None:
            await self.show(messages, total)
            return True
        tail = messages[start:]
        common = 0
        for box, message in zip(boxes, tail):
            if not _shows(box, message):
                break
            common += 1
        self._messages = list(messages)
        self._first = start
        self._offset = max(0, (total if total is not None else len(messages)) - len(messages))
        self._update_earlier()
        if common == len(boxes) == len(tail):
            return False
        if common == 0 or len(tail) - common > self.window:
            await self.show(messages, total)
            return True
        # Only the end changed (a swipe, a regenerated or continued reply): replace just those
        # boxes; remounting the whole window costs a few hundred ms (benchmarks swipe_repaint).
        stale, fresh = boxes[common:], list(tail[common:])
        # Same count (a swipe): show the new messages in the boxes already there.
        while stale and fresh and await stale[0].show_view(fresh[0]):
            stale.pop(0)
            fresh.pop(0)
        if stale:
            await self.remove_children(stale)
        if fresh:
            await self.mount_all([MessageBox.from_view(m) for m in fresh])
        self.anchor()
        return True

    async def load_earlier(self) -> int:
        """Mount up to `window` older messages above the first one, keeping the reading position.

        Returns:
            How many messages were added.
        """
        if self.earlier_count == 0 or self._loading:
            return 0
        self._loading = True
        try:
            if self._first == 0 and self.fetch is not None:
                held = len(self._messages)
                # the service reads the database: off the event loop
                more = await asyncio.to_thread(self.fetch, held + 4 * self.window)
                added = max(0, len(more) - held)
                self._messages, self._first = more, added
                self._offset = 0 if added < 4 * self.window else max(0, self._offset - added)
            start = max(0, self._first - self.window)
            boxes = [MessageBox.from_view(m) for m in self._messages[start:self._first]]
            reading = self.boxes[0] if self.boxes else None
            self.release_anchor()
            await self.mount_all(boxes, after="#earlier")
            self._first = start
            self._update_earlier()
            if reading is not None:
                self.call_after_refresh(self.scroll_to_widget, reading, animate=False, top=True)
            return len(boxes)
        finally:
            self._loading = False

    async def add(self, box: MessageBox) -> MessageBox:
        """Mount a new box at the end (a sent message or a reply being streamed) and follow it."""
        await self.mount(box)
        self.anchor()
        return box

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if new_value <= 0 < old_value and self.earlier_count > 0:
            self.call_later(self.load_earlier)


def _shows(box: MessageBox, message: MessageView) -> bool:
    """Whether `box` shows `message`. The person's box mounted while sending has no stored view
    yet: it matches the stored message of its role and text, and takes that view (a reply cut
    off before anything was stored, marked partial, never does)."""
    if box.view is None:
        if box.has_class(f"-{message.role}") and not box.has_class("-partial") and box.text == message.content:
            box.view = message
            return True
        return False
    return box.view == message
