"""Provides the nomination rules: which beliefs may be offered for the persona.

Rules: seed 002 (ADR-0079) decision 6 and issue 7 §5. Only active, direct, durable beliefs with
confidence at or above a threshold, corroborated by at least two separate messages, within the
sensitivity bound, outside the never-nominate categories, not declined before (by canonical
key), not already promoted, and passing the injection and secret scans are nominated; at most
`max_outstanding` are outstanding at once. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tavern_tui.persona.model import Belief, within

NEVER_NOMINATE = frozenset({"health", "sexuality", "religion", "politics", "credentials", "location", "finances"})
"""Categories never offered for the persona, whatever the confidence (ADR-0079 decision 6)."""


@dataclass(frozen=True, slots=True)
class NominationRules:
    """Thresholds of the nomination gate.

    Attributes:
        min_confidence: 0..1, inclusive.
        min_corroborations: separate supporting messages needed.
        max_sensitivity: the most sensitive level still nominated ("low" | "normal" | "high").
        max_outstanding: the bound on outstanding nominations.
    """

    min_confidence: float = 0.7
    min_corroborations: int = 2
    max_sensitivity: str = "normal"
    max_outstanding: int = 10


def blockers(belief: Belief, rules: NominationRules, declined: set[str]) -> list[str]:
    """Every reason `belief` may not be nominated ([] = eligible), in a fixed order."""
    from tavern_tui.persona.safety import find_injections, find_secrets
    reasons = []
    if belief.status != "active":
        reasons.append("superseded")
    if belief.kind != "direct":
        reasons.append("a hypothesis, not a direct statement")
    if not belief.durable:
        reasons.append("not durable")
    if belief.confidence < rules.min_confidence:
        reasons.append(f"confidence {belief.confidence:.2f} below {rules.min_confidence:.2f}")
    if belief.corroborations < rules.min_corroborations:
        reasons.append(f"said in {belief.corroborations} message(s), needs {rules.min_corroborations}")
    if not within(belief.sensitivity, rules.max_sensitivity):
        reasons.append(f"sensitivity {belief.sensitivity} above {rules.max_sensitivity}")
    if belief.category in NEVER_NOMINATE:
        reasons.append(f"category {belief.category} is never nominated")
    if belief.key in declined or belief.declined:
        reasons.append("declined before")
    if belief.promoted:
        reasons.append("already in the persona")
    texts = [belief.statement, *(s.quote for s in belief.supports)]
    if any(find_secrets(t) for t in texts):
        reasons.append("fails the secret scan")
    if find_injections(belief.statement):
        reasons.append("fails the injection scan")
    return reasons


def select_nominations(beliefs: Iterable[Belief], rules: NominationRules, declined: set[str]) -> list[Belief]:
    """The beliefs to nominate now: eligible ones not yet nominated, most confident and most
    corroborated first (then oldest), filling the free places up to `max_outstanding`."""
    pool = list(beliefs)
    outstanding = sum(1 for b in pool if b.nominated)
    free = rules.max_outstanding - outstanding
    if free <= 0:
        return []
    eligible = [b for b in pool if not b.nominated and not blockers(b, rules, declined)]
    eligible.sort(key=lambda b: (-b.confidence, -b.corroborations, b.id))
    return eligible[:free]
