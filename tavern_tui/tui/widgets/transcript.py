"""Provides `Transcript`, the scrolling list of messages that mounts only a window of them."""

from __future__ import annotations

from collections.abc import Sequence

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

    Scrolling to the top (or `load_earlier`) mounts the previous `window` messages above,
    keeping the reading position.
    """

    def __init__(self, *, window: int = WINDOW, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window = window
        self._messages: list[MessageView] = []
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
        return self._first

    @property
    def boxes(self) -> list[MessageBox]:
        """The mounted message boxes, oldest first."""
        return list(self.query_children(MessageBox))

    def _update_earlier(self) -> None:
        earlier = self.query_one("#earlier", Static)
        earlier.display = self._first > 0
        earlier.update(f"▲ {plural(self._first, 'earlier message')} · scroll up or press ctrl+o")

    async def show(self, messages: Sequence[MessageView]) -> None:
        """Replace the transcript with `messages`, mounting only the newest window."""
        self._messages = list(messages)
        self._first = max(0, len(self._messages) - self.window)
        await self.remove_children(MessageBox)
        await self.mount_all([MessageBox.from_view(m) for m in self._messages[self._first:]])
        self._update_earlier()
        self.anchor()

    async def sync(self, messages: Sequence[MessageView]) -> bool:
        """Take the stored list after a step, swipe or jump; re-show only when the mounted boxes
        no longer show its tail (another count, or another message or text at any position).

        Returns:
            True when the transcript was rebuilt.
        """
        boxes = self.boxes
        tail = messages[self._first:]
        if len(boxes) == len(tail) and all(_shows(box, message) for box, message in zip(boxes, tail)):
            self._messages = list(messages)
            return False
        await self.show(messages)
        return True

    async def load_earlier(self) -> int:
        """Mount up to `window` older messages above the first one, keeping the reading position.

        Returns:
            How many messages were added.
        """
        if self._first == 0 or self._loading:
            return 0
        self._loading = True
        try:
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
        if new_value <= 0 < old_value and self._first > 0:
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
