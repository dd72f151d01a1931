"""Provides the persona matchers for facts about the person: name, credentials, where they live,
money, sensitive disclosures (health, religion, politics), identity, and what used to be true.

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations"; every pattern is
anchored or uses disjoint classes, so a clause costs linear time.
"""

from __future__ import annotations

import re

from tavern_tui.persona.lexicon import (
    _HEDGE_ADVERBS,
    _IDENTITY_ADJECTIVES,
    _IDENTITY_REJECT,
    _LOWERCASE_NAME_REJECT,
    _NAME_REJECT,
    _STOP_IDENTITY,
    _STOP_PLACE,
    _STOP_PREF,
    Candidate,
    _Clause,
    _key_value,
    _sensitive,
    _third_person,
    _tidy_end,
    _value,
    _values,
)
from tavern_tui.persona.patterns.common import _ADV, _IM, _adverbs, _make

_NAME_LEAD = re.compile(r"^(?:my\s+name(?:'s|\s+is)|name's|i(?:'m|m|\s+am)\s+called|(?P<goes>(?:you\s+can\s+"
                        r"|please\s+|just\s+)?call\s+me|i\s+go\s+by))\s+(?P<x>.+)$", re.IGNORECASE)
_NAME_WORDS = re.compile(r"(?:(?:Dr|Mr|Mrs|Ms|Mx|Prof)\.?\s+)?[A-Z][\w'-]*(?:\s+(?!I(?!\w))[A-Z][\w'-]*){0,2}")


def _name(c: _Clause) -> list[Candidate] | None:
    m = _NAME_LEAD.match(c.body)
    if not m:
        return None
    rest = m.group("x").strip(" ,:'")
    confidence = 0.85 if m.group("goes") else 0.9
    n = _NAME_WORDS.match(rest)
    if n and n.group(0).split()[0] not in _NAME_REJECT:
        name = _tidy_end(n.group(0))
    elif not m.group("goes") and re.fullmatch(r"[a-z][a-z'-]{1,20}", _tidy_end(rest)) \
            and _tidy_end(rest) not in _LOWERCASE_NAME_REJECT:
        name, confidence = _tidy_end(rest).capitalize(), 0.75
    else:
        return []
    statement = f"{{{{user}}}} goes by {name}" if m.group("goes") else f"{{{{user}}}}'s name is {name}"
    return [_make(c, statement, f"name:{name}", "name", "name", confidence)]


_CREDENTIAL = re.compile(r"^my\s+(?:[\w-]+\s+){0,2}?(?P<what>password|passcode|pin(?:\s+(?:code|number))?|api\s+key"
                         r"|ssn|social\s+security\s+number)\s*(?:is|=|:|'s)\s*(?P<x>\S.*)$", re.IGNORECASE)
_REDACT = re.compile(r"((?:password|passcode|pin|code|number|key|ssn)\s*(?:is|=|:|'s|\u2019s)\s*)"
                     r"\S+?(?=[.,;]?(?:\s|$))", re.IGNORECASE)
"""The secret after "password is" in a quote; a sentence's closing period is kept."""


def _credentials(c: _Clause) -> list[Candidate] | None:
    m = _CREDENTIAL.match(c.body)
    if not m:
        return None
    what = " ".join(m.group("what").lower().split())
    quote = _REDACT.sub(r"\1[redacted]", c.quote)
    return [_make(c, f"{{{{user}}}} shared their {what}", f"credentials:{what}", f"credentials:{what}",
                  "credentials", 0.9, quote=quote)]


_PLACE = re.compile(
    r"^(?:(?P<address>my\s+(?:home\s+|current\s+)?address\s*(?:is|:|'s))"
    r"|(?P<zip>my\s+(?:zip|postal|post)\s*code\s*(?:is|:|'s))"
    r"|i\s+(?:(?:currently|now|still|actually)\s+)?(?:live|reside|stay)\s+(?P<at>at|on|in|near)"
    r"|(?P<from>(?:i'm|im|i\s+am)\s+(?:originally\s+)?from|i\s+(?:originally\s+)?come\s+from))\s+(?P<x>.+)$",
    re.IGNORECASE)


def _location(c: _Clause) -> list[Candidate] | None:
    m = _PLACE.match(c.body)
    if not m:
        return None
    place = _value(m.group("x"), _STOP_PLACE, comma=not (m.group("address") or m.group("at") in ("at", "on")))
    if not place:
        return []
    if m.group("address"):
        statement = f"{{{{user}}}}'s address is {place}"
    elif m.group("zip"):
        statement = f"{{{{user}}}}'s zip code is {place}"
    elif m.group("from"):
        statement = f"{{{{user}}}} is from {place}"
    else:
        statement = f"{{{{user}}}} lives {m.group('at').lower()} {place}"
    return [_make(c, statement, f"location:{_key_value(place)}", "location", "location", 0.9)]


