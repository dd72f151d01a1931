"""Provides the deterministic belief extractor consolidation runs over the person's own chat messages.

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations". Beliefs are learned
only from what the person types (the caller passes customer-origin message text only).
`extract_beliefs` reads deterministic, English, first-person statements ("I love cats", "my name
is Sam", "(OOC: no gore please)"). Text inside *asterisk actions* is skipped; quoted speech and
`(OOC: …)` / `[OOC: …]` notes are read. Hedged statements become hypotheses; passing states are
skipped or marked non-durable; sensitive values get a never-nominate category. The lexicons,
text preparation and `Candidate` are in `lexicon`, the patterns in `patterns`; the optional
model extractor is `model_extract.parse_model_beliefs`.

Pure: no database, no network. Every pattern is anchored or uses disjoint classes, and each
sentence is analysed over at most `MAX_SENTENCE_CHARS` characters, so a long or hostile message
costs linear time.
"""

from __future__ import annotations

import re

from tavern_tui.persona.lexicon import (
    _CLAUSE_SPLIT,
    _SENTENCE,
    _TAG_QUESTION,
    _TRANSIENT,
    Candidate,
    _Clause,
    _in_regions,
    _prepare,
    _strip_prefix,
)
from tavern_tui.persona.patterns import MATCHERS

MAX_SENTENCE_CHARS = 400
"""Characters of one sentence the deterministic extractor reads (the rest is ignored)."""


_EMBEDDED_STATEMENT = re.compile(
    r"^(?:so\s*,?\s*|oh\s*,?\s*|wait\s*,?\s*)?(?:did|have|had)\s+i\s+(?:ever\s+|already\s+|even\s+)?"
    r"(?:mention(?:ed)?|tell\s+you|told\s+you|say|said)\s+(?:to\s+you\s+)?(?:that\s+)?"
    r"(?=(?:i|i'm|im|i've|ive|my)(?!\w))", re.IGNORECASE)
"""A question that only wraps a first-person statement: "did I mention I love sailing?",
"have I told you that my name is Sam?" (issue 24). What follows the lead-in is read as a
statement; any other question still states nothing."""


def _analyse(sentence: str, quote: str, ooc: bool) -> list[Candidate]:
    """Candidates of one sentence (its trailing punctuation included)."""
    text = " ".join(sentence.split())
    if text.endswith("?"):
        embedded = _EMBEDDED_STATEMENT.match(text)
        tag = _TAG_QUESTION.search(text)
        if embedded:
            text = text[embedded.end():].rstrip("?")
        elif not tag:
            return []  # a question ("do I like cats?") states nothing
        else:
            text = text[:tag.start()]
    text = text.rstrip(" .!~")
    out: list[Candidate] = []
    carry_hedge = False
    for piece in _CLAUSE_SPLIT.split(text):
        body, hedged, negated = _strip_prefix(piece)
        if negated:
            carry_hedge = False
            continue
        if not body:
            carry_hedge = carry_hedge or hedged
            continue
        clause = _Clause(body, hedged or carry_hedge, ooc, bool(_TRANSIENT.search(body)), quote)
        carry_hedge = False
        for matcher in MATCHERS:
            found = matcher(clause)
            if found is not None:
                out.extend(found)
                break
    return out


def extract_beliefs(text: str) -> list[Candidate]:
    """Candidates the person's own message states about themselves (seed 002 ADR-0079 decision 6).

    Deterministic and English-only. Reads plain text and quoted speech and `(OOC: …)`/`[OOC: …]`
    notes; skips *asterisk actions*, questions, statements about anyone else ("You like cats",
    "She loves cats"), and negated hedges ("I don't think I like jazz"). Hedged statements
    ("I think I might like jazz") are hypotheses with confidence at most 0.5; passing states
    ("I'm tired") are skipped, and statements limited in time ("right now", "I used to …") are
    non-durable. Values that mention health, sexuality, religion, politics, finances, location
    or credentials get that never-nominate category and sensitivity "high".

    Args:
        text: one message's text, as the person typed it.

    Returns:
        Candidates in text order, de-duplicated by key (the first one of a key is kept).
    """
    if not text:
        return []
    norm, masked, regions = _prepare(text)
    starts = [start for start, _ in regions]
    found: list[Candidate] = []
    seen: set[str] = set()
    for m in _SENTENCE.finditer(masked):
        start, end = m.start(), m.end()
        span = masked[start:end]
        start += len(span) - len(span.lstrip())
        if start >= end:
            continue
        if end - start > MAX_SENTENCE_CHARS:
            if span.rstrip().endswith("?"):
                continue  # an over-long question
            end = start + MAX_SENTENCE_CHARS  # read the beginning only, without the cut word
            cut = norm.rfind(" ", start, end)
            end = cut if cut > start else end
        quote = text[start:end].strip()
        for candidate in _analyse(norm[start:end], quote, _in_regions(start, starts, regions)):
            if candidate.key not in seen:
                seen.add(candidate.key)
                found.append(candidate)
    return found
