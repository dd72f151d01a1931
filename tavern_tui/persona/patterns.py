"""Provides `MATCHERS`: the deterministic belief extractor's patterns, one matcher per kind of statement.

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations". Each matcher takes
a clause (`lexicon._Clause`) and returns candidates, [] (matched but rejected: stop), or None (not
this pattern: try the next); `extract.extract_beliefs` cuts a message into clauses and tries them
in `MATCHERS` order. Every pattern is anchored or uses disjoint classes, so a clause costs linear
time.
"""

from __future__ import annotations

import re

from tavern_tui.persona.lexicon import (
    _BOUNDARY_REJECT,
    _DEICTIC,
    _EMPHATIC_ADVERBS,
    _EMPHATIC_SUFFIX,
    _HEDGE_ADVERBS,
    _IDENTITY_ADJECTIVES,
    _IDENTITY_REJECT,
    _LOWERCASE_NAME_REJECT,
    _NAME_REJECT,
    _STOP_BOUNDARY,
    _STOP_IDENTITY,
    _STOP_PLACE,
    _STOP_PREF,
    _STOP_PREFER,
    _STORY_ANY,
    _STORY_NOUNS,
    _STORY_SUFFIX,
    CATEGORY_SENSITIVITY,
    HEDGED_CONFIDENCE,
    MAX_VALUE_WORDS,
    Candidate,
    _Clause,
    _key_value,
    _sensitive,
    _sentence_end,
    _third_person,
    _tidy_end,
    _value,
    _values,
)

# ---------------------------------------------------------------------------------------------
# Patterns. Each matcher takes a clause and returns candidates, [] (matched but rejected: stop),
# or None (not this pattern: try the next).

_ADV = (r"(?:(?:really|truly|absolutely|totally|genuinely|definitely|seriously|honestly|just|also|still|actually"
        r"|always|so|personally|kinda|kind\s+of|sort\s+of|sorta|might|may|probably|possibly|maybe|too|even"
        r"|already|deeply|quite|pretty\s+much|secretly|low\s+key|lowkey|unironically)\s+)*+")
_IM = r"(?:i'm|im|i\s+am)\s+"
_SUBJ_HAVE = r"(?:i've|ive|i\s+have)\s+"


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


_PLEASE = r"(?:please|pls|plz)"
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


MATCHERS = (_name, _credentials, _location, _finances, _used_to, _boundary, _keep_it, _my_favourite, _fan,
            _prefer, _like, _health_etc, _identity, _is_my_favourite)
"""The matchers in the order a clause tries them (the first that does not return None decides)."""
