"""Provides the optional model belief extractor: the prompt it sends and the strict validation
of the model's JSON answer.

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations". Beliefs are learned
only from what the person types. `parse_model_beliefs` validates the JSON a model returned for
`EXTRACTION_PROMPT`. Nothing the model says is trusted: every field is type- and value-checked,
and a belief whose quote is not in the message is dropped (a model may not invent support). The
result is the same `lexicon.Candidate`s the deterministic `extract.extract_beliefs` yields.

Pure: no database, no network.
"""

from __future__ import annotations

import json
import math
import re

from tavern_tui.errors import FormatError
from tavern_tui.persona.lexicon import (
    _ACTION,
    _TRANSLATE,
    ALL_CATEGORIES,
    NEVER_NOMINATE_CATEGORIES,
    Candidate,
    _sentence_end,
)
from tavern_tui.persona.model import BELIEF_KINDS, SENSITIVITIES

MODEL_SOURCE = "model belief JSON"
"""The `file` a `FormatError` from `parse_model_beliefs` names."""


EXTRACTION_PROMPT = """\
You read one chat message that a person typed in a roleplay chat, and list the facts the person \
states about THEMSELVES in the first person ("I ...", "my ...", "call me ..."). Text inside \
*asterisks* is a roleplay action, not a statement: ignore it. Out-of-character notes such as \
(OOC: ...) are the person speaking and do count. Ignore anything said about other people or \
characters, questions, and anything you would have to guess.

Answer with one JSON object and nothing else:
{"beliefs": [{"statement": "...", "key": "...", "slot": "...", "kind": "...", "category": "...", \
"confidence": 0.0, "sensitivity": "...", "durable": true, "quote": "..."}]}

Fields (all required):
- statement: the fact in the third person using the macro {{user}}, ending with a period, \
e.g. "{{user}} likes cats.", "{{user}}'s name is Sam.", "{{user}} does not want gore in the story."
- key: lowercase canonical key "<kind>:<value>", e.g. "name:sam", "likes:cats", \
"dislikes:horror movies", "identity:teacher", "boundary:gore", "story:slow burn romance".
- slot: what a newer fact replaces: "name" for names, "pref:<value>" for both likes and \
dislikes of the same thing, "identity:<value>", "boundary:<value>", "story:<value>", "location".
- kind: "direct" when the person plainly said it of themselves; "hypothesis" when hedged \
("maybe", "I think I might") or inferred.
- category: one of "name", "preference", "dislike", "identity", "boundary" (content the person \
does not want in the story), "story" (pacing, genre, tone or reply length they want), or, for \
anything about health, sexuality, religion, politics, credentials (passwords, PINs), location \
(where they live) or finances: "health", "sexuality", "religion", "politics", "credentials", \
"location", "finances".
- confidence: a number from 0 to 1 (plain statement about 0.85, emphatic 0.95, hedged at most 0.5).
- sensitivity: "low" for name, preference, dislike and story; "normal" for identity and \
boundary; "high" for health, sexuality, religion, politics, credentials, location and finances.
- durable: false for passing states ("I'm tired", "right now", "I used to ..."), else true.
- quote: the exact words of the message the fact comes from, copied verbatim.

Never put a password, PIN or other secret value in a statement. If the message states nothing \
about the person, answer {"beliefs": []}."""
"""System prompt for the optional model extractor; the answer goes to `parse_model_beliefs`."""

_FIELDS = ("statement", "key", "slot", "kind", "category", "confidence", "sensitivity", "durable", "quote")
_FENCE = re.compile(r"^```[\w-]*[ \t]*\n(?P<body>.*)\n[ \t]*```$", re.DOTALL)
_FIRST_PERSON = re.compile(r"(?<![\w'])(?:i|i'm|im|i've|i'd|i'll|my|mine|myself|me|let's|let\s+us|ooc)(?![\w'])",
                           re.IGNORECASE)
"""A first-person word, or an out-of-character marker (an OOC note is the person speaking)."""


def _loose(text: str) -> str:
    """Case-folded, quote-normalised, whitespace-collapsed: the form quotes are compared in."""
    return " ".join(text.translate(_TRANSLATE).casefold().split())


