"""Provides `per_list`: a value derived from a long list, kept while the same list comes back.

A preview, the gauge and a step read one shared surface list per log version (the service's
surface cache hands out the same object until the log changes), and several assembly steps each
walked all of it on every build (the fit's sendable history, the chat length, the newest summary,
the newest timed state: ~1 ms each on 5,000 messages, `benchmarks/prompt_build`). Those walks are
keyed here by the list's identity and length, one entry per purpose, so the next build with the
same list reuses them. Callers must treat the list as unchanging while they hand it in (the
surface cache's contract) and the value as read-only (return tuples). Pure: no I/O.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["per_list"]

T = TypeVar("T")

_MEMO: dict[str, tuple[Sequence[object], int, object]] = {}
_LOCK = threading.Lock()


def per_list(items: Sequence[object], purpose: str, compute: Callable[[], T]) -> T:
    """`compute()`, or its result from the last call with this `purpose` and this very list
    (same object, same length). One entry per purpose: a different list replaces it."""
    with _LOCK:
        hit = _MEMO.get(purpose)
    if hit is not None and hit[0] is items and hit[1] == len(items):
        return hit[2]  # type: ignore[return-value]
    value = compute()
    with _LOCK:
        _MEMO[purpose] = (items, len(items), value)
    return value
