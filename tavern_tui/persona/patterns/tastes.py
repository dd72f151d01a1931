"""Provides the persona matchers for tastes: likes and dislikes, being a fan, preferences and
favourites.

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations"; every pattern is
anchored or uses disjoint classes, so a clause costs linear time.
"""

from __future__ import annotations

import re

from tavern_tui.persona.lexicon import (
    _DEICTIC,
    _EMPHATIC_SUFFIX,
    _STOP_PREF,
    _STOP_PREFER,
    _STORY_NOUNS,
    MAX_VALUE_WORDS,
    Candidate,
    _Clause,
    _key_value,
    _sensitive,
    _third_person,
    _value,
    _values,
)
from tavern_tui.persona.patterns.common import _ADV, _IM, _SUBJ_HAVE, _adverbs, _make

_MY_FAVOURITE = re.compile(r"^my\s+(?P<adv>(?:absolute|all[-\s]time|very|most|personal)\s+)?(?P<fav>favou?rite)\s+"
                           r"(?P<what>[\w'-]+(?:\s+[\w'-]+){0,2}?)\s+(?:is|are|has\s+to\s+be|would\s+be|was)\s+"
                           r"(?P<x>.+)$", re.IGNORECASE)
_IS_MY_FAVOURITE = re.compile(r"\s+(?:is|are)\s+(?P<adv>(?:also|definitely|probably|maybe|easily|still|totally"
                              r"|absolutely)\s+)?my\s+(?:absolute\s+|all[-\s]time\s+|very\s+|most\s+)?"
                              r"(?P<fav>favou?rites?)(?:\s+(?P<what>[\w'-]+(?:\s+[\w'-]+)?))?", re.IGNORECASE)


def _my_favourite(c: _Clause) -> list[Candidate] | None:
    m = _MY_FAVOURITE.match(c.body)
    if not m:
        return None
    value = _value(m.group("x"), _STOP_PREF)
    if not value:
        return []
    what = m.group("what")
    category = _sensitive(value) or "preference"
    return [_make(c, f"{{{{user}}}}'s {m.group('fav')} {what} is {_third_person(value)}",
                  f"likes:{_key_value(value)}", f"pref:{_key_value(value)}", category, 0.9)]


def _is_my_favourite(c: _Clause) -> list[Candidate] | None:
    m = _IS_MY_FAVOURITE.search(c.body)
    if not m or m.start() == 0:
        return None
    subject = c.body[:m.start()].strip()
    if len(subject.split()) > MAX_VALUE_WORDS:
        return []
    value = _value(subject, _STOP_PREF)
    if not value or re.search(r"(?<!\w)(?:i|i'm|im|my)(?!\w)", value, re.IGNORECASE):
        return []
    what_words: list[str] = []
    for word in (m.group("what") or "").split():  # "my favourite food of all time" -> "food"
        if word.lower() in _DEICTIC or word.lower() in ("of", "ever", "lol", "by", "and", "but", "in", "for"):
            break
        what_words.append(word)
    what = " ".join(what_words)
    hedged = (m.group("adv") or "").strip().lower() in ("probably", "maybe")
    favourite = m.group("fav").rstrip("sS")
    statement = f"{value[0].upper()}{value[1:]} {'are' if m.group(0).split()[0].lower() == 'are' else 'is'} " \
                f"{{{{user}}}}'s {favourite}{(' ' + what) if what else ''}"
    category = _sensitive(value) or "preference"
    return [_make(c, statement, f"likes:{_key_value(value)}", f"pref:{_key_value(value)}", category, 0.9,
                  hedged=hedged)]


_FAN = re.compile(r"^" + _IM + r"(?P<adv>" + _ADV + r")(?P<neg>not\s+(?:(?:really|much|that|very|too|a\s+huge"
                  r"|all\s+that)\s+)*)?(?P<verb>a\s+(?:(?:big|huge|massive|total|great|long-time|longtime|die-hard"
                  r"|diehard|giant|major)\s+)?(?:fan|lover|sucker)\s+(?:of|for)|into|obsessed\s+with|crazy\s+about"
                  r"|passionate\s+about|fond\s+of|big\s+on|keen\s+on|partial\s+to|addicted\s+to|in\s+love\s+with)\s+"
                  r"(?P<x>.+)$", re.IGNORECASE)