def _first_person(quote: str) -> bool:
    return bool(_FIRST_PERSON.search(quote.translate(_TRANSLATE))) and not quote.rstrip().endswith("?")


def _checked(item: object, message: str, unacted: str) -> Candidate | None:
    """One item of the model's list as a Candidate, or None when any field fails validation."""
    if not isinstance(item, dict) or any(name not in item for name in _FIELDS):
        return None
    statement, key, slot, kind = item["statement"], item["key"], item["slot"], item["kind"]
    category, confidence = item["category"], item["confidence"]
    sensitivity, durable, quote = item["sensitivity"], item["durable"], item["quote"]
    if not all(isinstance(v, str) for v in (statement, key, slot, kind, category, sensitivity, quote)):
        return None
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not isinstance(durable, bool):
        return None
    confidence = float(confidence)
    if not math.isfinite(confidence) or not 0.0 <= confidence <= 1.0:
        return None
    key, slot, statement, quote = key.strip(), slot.strip(), " ".join(statement.split()), quote.strip()
    if not key or key != key.lower() or not slot or not statement or not quote:
        return None
    if kind not in BELIEF_KINDS or category not in ALL_CATEGORIES or sensitivity not in SENSITIVITIES:
        return None
    if "{{user}}" not in statement:
        return None
    loose_quote = _loose(quote)
    if loose_quote not in message:
        return None  # the model may not invent support
    if kind == "direct" and not (_first_person(quote) and loose_quote in unacted):
        kind = "hypothesis"
    if kind == "hypothesis":
        confidence = min(confidence, 0.5)
    if category in NEVER_NOMINATE_CATEGORIES:
        sensitivity = "high"
    return Candidate(_sentence_end(statement), " ".join(key.split()), " ".join(slot.lower().split()), kind,
                     category, confidence, sensitivity, durable, quote)


def parse_model_beliefs(raw: str, message_text: str) -> list[Candidate]:
    """Validate a model's answer to `EXTRACTION_PROMPT` (seed 002 ADR-0079 decision 6).

    The answer must be one JSON object `{"beliefs": [...]}` (one surrounding ``` fence is
    tolerated). Each item needs every field with the right type and an allowed value: kind in
    `BELIEF_KINDS`, category in `ALL_CATEGORIES`, sensitivity in `SENSITIVITIES`, confidence a
    finite number in 0..1, durable a boolean, key non-empty and lowercase, statement containing
    `{{user}}`; an item failing any check is dropped. An item whose quote is not in
    `message_text` (compared case-insensitively with whitespace and curly quotes normalised) is
    dropped. Kind becomes "hypothesis" (confidence capped at 0.5) unless the quote is a
    first-person sentence (a first-person word or an OOC marker, not a question) outside
    *asterisk actions*; never-nominate categories are forced to
    sensitivity "high". Duplicate keys keep the first item.

    Returns:
        The surviving candidates, in the model's order.

    Raises:
        FormatError: file "model belief JSON"; the answer is not valid JSON (field ""), not an
            object (field ""), or has no "beliefs" list (field "beliefs").
    """
    text = (raw or "").strip()
    fence = _FENCE.match(text)
    if fence:
        text = fence.group("body").strip()
    try:
        answer = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        reason = f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})" \
            if isinstance(exc, json.JSONDecodeError) else "not valid JSON (nested too deeply)"
        raise FormatError(MODEL_SOURCE, reason) from None
    if not isinstance(answer, dict):
        raise FormatError(MODEL_SOURCE, f"the answer is a JSON {type(answer).__name__}, not an object "
                                        'with a "beliefs" list')
    if not isinstance(answer.get("beliefs"), list):
        raise FormatError(MODEL_SOURCE, 'missing or not a list; expected {"beliefs": [...]}', field="beliefs")
    message = _loose(message_text or "")
    unacted = _loose(_ACTION.sub(" ", (message_text or "").translate(_TRANSLATE)))
    out: list[Candidate] = []
    seen: set[str] = set()
    for item in answer["beliefs"]:
        candidate = _checked(item, message, unacted)
        if candidate is not None and candidate.key not in seen:
            seen.add(candidate.key)
            out.append(candidate)
    return out
