"""Provides the persona matchers for directions about the story: boundaries ("no gore please",
"spiders are a hard limit") and how the story is to be kept ("keep it light").

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations"; every pattern is
anchored or uses disjoint classes, so a clause costs linear time.
"""

from __future__ import annotations

import re

from tavern_tui.persona.lexicon import (
    _BOUNDARY_REJECT,
    _STOP_BOUNDARY,
    _STOP_PREF,
    _STORY_ANY,
    _STORY_NOUNS,
    _STORY_SUFFIX,
    Candidate,
    _Clause,
    _key_value,
    _value,
)
from tavern_tui.persona.patterns.common import _PLEASE, _make

_DONT_INCLUDE = re.compile(r"^(?P<please>" + _PLEASE + r"\s*,?\s+)?(?:don't|dont|do\s+not)\s+(?:ever\s+)?(?:include"
                           r"|add|put|write|use|describe|show|mention|bring\s+up|introduce|go\s+into|have)\s+"
                           r"(?:any\s+|more\s+)?(?P<x>.+)$", re.IGNORECASE)
_DONT_WANT = re.compile(r"^(?:i\s+(?:really\s+)?(?:don't|dont|do\s+not)\s+want|(?:i'd|i\s+would)\s+rather\s+not)"
                        r"\s+(?:to\s+)?(?:see|read|have|do|include|get\s+into|go\s+into|deal\s+with)?\s*"
                        r"(?:any\s+|more\s+)?(?P<x>.+)$", re.IGNORECASE)
_NO_PLEASE = re.compile(r"^(?P<please>" + _PLEASE + r"\s*,?\s+)?no\s+(?:more\s+)?(?P<x>[^\s,]+(?:\s+[^\s,]+){0,5})"
                        r"\s*,?\s*(?P<please2>" + _PLEASE + r")?$", re.IGNORECASE)
_AVOID = re.compile(r"^(?P<please>" + _PLEASE + r"\s*,?\s+)?(?:avoid|skip|leave\s+out)\s+(?:any\s+)?(?P<x>.+)$",
                    re.IGNORECASE)
_LIMIT = re.compile(r"\s+(?:is|are)\s+(?:a\s+|my\s+)?(?:hard\s+|absolute\s+)?(?:limits?|no-go|no\s+go|hard\s+no"
                    r"|dealbreakers?|deal\s+breakers?|triggers?)(?!\w)", re.IGNORECASE)


def _boundary_value(raw: str) -> str | None:
    raw = re.sub(r"\s*,?\s*" + _PLEASE + r"\s*$", "", raw.strip(), flags=re.IGNORECASE)
    return _value(raw, _STOP_BOUNDARY)


def _boundary(c: _Clause) -> list[Candidate] | None:
    body = c.body
    story = bool(_STORY_SUFFIX.search(body))
    please = bool(re.search(r"(?<!\w)" + _PLEASE + r"(?!\w)", body, re.IGNORECASE))
    value = None
    m = _DONT_INCLUDE.match(body)
    if m:
        if not (please or story or c.ooc):
            return None
        value = _boundary_value(m.group("x"))
    elif (m := _DONT_WANT.match(body)):
        if not (story or c.ooc):
            return None
        value = _boundary_value(m.group("x"))
    elif (m := _NO_PLEASE.match(body)):
        if not (m.group("please") or m.group("please2") or story or c.ooc):
            return None
        value = _boundary_value(m.group("x"))
        if value and (value.lower() in _BOUNDARY_REJECT or value.split()[0].lower() in _BOUNDARY_REJECT):
            return []
    elif (m := _AVOID.match(body)):
        if not (please or story or c.ooc):
            return None
        value = _boundary_value(m.group("x"))
    elif (m := _LIMIT.search(body)) and m.start() > 0:
        value = _value(body[:m.start()], _STOP_BOUNDARY)
        if value and re.search(r"(?<!\w)(?:i|i'm|im|my|me)(?!\w)", value, re.IGNORECASE):
            return []
        if value and value[1:] == value[1:].lower():
            value = value[0].lower() + value[1:]  # "Spiders are a hard limit": sentence case, not a name
    else:
        return None
    if not value:
        return []
    value = re.sub(r"^(?:any|more|too\s+much|excessive)\s+", "", value, flags=re.IGNORECASE) or value
    key = _key_value(value)
    return [_make(c, f"{{{{user}}}} does not want {value} in the story", f"boundary:{key}", f"boundary:{key}",
                  "boundary", 0.9)]


_KEEP_IT = re.compile(r"^(?:(?:please|pls|let's|lets|let\s+us)\s*,?\s+)?keep\s+(?P<obj>it|things|the\s+story"
                      r"|the\s+rp|the\s+roleplay|this\s+story|this\s+rp|the\s+replies|the\s+responses"
                      r"|replies|responses)\s+(?P<x>.+)$", re.IGNORECASE)


def _keep_it(c: _Clause) -> list[Candidate] | None:
    m = _KEEP_IT.match(c.body)
    if not m:
        return None
    raw = re.sub(r"\s*,?\s*" + _PLEASE + r"\s*$", "", m.group("x"), flags=re.IGNORECASE)
    value = _value(raw, _STOP_PREF)
    if not value:
        return []
    explicit = m.group("obj").lower() != "it"
    if not (explicit or c.ooc or _STORY_ANY.search(value) or _STORY_NOUNS.search(value)):
        return []
    key = _key_value(value)
    return [_make(c, f"{{{{user}}}} wants the story kept {value}", f"story:{key}", f"story:{key}", "story",
                  0.85)]
