"""Provides `gc_paused`: the cyclic garbage collector off around work that makes a great many
objects that all stay alive (parsing a stored world book, planning its activation), where every
collection on the way walks them and the whole heap and frees nothing.

Measured on a 5,000-entry book: ~200 of ~400 ms of the parse, ~150 ms of the first activation's
plan. Process-wide, so only around such short work.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_pauses = [0, False]  # [callers inside `gc_paused`, whether the collector was on when the first came in]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off; when the last caller leaves, it is on again
    only if it was on when the first came in (a collector held off at start-up stays off).
    Nested and concurrent callers (another worker thread) share one pause, so one caller's end
    never turns it back on under another's block."""
    with _lock:
        if _pauses[0] == 0:
            _pauses[1] = gc.isenabled()
            gc.disable()
        _pauses[0] += 1
    try:
        yield
    finally:
        with _lock:
            _pauses[0] -= 1
            if _pauses[0] == 0 and _pauses[1]:
                gc.enable()
