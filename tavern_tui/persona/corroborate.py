"""Provides `same_belief`: whether two belief keys are the same preference said in other words,
so that the second statement corroborates the first instead of starting a belief of its own.

Rule (issue 24 item 6, normalised containment): two `likes:` (or two `dislikes:`) keys are the
same belief when their values, lower-cased, split into words (apostrophes kept inside a word, so
"cats'" is not "cats") and with the articles a / an / the dropped, are equal, or when the shorter
is the start of the longer and what the longer adds begins with a word that only qualifies
where, when or how (`QUALIFIERS`: "at", "on", "in", "every", "when", …). So "sailing on the lake
at dawn" and "sailing on the lake" corroborate ("at dawn" qualifies), while "cats" and "cats'
enemies" (another thing liked), "cats" and "cats and dogs" (more things) or "sailing" and
"sailing boats" (another noun) stay apart. Every other kind of key (a name, an identity, a
boundary) corroborates only on an equal key. Pure; no threshold is changed by it.
"""

from __future__ import annotations

import re

__all__ = ["QUALIFIERS", "RELATIONS", "same_belief"]

RELATIONS = frozenset({"likes", "dislikes"})
"""Key relations the containment rule applies to (preferences and dislikes)."""

QUALIFIERS = frozenset({
    "at", "on", "in", "during", "before", "after", "when", "whenever", "while", "every", "each", "around",
    "near", "by", "under", "over", "along", "across", "through", "throughout", "with", "without", "early", "late",
    "sometimes", "often", "mostly", "especially", "alone", "together", "outdoors", "indoors", "there", "here",
})
"""Words that open a phrase qualifying the thing liked (place, time, manner, company), not a new thing."""

_ARTICLES = frozenset({"a", "an", "the"})
_WORD = re.compile(r"[\w']+")


def _words(value: str) -> list[str]:
    """Lower-cased words of a key value, articles dropped; "cats'" stays "cats'"."""
    return [w for w in _WORD.findall(value.lower()) if w not in _ARTICLES]


def same_belief(key_a: str, key_b: str) -> bool:
    """True when `key_a` and `key_b` name one belief (module docstring: equal keys, or two
    `likes:`/`dislikes:` values where one is the other plus a qualifying phrase)."""
    if key_a == key_b:
        return True
    relation_a, sep_a, value_a = key_a.partition(":")
    relation_b, sep_b, value_b = key_b.partition(":")
    if not (sep_a and sep_b) or relation_a != relation_b or relation_a not in RELATIONS:
        return False
    words_a, words_b = _words(value_a), _words(value_b)
    if not words_a or not words_b:
        return False
    if words_a == words_b:
        return True
    short, long = (words_a, words_b) if len(words_a) < len(words_b) else (words_b, words_a)
    if long[: len(short)] != short:
        return False
    return long[len(short)] in QUALIFIERS
