"""Provides `build_buckets`: activated content by position, in SillyTavern's order.

Rule: SillyTavern 1.18 `checkWorldInfo` "BUILDING PROMPT" (public/scripts/world-info.js;
format-digest §b.5.8): activated entries sorted by `order` descending (stable) are *prepended*
to their bucket, so every bucket ends in ascending order; outlet entries are *appended*, so an
outlet reads highest order first. Empty content is skipped (SillyTavern checks after its regex
scripts, which run elsewhere); an outlet entry without an outlet name is skipped.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from tavern_tui.lore.model import Position, Role
from tavern_tui.lore.result import ActivatedEntry, Buckets


def build_buckets(activated: Sequence[ActivatedEntry]) -> Buckets:
    """Distribute `activated` (in activation order) into the position buckets."""
    before: list[str] = []
    after: list[str] = []
    an_top: list[str] = []
    an_bottom: list[str] = []
    em_top: list[str] = []
    em_bottom: list[str] = []
    depth_groups: dict[tuple[int, Role], list[str]] = {}
    outlets: dict[str, list[str]] = {}
    # Prepending walking from the highest order down = appending walking up: each prepended
    # bucket is filled by appending and reversed at the end (no O(n) insert per entry).
    # Indexed by the position's value; None for the two positions that are not prepended.
    slots = (before, after, an_top, an_bottom, None, em_top, em_bottom, None)
    # Who is in each bucket, in the same order (attribution); filled and reversed alongside.
    who: dict[str, list[tuple[str, int | str, str, str]]] = {}
    for entry in sorted(activated, key=_ORDER, reverse=True):  # (reverse keeps equal orders in place)
        content = entry.content
        if not content:
            continue
        position = entry.position
        bucket = slots[position]
        if bucket is not None:
            bucket.append(content)
            who.setdefault(_BUCKET_NAMES[position], []).append((entry.book, entry.uid, entry.comment, content))
        elif position == Position.AT_DEPTH:
            role = entry.role if type(entry.role) is Role else Role(entry.role)
            depth_groups.setdefault((entry.depth, role), []).append(content)
            who.setdefault(f"depth:{entry.depth}:{int(role)}", []).append((entry.book, entry.uid, entry.comment,
                                                                            content))
        elif position == Position.OUTLET and entry.outlet_name:
            outlets.setdefault(entry.outlet_name, []).append(content)
    for bucket in (*(b for b in slots if b is not None), *depth_groups.values(), *who.values()):
        bucket.reverse()
    return Buckets(
        before="\n".join(before), after="\n".join(after), an_top=an_top, an_bottom=an_bottom,
        at_depth={key: "\n".join(parts) for key, parts in depth_groups.items()},
        examples_top=em_top, examples_bottom=em_bottom,
        outlets={name: "\n".join(parts) for name, parts in outlets.items()}, entries=who,
    )


assert list(Position) == list(range(8)) and Position.AT_DEPTH == 4 and Position.OUTLET == 7  # `slots`

_ORDER = attrgetter("order")
_BUCKET_NAMES = ("before", "after", "an_top", "an_bottom", "", "examples_top", "examples_bottom", "")
