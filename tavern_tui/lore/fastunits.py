"""Provides the facts `FastIndex` keeps per unit string and per whole text (`Unit`, `Text`).

A scan buffer is cut into units (atoms: cut at every `\\n` and `\\x01`; pieces; lines), and what
holds for a unit string holds wherever it occurs, so these facts are cached by the string
(fastindex.py, "Units and their cache").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

from tavern_tui.lore.regex_plan import NEWLINE

_PLUS_ONE = (1).__add__


@dataclass
class Unit:
    """Facts about one unit string (an atom, a piece or a line), true wherever the string occurs:
    the plain keys found in it by the reference's rules, the prefilter literals present, and the
    regex keys already searched in it."""

    keys: frozenset[int]
    lits: frozenset[int]
    size: int
    candidates: frozenset[int] | None = None  # regex keys worth searching here (lazy)
    rx_true: set[int] = field(default_factory=set)
    rx_false: set[int] = field(default_factory=set)
    open: frozenset[int] | None = None  # undecided candidates (`fastregex.open_keys`; lazy, reset on change)
    primed: bool = False  # every primed ATOM-scope key is decided: matches in rx_true, none elsewhere


@dataclass
class Text:
    """A whole text asked about recently: its atoms, the union of their facts, its pieces and
    lines (lazily, for PIECE/LINE-scope regexes) and the regex keys decided for it as a whole
    (`rx_true` / `rx_false`: found in this very text or not, any scope; never a timeout).

    A text that is a cached one (`base`) + `"\\n"` + more (the next scan loop's buffer: the last
    one plus this loop's recursion text) is `composed`: its atoms and lines are the base's plus
    those of the rest (`split` = where the rest starts), so the base's facts and verdicts carry
    over and only the rest is looked at for keys the base has decided."""

    atoms: dict[str, Unit] | None  # ordered, each distinct atom once (None: not put together yet)
    keys: frozenset[int]
    lits: frozenset[int]
    size: int
    splits: dict[str, dict[str, Unit]] = field(default_factory=dict)
    candidates: frozenset[int] | None = None  # regex keys worth searching in this text (lazy)
    rx_true: set[int] = field(default_factory=set)
    rx_false: set[int] = field(default_factory=set)
    open: frozenset[int] | None = None  # candidates in neither rx_true nor rx_false (lazy; reset on change)
    base: Text | None = None
    split: int = 0
    rest_atoms: dict[str, Unit] | None = None


def joined(chosen: list[tuple[str, Unit]], joiner: str = NEWLINE) -> tuple[str, list[int]]:
    """The unit strings joined by `joiner` (one a unit's scope cannot cross), and where each
    starts (a single unit is its own string, at 0)."""
    if len(chosen) == 1:
        return chosen[0][0], [0]
    strings = [string for string, _ in chosen]
    return joiner.join(strings), list(accumulate(map(_PLUS_ONE, map(len, strings[:-1])), initial=0))
