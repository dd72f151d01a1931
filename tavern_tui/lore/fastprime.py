"""Provides `prime_atom_regexes`: `FastIndex.prime`'s bulk verdicts of the ATOM-scope regex keys.

Priming (`prime`, from the app's warm-up when a chat opens): every entry content a recursion
loop may add is cut into units ahead of time, and the ATOM-scope regex keys are decided in
them in bulk (one pass per key over all its candidate units joined; only matches are
recorded, a primed unit holds no other), so a step that first activates an entry neither
scans its content nor searches it.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import TYPE_CHECKING

from tavern_tui.lore.fastregex import open_keys
from tavern_tui.lore.fastunits import Unit, joined
from tavern_tui.lore.regex_plan import ATOM

if TYPE_CHECKING:
    from tavern_tui.lore.fastindex import FastIndex

_PRIME_RELAXED = 50_000  # passes over joined texts this long use the relaxed pattern


def prime_atom_regexes(index: FastIndex, units: dict[str, Unit]) -> None:
    """Decide the ATOM-scope regex keys in `units` in bulk (`prime`). Per key, one pass over
    its undecided candidate units joined by "\\n" (which the key cannot cross) finds the units
    holding a match of its relaxed pattern (a necessary condition), and only those are then
    searched alone; without a relaxed pattern, a unit holding a match of the key itself is
    decided by that. Only the matches are recorded: a primed unit (`Unit.primed`) holds no
    match of a primed ATOM key outside its `rx_true`. A key that times out here is left to
    the steps (`_prime_skipped`)."""
    atom_ids = index._scopes[ATOM]
    everywhere = atom_ids & index._unfiltered  # candidates in every unit
    pending: dict[int, list[tuple[str, Unit]]] = {}
    listed = list(units.items())
    for unit in listed:
        for key_id in (open_keys(index, unit[1]) & atom_ids) - everywhere:
            pending.setdefault(key_id, []).append(unit)
    # Keys without a literal are candidates everywhere: searched in every unit joined once
    # (a unit that has decided such a key already is skipped below).
    shared: tuple[str, list[int]] = ("", [0])
    if everywhere and listed:
        for key_id in everywhere:
            pending[key_id] = listed
        shared = joined(listed)
    timeout = index.regex_timeout
    skipped = set(index._prime_skipped)
    for key_id, chosen in pending.items():
        text, starts = shared if chosen is listed else joined(chosen)
        own = index._regex[key_id].compiled
        # A long text (a key without a literal: every unit) is passed over with the cheaper
        # relaxed pattern; a short one (the units holding the key's literal, which the
        # relaxed pattern mostly matches too) with the key itself.
        pattern = index._quick(key_id, len(text)) or own if len(text) >= _PRIME_RELAXED else own
        try:
            # (finditer's matches do not overlap, but no match spans two units, so every
            # unit holding a match has one that starts in it)
            # (`concurrent`: the GIL is let go during the scan of a long text, so the app's
            # screen keeps answering while its warm-up worker primes)
            flagged = {bisect_right(starts, match.start()) - 1
                       for match in pattern.finditer(text, timeout=timeout, concurrent=True)}
        except TimeoutError:
            skipped.add(key_id)
            continue
        for position in flagged:
            string, info = chosen[position]
            if key_id in info.rx_true or key_id in info.rx_false:
                continue  # decided before
            if pattern is not own:
                try:
                    if own.search(string, timeout=timeout) is None:
                        info.rx_false.add(key_id)
                        continue
                except TimeoutError:
                    skipped.add(key_id)  # (its verdicts so far stay: they are explicit)
                    continue
            info.rx_true.add(key_id)
    index._prime_skipped = frozenset(skipped)
    index._primed_atoms = atom_ids - index._prime_skipped
    for info in units.values():
        info.primed = True
        info.open = None