def _fan(c: _Clause) -> list[Candidate] | None:
    m = _FAN.match(c.body)
    if not m:
        return None
    emphatic, hedged = _adverbs(m)
    verb = " ".join(m.group("verb").lower().split())
    negated = bool(m.group("neg"))
    if not negated and re.match(r"a\s+(?:big|huge|massive|total|great|die-?hard|giant|major)", verb) \
            or verb.startswith(("obsessed", "crazy", "passionate", "addicted", "in love")) \
            or "sucker" in verb:
        emphatic = True
    out = []
    for value in _values(m.group("x"), _STOP_PREF):
        category = _sensitive(value) or ("dislike" if negated else "preference")
        key = f"{'dislikes' if negated else 'likes'}:{_key_value(value)}"
        lead = f"is not {verb}" if negated else f"is {verb}"
        confidence = 0.95 if emphatic and not negated else 0.85
        out.append(_make(c, f"{{{{user}}}} {lead} {_third_person(value)}", key, f"pref:{_key_value(value)}",
                         category, confidence, hedged=hedged))
    return out


_PREFER = re.compile(r"^i(?:'d|\s+would)?\s+(?P<adv>" + _ADV + r")(?:much\s+|generally\s+|usually\s+)?prefer\s+"
                     r"(?P<x>.+)$", re.IGNORECASE)


def _prefer(c: _Clause) -> list[Candidate] | None:
    m = _PREFER.match(c.body)
    if not m:
        return None
    _, hedged = _adverbs(m)
    value = _value(m.group("x"), _STOP_PREFER)
    if not value:
        return []
    key = _key_value(value)
    if _STORY_NOUNS.search(value):
        return [_make(c, f"{{{{user}}}} prefers {value}", f"story:{key}", f"story:{key}", "story", 0.85,
                      hedged=hedged)]
    category = _sensitive(value) or "preference"
    return [_make(c, f"{{{{user}}}} prefers {_third_person(value)}", f"likes:{key}", f"pref:{key}", category, 0.85,
                  hedged=hedged)]


_LIKE_VERBS = {"like": ("likes", "like"), "love": ("loves", "like"), "enjoy": ("enjoys", "like"),
               "adore": ("adores", "like"), "hate": ("hates", "dislike"), "dislike": ("dislikes", "dislike"),
               "detest": ("detests", "dislike"), "loathe": ("loathes", "dislike"), "despise": ("despises", "dislike"),
               "liked": ("likes", "like"), "loved": ("loves", "like"), "enjoyed": ("enjoys", "like"),
               "adored": ("adores", "like"), "hated": ("hates", "dislike"), "disliked": ("dislikes", "dislike"),
               "despised": ("despises", "dislike"), "detested": ("detests", "dislike")}
_STRONG_VERBS = frozenset({"adores", "detests", "loathes", "despises", "can't stand"})
_LIKE = re.compile(r"^(?:(?P<have>" + _SUBJ_HAVE + r"(?:always|long|forever|ever)\s+)|i\s+(?P<adv>" + _ADV + r"))"
                   r"(?:do\s+)?(?P<verb>like|love|enjoy|adore|hate|dislike|detest|loathe|despise|liked|loved|enjoyed|adored"
                   r"|hated|disliked|despised|detested|can't\s+stand|cant\s+stand|cannot\s+stand|can\s+not\s+stand"
                   r"|(?:don't|dont|do\s+not)\s+(?:really\s+|much\s+|particularly\s+)?(?:like|enjoy|care\s+for"
                   r"|love))\s+(?P<x>.+)$", re.IGNORECASE)


def _like(c: _Clause) -> list[Candidate] | None:
    m = _LIKE.match(c.body)
    if not m:
        return None
    verb = " ".join(m.group("verb").lower().split())
    has_always = bool(m.group("have"))
    if verb in _LIKE_VERBS and verb.endswith("ed") and not has_always:
        return None  # "I loved that film": one past event, not a standing taste
    if has_always and not verb.endswith("ed"):
        return None
    emphatic, hedged = _adverbs(m) if not has_always else (True, False)
    if verb.startswith(("don't", "dont", "do not")):
        last = verb.split()[-1]
        if last == "love":
            return []  # "I don't love X": too weak to record either way
        third = "doesn't care for" if verb.endswith("care for") else f"doesn't {last}"
        family = "dislike"
    elif "stand" in verb:
        third, family = "can't stand", "dislike"
    else:
        third, family = _LIKE_VERBS[verb]
    if _EMPHATIC_SUFFIX.search(" " + m.group("x")):
        emphatic = True
    if emphatic:
        confidence = 0.95
    elif third in _STRONG_VERBS or "stand" in third:
        confidence = 0.9
    else:
        confidence = 0.85
    out = []
    for value in _values(m.group("x"), _STOP_PREF):
        category = _sensitive(value) or ("dislike" if family == "dislike" else "preference")
        key = f"{'dislikes' if family == 'dislike' else 'likes'}:{_key_value(value)}"
        out.append(_make(c, f"{{{{user}}}} {third} {_third_person(value)}", key, f"pref:{_key_value(value)}",
                         category, confidence, hedged=hedged))
    return out
