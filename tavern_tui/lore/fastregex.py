"""Provides `FastIndex`'s regex keys: which of them a unit or text may hold, and their searches.

Functions over a `FastIndex`'s state (its key tables and caches, which they read and update),
called once per asked text or per key, as its methods were.

Regex keys are parsed by `matching.parse_regex_key` as the reference parses them (compiled when
first searched: a key whose literal never occurs is never compiled). From the
translated pattern (parsed with `re._parser`, `regex_plan.analyse_regex`) we derive:
* a required literal, or alternatives one of which every match contains, fed to the automata
  as a prefilter: where none occurs, the regex cannot match and is not run. Under the `i` flag
  only ASCII and Latin-1/Extended-A letters are used (not ß), lower-cased and looked up in the
  lowered text, also after mapping `İ ı ſ` (which `regex` folds onto i, I, s;
  `FOLDS_ONTO_ASCII`) to those letters;
* a scope: a pattern that can consume neither `\\n` nor `\\x01` (lookaround bodies included),
  has no `\\A`/`\\Z` anchor and is not sticky matches the text iff it matches an atom; one
  that avoids only `\\x01` is decided per `\\x01`-piece, one that avoids only `\\n` per line;
  anything else runs on the whole text as in the reference. `\\b` keeps the atom scope.
  Results are cached per unit string (or per whole text). The undecided units of a key are
  searched in one go, joined by a separator its scope cannot cross;
* a relaxed pattern without the `\\b`/`\\B` assertions, a cheap necessary condition
  searched first (`RegexPlan.relaxed`), compiled once the key's own searches have covered
  `RELAX_AFTER` characters (compiling costs about that much). No match of the key starts
  before the leftmost relaxed match, so the key is then searched from there (`pos=`, which
  leaves the text before it in view of lookbehinds: the same search, shorter).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Collection
from functools import partial
from typing import TYPE_CHECKING

from tavern_tui.lore.fastunits import Text, Unit, joined
from tavern_tui.lore.regex_budget import BudgetSpent, bounded
from tavern_tui.lore.regex_plan import (
    ATOM,
    LINE,
    NEWLINE,
    PIECE,
    SEPARATOR,
    TEXT,
    RegexPlan,
)

if TYPE_CHECKING:
    from tavern_tui.lore.fastindex import FastIndex

_UNKNOWN = object()  # the relaxed prefilter timed out


def open_keys(index: FastIndex, info: Unit) -> frozenset[int]:
    """The regex keys still undecided in a unit: its candidates without its verdicts and,
    once primed, without the primed ATOM keys (a primed unit records only their matches)."""
    undecided = info.open
    if undecided is None:
        undecided = candidates(index, info) - info.rx_true - info.rx_false
        if info.primed:
            undecided -= index._primed_atoms
        info.open = undecided
    return undecided


def candidates(index: FastIndex, info: Unit | Text) -> frozenset[int]:
    """Regex keys that may match inside this unit or text: no literal needed, or one is present."""
    if info.candidates is None:
        base = info.base if isinstance(info, Text) else None
        if base is not None:  # the base's, plus what the literals new in the rest bring
            info.candidates = candidates(index, base).union(
                *map(index._lit_regexes.__getitem__, info.lits - base.lits))
        else:
            info.candidates = index._unfiltered.union(*map(index._lit_regexes.__getitem__, info.lits))
    return info.candidates


def regex_hits(index: FastIndex, text: str, info: Text, wanted: Collection[int] | None, matched: set[int],
               timed_out: set[int]) -> None:
    """Add the asked regex keys found in `text` to `matched` (timed out: `timed_out`), and
    keep the verdicts with `info` (`Text.rx_true` / `rx_false`)."""
    asked = index._regex_ids if wanted is None else index._regex_ids & (
        wanted if isinstance(wanted, (set, frozenset)) else set(wanted))
    if not asked:
        return
    # A regex with a required literal cannot match a text without one of its alternatives.
    if len(asked) <= 16:  # e.g. locating one key: check the few asked keys one by one
        requires, lits = index._requires, info.lits
        possible = {k for k in asked if requires[k] is None or not requires[k].isdisjoint(lits)}
    else:
        possible = candidates(index, info) if wanted is None else candidates(index, info) & asked
    if not possible:
        return
    base = info.base
    for scope, separator in ((ATOM, None), (PIECE, SEPARATOR), (LINE, NEWLINE)):
        ids = possible & index._scopes[scope]
        if not ids:
            continue
        if base is not None and scope != PIECE:
            # Atoms and lines of a composed text are the base's and the rest's: a key the
            # base has decided is found there, or can only be in the rest.
            known = ids & base.rx_true
            matched |= known
            undecided = ids - known
            in_rest = (undecided & base.rx_false) | (undecided - candidates(index, base))
            if in_rest:
                unit_hits(index, index._rest_units(text, info, scope), in_rest, matched, timed_out, NEWLINE)
            undecided -= in_rest
            if undecided:  # asked afresh, or timed out for the base: all units
                units = index._atoms_of(info) if scope == ATOM else index._split(text, info, NEWLINE)
                unit_hits(index, units, undecided, matched, timed_out, NEWLINE)
        else:
            units = index._atoms_of(info) if separator is None else index._split(text, info, separator)
            unit_hits(index, units, ids, matched, timed_out, separator or NEWLINE)
        info.rx_true |= ids & matched
        info.rx_false |= ids - matched - timed_out
        info.open = None
    ids = possible & index._scopes[TEXT]
    if ids:
        text_hits(index, text, info, ids, matched, timed_out)


def one_regex(index: FastIndex, text: str, info: Text, key_id: int, plan: RegexPlan) -> bool | None:
    """`_regex_hits` for a single key: found, not found, or None if it timed out."""
    required = index._requires[key_id]
    if required is not None and required.isdisjoint(info.lits):
        return False
    matched: set[int] = set()
    timed_out: set[int] = set()
    if plan.scope == TEXT:
        text_hits(index, text, info, {key_id}, matched, timed_out)
    else:
        separator = None if plan.scope == ATOM else SEPARATOR if plan.scope == PIECE else NEWLINE
        units = index._atoms_of(info) if separator is None else index._split(text, info, separator)
        unit_hits(index, units, {key_id}, matched, timed_out, separator or NEWLINE)
    return True if matched else None if timed_out else False


def unit_hits(index: FastIndex, units: dict[str, Unit], ids: set[int], matched: set[int],
              timed_out: set[int], joiner: str) -> None:
    """Regex keys whose matches lie in one unit: found iff found in some unit.

    Known results first (a key already seen matching an old message needs no search in the
    new one). Then each key is searched once, in its undecided candidate units joined by
    `joiner` (a separator its scope cannot cross, so no match spans two units), with
    `regex_timeout` for that search; the leftmost match tells which units are decided."""
    todo = set(ids)
    for info in units.values():
        if info.rx_true:
            known = todo & info.rx_true
            if known:
                matched |= known
                todo -= known
                if not todo:
                    return
    pending: dict[int, list[tuple[str, Unit]]] = {}
    for unit in units.items():
        info = unit[1]
        # (`todo` holds no key a unit has found: those went above)
        undecided = info.open
        if undecided is None:
            undecided = open_keys(index, info)
        if undecided and not todo.isdisjoint(undecided):
            for key_id in todo & undecided:
                pending.setdefault(key_id, []).append(unit)
    for key_id, chosen in pending.items():
        found = search_units(index, key_id, chosen, joiner)
        if found is None:
            timed_out.add(key_id)
        elif found:
            matched.add(key_id)


def search_units(index: FastIndex, key_id: int, chosen: list[tuple[str, Unit]], joiner: str) -> bool | None:
    """Search a unit-scoped key in the joined units; record what the search decides per
    unit. None if it timed out (nothing recorded past what the prefilter proved)."""
    for _, info in chosen:
        info.open = None  # its verdicts change below
    text, starts = joined(chosen, joiner)
    rx = index._regex[key_id]
    first = pos = 0  # the first unit, and position, the prefilter could not rule out
    quick = index._quick(key_id, len(text))
    if quick is not None:
        try:
            hint = bounded(index.regex_timeout, partial(quick.search, text))
        except BudgetSpent:
            return None
        except TimeoutError:  # the prefilter has a budget of its own: go on without it
            hint = _UNKNOWN
        if hint is None:
            for _, info in chosen:
                info.rx_false.add(key_id)
            return False
        if hint is not _UNKNOWN:
            # The relaxed pattern matches wherever the key does, so no match of the key
            # starts before the leftmost relaxed one. `pos` keeps the text before it in view
            # of lookbehinds (unlike slicing), so this is the whole search, only shorter.
            pos = hint.start()
            first = bisect_right(starts, pos) - 1
    try:
        found = bounded(index.regex_timeout, partial(rx.compiled.search, text, pos))
    except TimeoutError:
        for _, info in chosen[:first]:
            info.rx_false.add(key_id)
        return None
    last = len(chosen) if found is None else bisect_right(starts, found.start()) - 1
    for _, info in chosen[:last]:
        info.rx_false.add(key_id)
    if found is None:
        return False
    chosen[last][1].rx_true.add(key_id)
    return True


def search(index: FastIndex, key_id: int, text: str) -> bool | None:
    """Search one regex key in the whole text as the reference does (match at 0 if sticky);
    None if it timed out. The relaxed pattern goes first with a budget of its own, so it
    never makes a key time out that the reference's search would decide; a match of the
    key cannot start before its leftmost match (see `_search_units`)."""
    rx = index._regex[key_id]
    quick = index._quick(key_id, len(text))
    pos = 0
    if quick is not None:
        try:
            hint = bounded(index.regex_timeout, partial(quick.match if rx.sticky else quick.search, text))
            if hint is None:
                return False
            if not rx.sticky:
                pos = hint.start()
        except BudgetSpent:
            return None
        except TimeoutError:
            pass
    try:
        if rx.sticky:
            return bounded(index.regex_timeout, partial(rx.compiled.match, text)) is not None
        return bounded(index.regex_timeout, partial(rx.compiled.search, text, pos)) is not None
    except TimeoutError:
        return None


def text_hits(index: FastIndex, text: str, info: Text, ids: set[int], matched: set[int],
              timed_out: set[int]) -> None:
    """Regex keys searched in the whole text as the reference does (`info` holds this
    text's finished searches)."""
    for key_id in ids:
        if key_id in info.rx_true:
            matched.add(key_id)
        elif key_id not in info.rx_false:
            result = search(index, key_id, text)
            if result is None:
                timed_out.add(key_id)
                continue
            info.open = None
            if result:
                info.rx_true.add(key_id)
                matched.add(key_id)
            else:
                info.rx_false.add(key_id)
