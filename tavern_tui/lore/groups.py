"""Provides inclusion groups: at most one newly matched entry per group survives a scan loop.

Rule: SillyTavern 1.18 `filterByInclusionGroups`, `filterGroupsByTimedEffects`,
`filterGroupsByScoring` (public/scripts/world-info.js; format-digest §b.5.4), replicated with
their quirks, each pinned by a test:

- Groups are visited in JS object-key order: integer-like names ascending first, then the rest
  in first-seen order.
- A group with a sticky member keeps only its sticky members and skips the rest of the rules;
  members whose cooldown runs are removed (a sticky entry with a cooldown is both, the step
  after it fired).
- Group scoring (global or any member opted in) removes scored members whose score is below the
  group's best. The score counts the entry's raw keys, not macro-expanded or trimmed.
- A group that an already active entry names *exactly* (`entry.group === name`, the whole
  comma list) loses all new members.
- Otherwise `groupOverride` members win by highest `order`, else one weighted random pick
  (`roll ≤ running weight`; roll = rng()/100 × total weight).
- Removing an entry that another group already removed runs JS `splice(indexOf(e) = -1, 1)`,
  which drops the *last* remaining candidate instead. Only entries in several groups trigger it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from tavern_tui.lore.model import DEFAULT_WEIGHT
from tavern_tui.lore.prepare import Prepared

_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class GroupLoss:
    """Why an entry left its group: `winner` is the entry it lost to (None when no single one)."""

    group: str
    winner: Prepared | None
    detail: str


def js_key_order(names: list[str]) -> list[str]:
    """Order object keys as JavaScript does: array-index-like names ascending, then the rest."""
    indexes = [n for n in names if _ARRAY_INDEX.fullmatch(n) and int(n) < 2**32 - 1]
    rest = [n for n in names if n not in set(indexes)]
    return sorted(indexes, key=int) + rest


def filter_by_inclusion_groups(
    new_entries: list[Prepared],
    active_groups: list[str],
    is_sticky: Callable[[Prepared], bool],
    is_cooling: Callable[[Prepared], bool],
    score: Callable[[Prepared], int],
    use_group_scoring: bool,
    roll: Callable[[], float],
) -> dict[int, GroupLoss]:
    """Remove group losers from `new_entries` in place.

    Args:
        new_entries: this loop's matched entries, sticky first then scan order.
        active_groups: the raw `group` strings of entries activated in earlier loops.
        is_sticky: whether the entry's sticky window is running.
        is_cooling: whether its cooldown is running (a sticky entry can be both; SillyTavern then
            removes it from every group it is in).
        score: SillyTavern `getScore` on this loop's buffer.
        use_group_scoring: the global setting.
        roll: the activation's random source, in [0, 100).

    Returns:
        Losses by `Prepared.pos`.
    """
    grouped: dict[str, list[Prepared]] = {}
    for item in new_entries:
        for name in item.group_names:
            grouped.setdefault(name, []).append(item)
    if not grouped:
        return {}
    order = js_key_order(list(grouped))
    removal = _Removal(new_entries)
    has_sticky = _keep_sticky_drop_cooling(grouped, order, is_sticky, is_cooling, removal)
    unsettled = [name for name in order if not has_sticky[name]]
    _drop_low_scores(grouped, unsettled, score, use_group_scoring, removal)
    for name in unsettled:
        group = grouped[name]
        if name in active_groups:
            removal.remove_all_but(name, group, None, f"group '{name}' already has an active entry")
        elif len(group) > 1:
            _pick_winner(name, group, roll, removal)
    return removal.losses


class _Removal:
    """Takes losers out of the loop's entries with SillyTavern's splice quirk, keeping the first
    loss of each entry; shared by the three passes over the groups."""

    def __init__(self, new_entries: list[Prepared]) -> None:
        self.new_entries = new_entries
        self.losses: dict[int, GroupLoss] = {}

    def remove(self, entry: Prepared, loss: GroupLoss) -> None:
        """Remove `entry`, or (already removed) the last candidate, as JS `splice(indexOf(e), 1)`."""
        if entry in self.new_entries:
            self.new_entries.remove(entry)
            self.losses.setdefault(entry.pos, loss)
        elif self.new_entries:  # JS splice(-1, 1): the last candidate goes instead
            victim = self.new_entries.pop()
            self.losses.setdefault(victim.pos, GroupLoss(loss.group, None, (
                f"dropped by SillyTavern's inclusion-group quirk: uid {entry.entry.uid} was removed from "
                f"group '{loss.group}' a second time, which removes the last candidate")))

    def remove_all_but(self, name: str, group: list[Prepared], chosen: Prepared | None, detail: str) -> None:
        """Remove every member of `group` but `chosen` (None = all of them)."""
        for entry in list(group):
            if entry is not chosen:
                self.remove(entry, GroupLoss(name, chosen, detail))


def _keep_sticky_drop_cooling(grouped: dict[str, list[Prepared]], order: list[str],
                              is_sticky: Callable[[Prepared], bool], is_cooling: Callable[[Prepared], bool],
                              removal: _Removal) -> dict[str, bool]:
    """ST `filterGroupsByTimedEffects`: a group with a sticky member keeps only those; cooling
    members go. Returns whether each group had a sticky member (such groups skip the rest)."""
    has_sticky: dict[str, bool] = {}
    for name in order:
        group = grouped[name]
        sticky = [e for e in group if is_sticky(e)]
        has_sticky[name] = bool(sticky)
        if sticky:
            for entry in group:
                if entry not in sticky:
                    removal.remove(entry, GroupLoss(name, sticky[0],
                                                    f"lost group '{name}' to sticky uid {sticky[0].entry.uid}"))
        for entry in [e for e in group if is_cooling(e)]:
            removal.remove(entry, GroupLoss(name, None, f"removed from group '{name}' while cooling down"))
    return has_sticky


def _drop_low_scores(grouped: dict[str, list[Prepared]], names: list[str], score: Callable[[Prepared], int],
                     use_group_scoring: bool, removal: _Removal) -> None:
    """ST `filterGroupsByScoring`: scored members below their group's best score go (also out
    of `grouped`, so the winner pass sees only the rest)."""
    for name in names:
        group = grouped[name]
        if not use_group_scoring and not any(e.entry.use_group_scoring for e in group):
            continue
        scores = [score(e) for e in group]
        best = max(scores)
        i = 0
        while i < len(group):
            entry = group[i]
            scored = use_group_scoring if entry.entry.use_group_scoring is None else entry.entry.use_group_scoring
            if scored and scores[i] < best:
                removal.remove(entry, GroupLoss(name, None, f"lost group '{name}' on score {scores[i]} < best {best}"))
                del group[i]
                del scores[i]
                continue
            i += 1


def _pick_winner(name: str, group: list[Prepared], roll: Callable[[], float], removal: _Removal) -> None:
    """One survivor of a contested group: the highest-order `groupOverride` member, else a
    weighted roll (no winner on the roll keeps every member, as SillyTavern)."""
    prios = sorted((e for e in group if e.entry.group_override), key=lambda e: -e.entry.order)
    if prios:
        winner = prios[0]
        removal.remove_all_but(name, group, winner, f"lost group '{name}' to uid {winner.entry.uid} (priority)")
        return
    weights = [DEFAULT_WEIGHT if e.entry.group_weight is None else e.entry.group_weight for e in group]
    value = roll() / 100 * sum(weights)
    running = 0.0
    for entry, weight in zip(group, weights):
        running += weight
        if value <= running:
            removal.remove_all_but(name, group, entry, f"lost group '{name}' to uid {entry.entry.uid} "
                                   f"(weighted roll {value:.1f} of {sum(weights):g})")
            return
