"""Provides `per_list`: a value derived from a long list, kept while the same list comes back.

A preview, the gauge and a step read one shared surface list per log version (the service's
surface cache hands out the same object until the log changes), and several assembly steps each
walked all of it on every build (the fit's sendable history, the chat length, the newest summary,
the newest timed state: ~1 ms each on 5,000 messages, `benchmarks/prompt_build`). Those walks are
keyed here by the list's identity and length, one entry per purpose, so the next build with the
same list reuses them. Callers must treat the list as unchanging while they hand it in (the
surface cache's contract) and the value as read-only (return tuples). Pure: no I/O.

`per_prefix` goes further for walks that convert each item on its own: between two steps the
surface list is a new one, but its messages are the same objects with a dozen new ones after
them (the store extends its cached surface, `engine.log.fold_surface` goes on from the last
fold), so only those are converted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from tavern_tui.engine.log import starts_with

__all__ = ["SKIP", "per_list", "per_prefix"]

T = TypeVar("T")

SKIP: Any = object()
"""What a `per_prefix` conversion returns for an item it leaves out."""

_MEMO: dict[str, tuple[Sequence[object], int, object]] = {}
_PREFIX: dict[str, tuple[tuple[object, ...], Hashable, tuple[Any, ...]]] = {}
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


def per_prefix(items: Sequence[Any], purpose: str, convert: Callable[[Any], Any],
               key: Hashable = None) -> tuple[Any, ...]:
    """`tuple(convert(item) for item in items)` without the items converted to `SKIP`. The last
    call with this `purpose` and an equal `key` is reused for as much of `items` as starts with
    that call's items (the same objects, `engine.log.starts_with`): only the rest is converted.
    `convert` must depend on the item and on what `key` names alone (e.g. the names it writes)."""
    with _LOCK:
        hit = _PREFIX.get(purpose)
    if hit is not None and hit[1] == key and starts_with(items, hit[0]):
        done = hit[2]
        tail = tuple(value for value in map(convert, items[len(hit[0]):]) if value is not SKIP)
        result = done + tail if tail else done
    else:
        result = tuple(value for value in map(convert, items) if value is not SKIP)
    with _LOCK:
        _PREFIX[purpose] = (tuple(items), key, result)
    return result
