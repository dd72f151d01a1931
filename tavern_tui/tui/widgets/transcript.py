"""Provides `Transcript`, the scrolling list of messages that mounts only a window of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tavern_tui.tui.labels import plural
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.views import MessageView

WINDOW = 20
"""Messages mounted at first, and added per page-in: more than a screenful or two of message
widgets only slows opening a chat and every keypress (performance-anchors §2.2; benchmarks
`chat_open`, `transcript_window`)."""

MAX_MOUNTED = 60
"""At most this many message boxes are mounted, whatever the chat's length (issue 22, B5): a
page-in at one end unmounts the boxes furthest away at the other, which page back in when the
reader scrolls there."""


class Transcript(VerticalScroll):
    """The chat transcript: a window of at most `max_mounted` messages, paged in on scroll.

    It holds a suffix of the playthrough's messages (the caller need not read a 5,000-message
    chat whole). Scrolling to the top (or `load_earlier`) mounts the previous `window` messages
    above, reading further back through `fetch` when the held suffix runs out; scrolling to the
    bottom of a window that is not the tail (or `load_later`) mounts the next ones below. Either
    way the boxes furthest from the reader are unmounted past `max_mounted`, and the message
    being read keeps its place on the screen.

    The interface other modules use (a message cursor, the chat screen): `boxes` (the mounted
    boxes, oldest first), `mounted_range` (their indexes among all the playthrough's
    messages), `message_index(box)`, `page_to(index)` (mount the window holding a message and
    return its box), `page_to_ref(refs)` (the same, found by the message's ref),
    `scroll_box_into_view(box)`, `load_earlier`, `load_later`, `at_tail`.

    Attributes:
        fetch: `fetch(n)` returns the newest n messages (`tavern.playthroughs.messages(pid, last=n)`);
            it is run in a thread. None when `show` is always given the whole list.
        member_of: `member_of(message)` is the 0-based place in its group of the member who wrote
            a reply (its speaker colour, `MessageBox.set_member`), None for no member colour; None
            in a one-character chat. Called on the event loop: no I/O.

    | child id | part |
    | --- | --- |
    | `#spacer` | takes the height the messages leave free |
    | `#earlier` | the muted "N earlier messages" line at the top |
    | `#later` | the muted "N later messages" line at the bottom (only while reading back) |
    """

    DEFAULT_CSS = """
    Transcript {
        padding: 0 1;
        scrollbar-size-vertical: 1;
        scrollbar-gutter: stable;
    }

    Transcript #spacer {
        height: 1fr;
    }

    /* One blank row after every message: its body (a stored message's Static, a streaming
       reply's chunks) ends on its last line. */
    Transcript > MessageBox {
        margin-bottom: 1;
    }

    Transcript #earlier, Transcript #later {
        height: 1;
        color: $text-muted;
        text-align: center;
    }
    """

    def __init__(self, *, window: int = WINDOW, max_mounted: int = MAX_MOUNTED, id: str | None = None) -> None:
        super().__init__(id=id)
        self.window = window
        self.max_mounted = max(max_mounted, 2 * window)
        self.fetch: Callable[[int], list[MessageView]] | None = None
        self.member_of: Callable[[MessageView], int | None] | None = None
        self._messages: list[MessageView] = []
        self._offset = 0  # messages older than _messages[0] that are not held
        self._first = 0  # index in _messages of the first mounted message
        self._last = 0  # index in _messages past the last mounted stored message
        self._loading = False
        # A load's own scrolling (mount, unmount, restoring the reading place) must not start
        # another load: set while one runs, cleared after the refresh that restores the place.
        self._settling = False

    def compose(self) -> ComposeResult:
        # The spacer takes the height the messages leave free, so a short chat sits just above
        # the prompt (and an anchored scroll never goes negative); it shrinks to nothing once
        # the messages fill the view.
        yield Static("", id="spacer", markup=False)
        yield Static("", id="earlier", markup=False)
        later = Static("", id="later", markup=False)
        later.display = False
        yield later

    @property
    def earlier_count(self) -> int:
        """Stored messages older than the first mounted one."""
        return self._offset + self._first

    @property
    def later_count(self) -> int:
        """Stored messages newer than the last mounted one (0 unless reading back)."""
        return max(0, len(self._messages) - self._last)

    @property
    def at_tail(self) -> bool:
        """Whether the newest stored message is mounted."""
        return self.later_count == 0

    @property
    def boxes(self) -> list[MessageBox]:
        """The mounted message boxes, oldest first."""
        # Not `query_children(MessageBox)`: a DOM query matches a selector per child, and this is
        # read on every sync, page-in and cursor move.
        return [child for child in self.children if isinstance(child, MessageBox)]

    @property
    def mounted_range(self) -> range:
        """Indexes (0 = the playthrough's first message) of the mounted stored messages."""
        return range(self._offset + self._first, self._offset + self._last)

    def message_index(self, box: MessageBox) -> int | None:
        """The index of `box`'s message among all the playthrough's messages; None for a box
        not (yet) stored, e.g. a reply streaming."""
        if box.view is None:
            return None
        for i in range(self._first, self._last):
            if self._messages[i].ref == box.view.ref:
                return self._offset + i
        return None

    def _offset_for(self, total: int | None) -> int:
        """Messages older than the held list, given the caller's count of them all.

        A read of the newest `4 * window` (what the chat screen asks for, and what `load_earlier`
        adds) that came back shorter holds the whole chat: the offset is 0 whatever `total` says.
        The stored count is not exact (a deleted message or a reply that failed before any text
        is counted differently), and an offset off by one puts every index, hence a search hit's
        cursor, one message off."""
        held = len(self._messages)
        if total is None or self.fetch is None or held < 4 * self.window:
            return 0
        return max(0, total - held)

    def _update_markers(self) -> None:
        count, newer = self.earlier_count, self.later_count
        _set_marker(self.query_one("#earlier", Static), count > 0,
                    f"▲ {plural(count, 'earlier message')} · scroll up or press ctrl+o")
        _set_marker(self.query_one("#later", Static), newer > 0, f"▼ {plural(newer, 'later message')} · scroll down")

    _update_earlier = _update_markers

    def _boxes_for(self, messages: Sequence[MessageView]) -> list[MessageBox]:
        boxes = [MessageBox.from_view(m) for m in messages]
        if self.member_of is not None:
            for box, message in zip(boxes, messages, strict=True):
                box.set_member(self.member_of(message))
        return boxes

    async def show(self, messages: Sequence[MessageView], total: int | None = None) -> None:
        """Replace the transcript with `messages` (the newest ones; `total` counts them all),
        mounting only the newest window."""
        self._messages = list(messages)
        self._offset = self._offset_for(total)
        self._first = max(0, len(self._messages) - self.window)
        self._last = len(self._messages)
        with self.app.batch_update():
            await self.remove_children(MessageBox)
            await self.mount_all(self._boxes_for(self._messages[self._first:]), before="#later")
            self._update_markers()
        self.anchor()

    async def sync(self, messages: Sequence[MessageView], total: int | None = None) -> bool:
        """Take the stored list (the newest messages; `total` counts them all) after a step,
        swipe or jump; replace only the boxes from the first one that no longer matches. While
        reading back (the tail not mounted) it returns to the tail.

        Returns:
            True when any box changed.
        """
        boxes = self.boxes
        anchor = boxes[0].view.ref if boxes and boxes[0].view is not None else None
        start = next((i for i, m in enumerate(messages) if m.ref == anchor), None) if anchor else None
        if start is None or not self.at_tail:
            await self.show(messages, total)
            return True
        tail = messages[start:]
        common = 0
        for box, message in zip(boxes, tail):
            if not _shows(box, message):
                break
            if self.member_of is not None:  # a reply streamed before its speaker was known
                box.set_member(self.member_of(message))
            common += 1
        self._messages = list(messages)
        self._first = start
        self._last = len(self._messages)
        self._offset = self._offset_for(total)
        self._update_markers()
        if common == len(boxes) == len(tail):
            return False
        if common == 0 or len(tail) - common > self.window:
            await self.show(messages, total)
            return True
        # Only the end changed (a swipe, a regenerated or continued reply): replace just those
        # boxes; remounting the whole window costs a few hundred ms (benchmarks swipe_repaint).
        stale, fresh = boxes[common:], list(tail[common:])
        swiped = stale[0] if len(stale) == len(fresh) == 1 else None
        place = self._viewport_offset(swiped)
        # Same count (a swipe): show the new messages in the boxes already there.
        while stale and fresh and await stale[0].show_view(fresh[0]):
            if self.member_of is not None:
                stale[0].set_member(self.member_of(fresh[0]))
            stale.pop(0)
            fresh.pop(0)
        if stale:
            await self.remove_children(stale)
            swiped = None
        if fresh:
            await self.mount_all(self._boxes_for(fresh), before="#later")
        await self._trim_top()
        if swiped is None or place is None:
            self.anchor()
        else:
            self._show_swiped(swiped, max(0, place))
        return True

    def _show_swiped(self, box: MessageBox, offset: int) -> None:
        """After the last message was swiped in `box`: its top stays `offset` rows from the top
        of the view (0 when it was above: the other variant is read from its start), as a
        browser keeps its place in SillyTavern; a variant that fits below that place shows at
        the end of the chat, which follows new text again. A taller or shorter variant is laid
        out first (inside the caller's batch, as a page-in is), so the frame drawn is in place."""
        screen = self.screen
        if box.resized:
            screen._refresh_layout()
        target = box.virtual_region.y - offset
        if target >= self.max_scroll_y:
            self.anchor()
        else:
            self.release_anchor()
            self.scroll_to(y=target, animate=False, immediate=True)
        if box.resized:
            screen._refresh_layout(scroll=True)

    async def _trim_top(self) -> None:
        """Unmount the oldest boxes past `max_mounted` (the reader is at the tail)."""
        boxes = self.boxes
        extra = len(boxes) - self.max_mounted
        if extra > 0:
            await self.remove_children(boxes[:extra])
            self._first = min(self._first + extra, self._last)
            self._update_markers()

    def _viewport_offset(self, box: MessageBox | None) -> int | None:
        """Rows from the top of the view to `box`'s top (None without a box)."""
        if box is None:
            return None
        return box.virtual_region.y - round(self.scroll_y)

    def _keep_place(self, box: MessageBox | None, offset: int | None) -> None:
        """Scroll so `box` is `offset` rows from the top of the view again, called inside the
        page-in's `batch_update` so the screen is painted once, in place.

        Textual's own layout pass (textual is pinned) runs twice here: once for the new boxes'
        heights, then again for the scroll just set. Inside a batch a layout pass queues a paint
        of the map it built; built before the scroll it painted the new batch's top for a frame
        (a trial in tmux saw it on every page-in; the compositor's map showed it headless). After
        the next refresh, boxes that rendered at their width may have moved `box`: the view
        follows by that much, leaving any scroll made since (the page key's own) in place."""
        if box is None or offset is None:
            return
        screen = self.screen
        screen._refresh_layout()
        self.scroll_to(y=max(0, box.virtual_region.y - offset), animate=False, immediate=True)
        screen._refresh_layout(scroll=True)
        placed = box.virtual_region.y

        def follow() -> None:
            moved = box.virtual_region.y - placed if box.is_attached else 0
            if moved:
                self.scroll_to(y=max(0, self.scroll_y + moved), animate=False, immediate=True)

        self.call_after_refresh(follow)

    def _stop_scrolling(self) -> None:
        """End a scroll still under way at its target: a page-in then measures the place the
        reader asked for (the animation would go on in the old coordinates), and a page key
        moves a page on from there."""
        self.app.animator.force_stop_animation(self, "scroll_y")

    async def load_earlier(self) -> int:
        """Mount up to `window` older messages above the first one, keeping the reading position;
        past `max_mounted`, the newest boxes are unmounted (they page back in on scrolling down).

        Returns:
            How many messages were added.
        """
        if self.earlier_count == 0 or self._loading:
            return 0
        self._loading = self._settling = True
        try:
            if self._first == 0 and self.fetch is not None:
                held = len(self._messages)
                # the service reads the database: off the event loop
                more = await asyncio.to_thread(self.fetch, held + 4 * self.window)
                added = max(0, len(more) - held)
                self._messages, self._first, self._last = more, added, self._last + added
                self._offset = 0 if added < 4 * self.window else max(0, self._offset - added)
            start = max(0, self._first - self.window)
            boxes = self._boxes_for(self._messages[start:self._first])
            mounted = self.boxes
            reading = mounted[0] if mounted else None
            self._stop_scrolling()
            offset = self._viewport_offset(reading)
            self.release_anchor()
            with self.app.batch_update():
                await self.mount_all(boxes, after="#earlier")
                self._first = start
                extra = len(mounted) + len(boxes) - self.max_mounted
                stored = [b for b in mounted if b.view is not None]
                if extra > 0 and len(stored) == len(mounted):  # never drop a box not stored yet
                    await self.remove_children(mounted[-extra:])
                    self._last -= extra
                self._update_markers()
                self._keep_place(reading, offset)
            return len(boxes)
        finally:
            self._loading = False
            self.call_after_refresh(self._settled)

    async def load_later(self) -> int:
        """Mount up to `window` newer messages below the last one (after reading back),
        unmounting the oldest past `max_mounted`, keeping the reading position.

        Returns:
            How many messages were added.
        """
        if self.at_tail or self._loading:
            return 0
        self._loading = self._settling = True
        try:
            end = min(len(self._messages), self._last + self.window)
            boxes = self._boxes_for(self._messages[self._last:end])
            mounted = self.boxes
            reading = mounted[-1] if mounted else None
            self._stop_scrolling()
            offset = self._viewport_offset(reading)
            with self.app.batch_update():
                await self.mount_all(boxes, before="#later")
                self._last = end
                extra = len(mounted) + len(boxes) - self.max_mounted
                if extra > 0:
                    await self.remove_children(mounted[:extra])
                    self._first += extra
                self._update_markers()
                self._keep_place(reading, offset)
            if self.at_tail:
                self.call_after_refresh(self.anchor)
            return len(boxes)
        finally:
            self._loading = False
            self.call_after_refresh(self._settled)

    async def page_to(self, index: int) -> MessageBox | None:
        """Mount the window that holds message `index` (0 = the playthrough's first) and return
        its box, paging in earlier or later windows as needed; None when the index is out of
        range."""
        while index < self.mounted_range.start and self.earlier_count > 0:
            if not await self.load_earlier():
                break
        while index >= self.mounted_range.stop and not self.at_tail:
            if not await self.load_later():
                break
        for box in self.boxes:
            if self.message_index(box) == index:
                return box
        return None

    async def page_to_ref(self, refs: Iterable[tuple[int, int]]) -> MessageBox | None:
        """Mount the window that holds the first message whose ref is in `refs` and return its box,
        reading further back through `fetch` until it is held; None when no held message has one.
        Unlike `page_to` it never depends on the stored message count."""
        wanted = set(refs)
        while True:
            held = next((i for i, m in enumerate(self._messages) if m.ref in wanted), None)
            if held is not None:
                return await self.page_to(self._offset + held)
            if self.earlier_count == 0 or not await self.load_earlier():
                return None

    def scroll_box_into_view(self, box: MessageBox, *, top: bool = False) -> None:
        """Scroll so `box` is visible (at the top of the view when `top`), without animation."""
        self.scroll_to_widget(box, animate=False, top=top, immediate=True)

    async def add(self, box: MessageBox) -> MessageBox:
        """Mount a new box at the end (a sent message or a reply being streamed) and follow it;
        while reading back, the transcript first returns to the tail."""
        if not self.at_tail:
            await self.show(self._messages, self._offset + len(self._messages))
        await self.mount(box, before="#later")
        await self._trim_top()
        self.anchor()
        return box

    async def page_up(self) -> None:
        """One page up; within a page of the top, the earlier messages are paged in first (the
        place kept), so the press moves a whole page rather than stopping at the old top. The
        scroll starts now (Textual's page keys start theirs after the next refresh), so a press
        while the last one still scrolls goes on from where that one was going."""
        self._stop_scrolling()
        page = self.scrollable_content_region.height
        if self.scroll_y < page and self.earlier_count > 0:
            await self.load_earlier()
        self.scroll_to(y=self.scroll_y - page, immediate=True)

    async def page_down(self) -> None:
        """One page down; within a page of the bottom while reading back, the later messages are
        paged in first, as `page_up` does."""
        self._stop_scrolling()
        page = self.scrollable_content_region.height
        if self.max_scroll_y - self.scroll_y < page and not self.at_tail:
            await self.load_later()
        self.scroll_to(y=self.scroll_y + page, immediate=True)

    async def action_page_up(self) -> None:
        """PageUp with the transcript focused (the message cursor on): as the chat's page key."""
        await self.page_up()

    async def action_page_down(self) -> None:
        """PageDown with the transcript focused: as the chat's page key."""
        await self.page_down()

    def _settled(self) -> None:
        self._settling = False

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self._loading or self._settling:
            return
        if new_value <= 0 < old_value and self.earlier_count > 0:
            self.call_later(self.load_earlier)
        elif new_value >= self.max_scroll_y > old_value and not self.at_tail:
            self.call_later(self.load_later)


def _set_marker(marker: Static, shown: bool, text: str) -> None:
    """Show or hide a marker line and set its text, touching only what changed: a `Static.update`
    lays the whole screen out again, and a swipe or a step syncs the markers unchanged."""
    if marker.display != shown:
        marker.display = shown
    if marker.content != text:
        marker.update(text)


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
