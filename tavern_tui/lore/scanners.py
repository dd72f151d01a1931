"""Provides the plain-key scanners `FastIndex` runs over each new unit of text: `WordKeys` for
whole-word keys made only of JS word characters, `Automaton` (Aho-Corasick) for every other
plain key and for the regex keys' prefilter literals.

Rule: SillyTavern 1.18 `WorldInfoBuffer.matchKeys` (format-digest §b.5.2): a whole-word key
matches as `(?:^|\\W)key(?:$|\\W)` with JavaScript's ASCII `\\W`; other keys as substrings.
"""

from __future__ import annotations

import re
from collections import defaultdict

import ahocorasick_rs

WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")  # JS \w: ASCII only
WORD_RUN = re.compile(r"[A-Za-z0-9_]+")  # maximal runs of JS \w


class WordKeys:
    """Whole-word keys made only of `[A-Za-z0-9_]`, by needle: `one` for a needle owned by one
    key id (nearly all), `many` for the others (ids in a tuple). Kept apart because a set built
    from single ids is ~2.5x quicker than one updated from a tuple per word."""

    def build(self, pairs: list[tuple[str, int]]) -> None:
        """Take the keys as (needle, key id) pairs, in key order."""
        self.one: dict[str, int] = dict(pairs)
        self.many: dict[str, tuple[int, ...]] = {}
        if len(self.one) < len(pairs):  # a needle of several ids (rare): every id, in order
            lists: defaultdict[str, list[int]] = defaultdict(list)
            for needle, key_id in pairs:
                lists[needle].append(key_id)
            self.many = {needle: tuple(ids) for needle, ids in lists.items() if len(ids) > 1}
            for needle in self.many:
                del self.one[needle]

    def __bool__(self) -> bool:
        return bool(self.one or self.many)

    def scan(self, text: str, keys: set[int]) -> None:
        """Add the keys whose needle is a maximal `\\w` run of `text`."""
        runs = set(WORD_RUN.findall(text))
        one = self.one
        keys.update([one[run] for run in runs if run in one])
        if self.many:
            for run in runs & self.many.keys():
                keys.update(self.many[run])


def _by_slot(ids: dict[int, list[int]], slots: int) -> list[tuple[int, ...]]:
    """The ids of each slot as a tuple, by slot (`()` where there are none)."""
    out: list[tuple[int, ...]] = [()] * slots
    for slot, listed in ids.items():
        out[slot] = tuple(listed)
    return out


class Automaton:
    """One ahocorasick_rs automaton and, per needle: key ids matched by any occurrence, key ids
    that need a whole-word occurrence, and prefilter literal ids."""

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}
        # slot -> ids, only for slots that have some (most needles are in one of the three)
        self.any: defaultdict[int, list[int]] = defaultdict(list)
        self.whole: defaultdict[int, list[int]] = defaultdict(list)
        self.lits: defaultdict[int, list[int]] = defaultdict(list)
        self.ac: ahocorasick_rs.AhoCorasick | None = None
        self.has_lits = False

    def add(self, needle: str) -> int:
        """The slot of `needle`, added if new."""
        slot = self.slot.get(needle)
        if slot is None:
            slot = self.slot[needle] = len(self.slot)
        return slot

    def build(self) -> None:
        """Compile the automaton once every needle is added; the ids per slot become tuples
        (`any_t`, `whole_t`, `lits_t`: `()` for a slot without any)."""
        if self.slot:
            # The standard match kind is the only one that reports overlapping matches.
            self.ac = ahocorasick_rs.AhoCorasick(list(self.slot), matchkind=ahocorasick_rs.MatchKind.Standard)
        slots = len(self.slot)
        self.any_t, self.whole_t, self.lits_t = (_by_slot(ids, slots) for ids in (self.any, self.whole, self.lits))
        self.has_lits = bool(self.lits)
        del self.any, self.whole, self.lits

    def scan(self, text: str, keys: set[int], lits: set[int]) -> None:
        """Add the keys (by the reference's whole-word rule) and literals found in `text`."""
        if self.ac is None or not text:
            return
        any_t, whole_t, lits_t = self.any_t, self.whole_t, self.lits_t
        seen: set[int] = set()
        done: set[int] = set()
        size = len(text)
        for slot, start, end in self.ac.find_matches_as_indexes(text, overlapping=True):
            if slot in done:
                continue
            if slot not in seen:
                seen.add(slot)
                keys.update(any_t[slot])
                lits.update(lits_t[slot])
                if not whole_t[slot]:
                    done.add(slot)
                    continue
            # The reference's (?:^|\W)key(?:$|\W), JS \W being every non-[A-Za-z0-9_] character.
            if (start == 0 or text[start - 1] not in WORD_CHARS) and (end == size or text[end] not in WORD_CHARS):
                keys.update(whole_t[slot])
                done.add(slot)

    def scan_literals(self, text: str, lits: set[int]) -> None:
        """Add only the literals found in `text`."""
        if self.ac is not None and self.has_lits and text:
            lits_t = self.lits_t
            for slot in {slot for slot, _, _ in self.ac.find_matches_as_indexes(text, overlapping=True)}:
                lits.update(lits_t[slot])
