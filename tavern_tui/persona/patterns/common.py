"""Provides what the persona patterns share: the adverb run a statement may carry (`_ADV`, read
back by `_adverbs`), the subject fragments ("I'm", "I've", "please"), and `_make`, which turns a
match into a `Candidate` (a hedged clause becomes a capped hypothesis).

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations".
"""

from __future__ import annotations

import re

from tavern_tui.persona.lexicon import (
    _EMPHATIC_ADVERBS,
    _HEDGE_ADVERBS,
    CATEGORY_SENSITIVITY,
    HEDGED_CONFIDENCE,
    Candidate,
    _Clause,
    _sentence_end,
)

_ADV = (r"(?:(?:really|truly|absolutely|totally|genuinely|definitely|seriously|honestly|just|also|still|actually"
        r"|always|so|personally|kinda|kind\s+of|sort\s+of|sorta|might|may|probably|possibly|maybe|too|even"
        r"|already|deeply|quite|pretty\s+much|secretly|low\s+key|lowkey|unironically)\s+)*+")
_IM = r"(?:i'm|im|i\s+am)\s+"
_SUBJ_HAVE = r"(?:i've|ive|i\s+have)\s+"
_PLEASE = r"(?:please|pls|plz)"


def _adverbs(m: re.Match[str]) -> tuple[bool, bool]:
    """(emphatic, hedged) from the adverbs a match captured in group "adv"."""
    text = (m.group("adv") or "").lower()
    words = set(text.split()) | {p for p in ("kind of", "sort of") if p in text}
    return bool(words & _EMPHATIC_ADVERBS), bool(words & _HEDGE_ADVERBS)


def _make(c: _Clause, statement: str, key: str, slot: str, category: str, confidence: float, *,
          durable: bool = True, hedged: bool = False, quote: str | None = None) -> Candidate:
    hedged = hedged or c.hedged
    kind = "hypothesis" if hedged else "direct"
    if hedged:
        confidence = min(confidence, HEDGED_CONFIDENCE)
    key = " ".join(key.lower().split())
    slot = " ".join(slot.lower().split())
    return Candidate(_sentence_end(statement), key, slot, kind, category, round(confidence, 2),
                     CATEGORY_SENSITIVITY[category], durable and not c.transient, quote or c.quote)