_MONEY = re.compile(r"^(?:(?P<what>salary|income|rent|mortgage|debt|debts|credit\s+score|net\s+worth|savings"
                    r"|bank\s+balance|paycheck)\s+(?:is|are|was)\s+(?P<x>.+))$", re.IGNORECASE)
_EARN = re.compile(r"^i\s+(?:(?:make|earn|get\s+paid|take\s+home))\s+(?P<x>(?:about\s+|around\s+|roughly\s+"
                   r"|like\s+)?[$£€]?\s?\d.*)$", re.IGNORECASE)
_DEBT = re.compile(r"^(?:i'm|im|i\s+am)\s+(?:(?:so|really|deep|deeply|drowning|buried|neck\s+deep)\s+)*in\s+"
                   r"(?:(?:a\s+lot\s+of|so\s+much|some|serious|massive|credit\s+card|student)\s+)*debt(?!\w)",
                   re.IGNORECASE)


def _finances(c: _Clause) -> list[Candidate] | None:
    body = c.body
    if body.lower().startswith("my "):
        m = _MONEY.match(body[3:].lstrip())
        if m:
            what = " ".join(m.group("what").lower().split())
            amount = _value(m.group("x"), _STOP_PLACE, comma=False)
            if not amount:
                return []
            return [_make(c, f"{{{{user}}}}'s {what} is {amount}", f"finances:{what}", f"finances:{what}",
                          "finances", 0.9)]
        return None
    m = _EARN.match(body)
    if m:
        amount = _value(m.group("x"), _STOP_PLACE, comma=False)
        return [_make(c, f"{{{{user}}}} makes {amount}", "finances:income", "finances:income", "finances",
                      0.9)] if amount else []
    if _DEBT.match(body):
        return [_make(c, "{{user}} is in debt", "finances:debt", "finances:debt", "finances", 0.9)]
    return None


_USED_TO = re.compile(r"^i\s+(?P<adv>" + _ADV + r")(?P<lead>used\s+to|use\s+to|no\s+longer)\s+(?P<verb>like|love|enjoy"
                      r"|adore|hate|dislike|be)\s+(?P<x>.+)$", re.IGNORECASE)


def _used_to(c: _Clause) -> list[Candidate] | None:
    m = _USED_TO.match(c.body)
    if not m:
        return None
    _, hedged = _adverbs(m)
    verb = m.group("verb").lower()
    past = not m.group("lead").lower().startswith("no")
    if verb == "be":
        a = re.match(r"(?P<art>an?)\s+(?P<x>.+)$", m.group("x"), re.IGNORECASE)
        role = _value(a.group("x"), _STOP_IDENTITY) if a else None
        if not role or role.split()[0].lower() in _IDENTITY_REJECT:
            return []
        category = _sensitive(role, self_description=True) or "identity"
        lead = "used to be" if past else "is no longer"
        return [_make(c, f"{{{{user}}}} {lead} {a.group('art').lower()} {role}", f"used to be:{_key_value(role)}",
                      f"identity:{_key_value(role)}", category, 0.8, durable=False, hedged=hedged)]
    family = "dislike" if verb in ("hate", "dislike") else "like"
    out = []
    for value in _values(m.group("x"), _STOP_PREF):
        category = _sensitive(value) or ("dislike" if family == "dislike" else "preference")
        lead = f"used to {verb}" if past else f"no longer {verb}s"
        out.append(_make(c, f"{{{{user}}}} {lead} {_third_person(value)}", f"used to {family}:{_key_value(value)}",
                         f"pref:{_key_value(value)}", category, 0.8, durable=False, hedged=hedged))
    return out


_HEALTH_ETC = re.compile(
    r"^(?:(?:i've|ive|i\s+have)\s+(?P<p1>been\s+diagnosed\s+with|got)"
    r"|i\s+(?P<adv>" + _ADV + r")(?P<p2>was\s+diagnosed\s+with|got\s+diagnosed\s+with|have\s+got|have"
    r"|suffer\s+from|struggle\s+with|live\s+with|deal\s+with|believe\s+in|pray\s+to|pray|worship|go\s+to|attend"
    r"|vote\s+for|voted\s+for|vote|voted|support|take|follow|practi[cs]e)"
    r"|(?:i'm|im|i\s+am)\s+(?:(?:currently|still|now)\s+)?(?P<p3>on|in|taking))(?:\s+(?P<x>.*))?$", re.IGNORECASE)
