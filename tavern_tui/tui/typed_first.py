"""Provides `after_typed_keys`: an editor's save, bound to a priority key, waits for the keys
typed before it.

A priority binding is answered by the app as its key arrives; the keys before it were handed to
the focused field's own message queue and may not have been handled yet. The editors' Ctrl+S is
a priority binding (the app's own Ctrl+S opens the settings), so a Ctrl+S pressed right after
typing read the field before the last keys reached it (a trial saved "{{user}} is a" of a whole
persona entry). Textual handles a widget's messages in order, so a callback queued behind those
keys on the focused widget runs once they are in the text.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from textual.screen import Screen

ScreenT = TypeVar("ScreenT", bound=Screen[Any])


def after_typed_keys(action: Callable[[ScreenT], None]) -> Callable[[ScreenT], None]:
    """Wrap a screen's `action_save`: it runs after the focused widget has handled every message
    queued to it so far (the typed keys), or at once when nothing has the focus. The wrapped
    action returns before the save runs; a test or caller waits on what the save does."""

    @functools.wraps(action)
    def run(screen: ScreenT) -> None:
        focused = screen.focused
        if focused is None:
            action(screen)
        else:
            focused.call_later(action, screen)

    return run
