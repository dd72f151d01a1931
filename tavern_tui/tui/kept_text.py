"""Provides `KeptText`: what a screen's composer holds, written to the database after a quiet
moment and when the screen closes, so going back, another screen or a restart never loses a
typed line (a chat's unsent text, an opening draft's first line).

The writes run in worker threads, numbered: an older write that lands after a newer one never
wins (a quick edit, then Esc). The one still pending when the screen closes is handed to the
app (`TavernApp.write_before_exit`), which waits for it before the process ends, so a composer
cleared just before ctrl+q stays cleared.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

from textual.timer import Timer

KEEP_DELAY = 0.3
"""Seconds of quiet before the composer's text is written to the database."""


def put_back(kept: str, typed: str) -> str:
    """What a composer shows when text kept for it meets what was typed since: the kept text
    first, then the typed on a line of its own; once, when the typed already begins with it
    (text kept twice: as the draft, and by the app for a chat that could not open)."""
    if not kept or typed.startswith(kept):
        return typed
    return f"{kept}\n{typed}" if typed else kept


class KeptText:
    """The pending write of one composer's text.

    Args:
        screen: the screen the composer is on (its `call`, timers and app are used).
        write: stores a text (runs in a thread; "" removes what was kept).
        title: the failure's title ("Cannot keep the draft").
        delay: the quiet moment before a write, in seconds (read at each change; None: `KEEP_DELAY`).
        after: runs in the same thread after a write `save` asked for (not one `close` asked
            for: the screen is going), with the text written.
    """

    def __init__(self, screen: Any, write: Callable[[str], object], title: str,
                 delay: Callable[[], float] | None = None, after: Callable[[str], object] | None = None) -> None:
        self._screen = screen
        self._write = write
        self._after = after
        self._title = title
        self._delay = delay or (lambda: KEEP_DELAY)
        self.timer: Timer | None = None
        """The write waiting for quiet, if any."""
        self._asked = 0  # writes asked for, numbered
        self._kept = 0  # the number of the last one written
        self._lock = threading.Lock()

    def changed(self, text_now: Callable[[], str]) -> None:
        """The text changed: write it after `delay` seconds without another change."""
        if self.timer is not None:
            self.timer.stop()
        self.timer = self._screen.set_timer(self._delay(), lambda: self.save(text_now()))

    def save(self, text: str, **call: Any) -> None:
        """Write `text` now, in a worker (`call`: more of `TavernCalls.call`'s arguments, e.g.
        `then` to leave once it is written); a write waiting for quiet is not needed any more."""
        self.cancel_wait()
        self._screen.call(self._write_then_after, text, self._ask(), title=self._title, group="kept-text", **call)

    def close(self, text: str) -> None:
        """The screen is going away (another screen in its place, the app quitting): when a
        write is still pending (waiting for quiet, or asked for and not written), write `text`
        now, in a thread the app waits for before it ends."""
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.stop()
        elif self._kept >= self._asked:
            return  # what is kept is the composer's text (or another window's newer one)
        number = self._ask()
        app = self._screen.app
        write_before_exit = getattr(app, "write_before_exit", None)
        if write_before_exit is not None:
            write_before_exit(self.write_numbered, text, number, title=self._title)
        else:  # an app that does not wait (a small test app): the write still runs off the loop
            asyncio.ensure_future(asyncio.to_thread(self.write_numbered, text, number))

    def cancel_wait(self) -> None:
        """Forget the write waiting for quiet (the text is written some other way)."""
        if self.timer is not None:
            self.timer.stop()
            self.timer = None

    def _ask(self) -> int:
        self._asked += 1
        return self._asked

    def write_numbered(self, text: str, number: int) -> bool:
        """Write `text` (in a thread) unless a write asked for later came first; whether it wrote."""
        with self._lock:
            if number <= self._kept:
                return False
            self._write(text)
            self._kept = number
            return True

    def _write_then_after(self, text: str, number: int) -> None:
        if self.write_numbered(text, number) and self._after is not None and number == self._asked:
            self._after(text)  # the newest text only: an older write that landed late starts nothing