_THIRD = {"been diagnosed with": "has been diagnosed with", "got": "has", "was diagnosed with": "was diagnosed with",
          "got diagnosed with": "was diagnosed with", "have got": "has", "have": "has", "suffer from": "suffers from",
          "struggle with": "struggles with", "live with": "lives with", "deal with": "deals with", "on": "is on",
          "in": "is in", "taking": "is taking", "believe in": "believes in", "pray to": "prays to", "pray": "prays",
          "worship": "worships", "go to": "goes to", "attend": "attends", "vote for": "votes for",
          "voted for": "voted for", "vote": "votes", "voted": "voted", "support": "supports", "take": "takes",
          "follow": "follows", "practice": "practices", "practise": "practises"}
_CONDITION_VERBS = frozenset({"been diagnosed with", "got", "was diagnosed with", "got diagnosed with", "have got",
                              "have", "suffer from", "struggle with", "live with", "deal with", "on", "in", "taking"})
"""Verbs whose object names the thing itself ("I have diabetes" -> key "health:diabetes")."""
_INHERENT = {"pray": "religion", "pray to": "religion", "worship": "religion", "vote": "politics",
             "voted": "politics", "vote for": "politics", "voted for": "politics"}


def _health_etc(c: _Clause) -> list[Candidate] | None:
    """Sensitive disclosures: "I have diabetes", "I go to church", "I vote Democrat", "I'm on meds".

    Only fires when the object (or the verb itself: pray, worship, vote) is sensitive; "I have two
    cats" is left to the other patterns.
    """
    m = _HEALTH_ETC.match(c.body)
    if not m:
        return None
    raw = m.group("x") or ""
    value = _value(raw, _STOP_PLACE) if raw.strip() else ""
    verb = " ".join((m.group("p1") or m.group("p2") or m.group("p3")).lower().split())
    category = (_sensitive(value) if value else None) or _INHERENT.get(verb)
    if value is None or not category:
        return None
    hedged = bool(set((m.group("adv") or "").lower().split()) & _HEDGE_ADVERBS)
    if verb in _CONDITION_VERBS:
        if not value:
            return None
        debt = category == "finances" and re.search(r"(?<!\w)debts?(?!\w)", value, re.IGNORECASE)
        key = "finances:debt" if debt else f"{category}:{_key_value(value)}"
    else:
        key = f"{category}:{verb} {_key_value(value)}" if value else f"{category}:{verb}"
    return [_make(c, f"{{{{user}}}} {_THIRD[verb]} {_third_person(value)}", key, key, category, 0.9, hedged=hedged)]

_WORK_AS = re.compile(r"^(?:i\s+(?P<adv>" + _ADV + r")work|" + _IM + r"(?P<adv2>" + _ADV + r")working)\s+as\s+"
                      r"(?:(?P<art>an?)\s+)?(?P<x>.+)$", re.IGNORECASE)
_IM_A = re.compile(r"^" + _IM + r"(?P<adv>" + _ADV + r")(?P<art>an?)\s+(?P<x>.+)$", re.IGNORECASE)
_IM_BARE = re.compile(r"^" + _IM + r"(?P<adv>" + _ADV + r")(?P<x>[\w'-]+(?:\s+[\w'-]+){0,5})", re.IGNORECASE)


def _identity(c: _Clause) -> list[Candidate] | None:
    m = _WORK_AS.match(c.body)
    work = bool(m)
    if not m:
        m = _IM_A.match(c.body)
    if m:
        role = _value(m.group("x"), _STOP_IDENTITY)
        if not role or role.split()[0].lower() in _IDENTITY_REJECT:
            return []
        hedged = bool(set((m.group("adv") or (m.groupdict().get("adv2") or "")).lower().split()) & _HEDGE_ADVERBS)
        article = f"{m.group('art').lower()} " if m.group("art") else ""
        lead = "works as" if work else "is"
        key = _key_value(role)
        category = _sensitive(role, self_description=True) or "identity"
        return [_make(c, f"{{{{user}}}} {lead} {article}{role}", f"identity:{key}", f"identity:{key}", category,
                      0.85, hedged=hedged)]
    m = _IM_BARE.match(c.body)
    if not m:
        return None
    words = m.group("x").split()
    if words[0].lower() in ("not", "no", "never", "called", "from"):
        return None
    value = _value(m.group("x"), _STOP_IDENTITY)
    if not value:
        return None
    category = _sensitive(" ".join(value.split()[:3]), self_description=True)
    if category is None:
        if value.split()[0].lower() not in _IDENTITY_ADJECTIVES:
            return None  # "I'm tired", "I'm at the store": a passing state, not a standing fact
        value, category = value.split()[0], "identity"
    hedged = bool(set((m.group("adv") or "").lower().split()) & _HEDGE_ADVERBS)
    key = _key_value(value)
    return [_make(c, f"{{{{user}}}} is {value}", f"identity:{key}", f"identity:{key}", category, 0.85,
                  hedged=hedged)]

