"""Provides the belief extractors consolidation runs over the person's own chat messages.

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations". Beliefs are learned
only from what the person types (the caller passes customer-origin message text only). Two
extractors produce `Candidate`s:

* `extract_beliefs`: deterministic, English, first-person statements ("I love cats", "my name is
  Sam", "(OOC: no gore please)"). Text inside *asterisk actions* is skipped; quoted speech and
  `(OOC: …)` / `[OOC: …]` notes are read. Hedged statements become hypotheses; passing states are
  skipped or marked non-durable; sensitive values get a never-nominate category.
* `parse_model_beliefs`: validates the JSON a model returned for `EXTRACTION_PROMPT`. Nothing the
  model says is trusted: every field is type- and value-checked, and a belief whose quote is not
  in the message is dropped (a model may not invent support).

Pure: no database, no network. Every pattern is anchored or uses disjoint classes, and each
sentence is analysed over at most `MAX_SENTENCE_CHARS` characters, so a long or hostile message
costs linear time.
"""

from __future__ import annotations

import bisect
import json
import math
import re
from dataclasses import dataclass

from tavern_tui.errors import FormatError
from tavern_tui.persona.model import BELIEF_KINDS, SENSITIVITIES

CATEGORIES = ("name", "preference", "dislike", "identity", "boundary", "story")
"""Categories a belief may be nominated from (subject to seed 002 decision 6's other rules)."""

NEVER_NOMINATE_CATEGORIES = ("health", "sexuality", "religion", "politics", "credentials", "location", "finances")
"""Categories that are stored but never nominated (seed 002 decision 6); always sensitivity "high"."""

ALL_CATEGORIES = CATEGORIES + NEVER_NOMINATE_CATEGORIES

CATEGORY_SENSITIVITY = {"name": "low", "preference": "low", "dislike": "low", "story": "low",
                        "identity": "normal", "boundary": "normal",
                        **{category: "high" for category in NEVER_NOMINATE_CATEGORIES}}
"""The sensitivity each category carries."""

MAX_SENTENCE_CHARS = 400
"""Characters of one sentence the deterministic extractor reads (the rest is ignored)."""

MAX_VALUE_WORDS = 6
"""Words kept of a belief's value ("I love X": X); longer values are cut and dangling words trimmed."""

HEDGED_CONFIDENCE = 0.45
"""Confidence of a hedged statement ("maybe I'm a morning person"); hypotheses never exceed 0.5."""

MODEL_SOURCE = "model belief JSON"
"""The `file` a `FormatError` from `parse_model_beliefs` names."""


@dataclass(frozen=True, slots=True)
class Candidate:
    """A belief one message supports, before consolidation merges it into the store.

    Attributes:
        statement: canonical, third person with the `{{user}}` macro, ends with "."
            ("{{user}} likes cats.").
        key: canonical key, lowercase and whitespace-collapsed ("likes:cats", "name:sam").
        slot: what a newer statement replaces ("name", "pref:cats" for likes:cats and
            dislikes:cats, "identity:teacher", "boundary:gore", "story:slow burn", "location").
        kind: "direct" (a plain first-person statement) or "hypothesis" (hedged or inferred).
        category: one of `ALL_CATEGORIES`.
        confidence: 0..1; plain ~0.85, emphatic 0.95, hedged at most 0.5.
        sensitivity: one of `SENSITIVITIES`; never-nominate categories are "high".
        durable: False for passing states ("I'm into jazz right now", "I used to like cats").
        quote: the sentence it came from, trimmed (credential values replaced by "[redacted]").
    """

    statement: str
    key: str
    slot: str
    kind: str
    category: str
    confidence: float
    sensitivity: str
    durable: bool
    quote: str


# ---------------------------------------------------------------------------------------------
# Lexicons. Every list is a regex alternation matched between non-word boundaries.

def _words(alternation: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)(?:" + alternation + r")(?!\w)", re.IGNORECASE)


_SENSITIVE = (  # order matters: the first category that matches wins
    ("credentials", _words(r"passwords?|passcodes?|pin\s+(?:code|number)|api\s+keys?|ssn|social\s+security")),
    ("location", _words(r"(?:home\s+)?address|zip\s*code|post\s*code|postal\s+code|apartment\s+\d+|apt\.?\s*\d+"
                        r"|\d+\s+\w+\s+(?:street|st|avenue|ave|road|rd|lane|ln|drive|dr|boulevard|blvd|court|ct)")),
    ("health", _words(r"diabet\w*|depress(?:ion|ed|ive)|anxiety|adhd|autis\w*|cancer|pregnan\w*|medications?|meds"
                      r"|antidepressants?|therapy|bipolar|schizophreni\w*|ptsd|ocd|epilep\w*|asthma\w*|hiv"
                      r"|chronic\s+\w+|illness(?:es)?|disabilit\w*|disabled|insulin|chemo\w*|migraines?"
                      r"|eating\s+disorders?|anorexi\w*|bulimi\w*|suicid\w*|self[-\s]harm|diagnos\w*|allerg\w*"
                      r"|insomnia|dementia|alzheimer'?s|arthritis|c(?:o?e)liac|crohn'?s|fibromyalgia|lupus|deaf"
                      r"|wheelchair|panic\s+attacks?|mental\s+health|rehab|sober|sobriety|addict\w*|alcoholi\w*"
                      r"|prescriptions?|dyslexi\w*")),
    ("sexuality", _words(r"gay|lesbian|bisexual|asexual|aromantic|pansexual|demisexual|queer|homosexual"
                         r"|heterosexual|transgender|non-?binary|lgbt\w*|sexuality|sexual\s+orientation|kinks?"
                         r"|kinky|bdsm|fetish\w*")),
    ("religion", _words(r"christian\w*|muslim|islam\w*|jewish|judaism|jews?|atheis\w*|agnostic|buddhis\w*|buddha"
                        r"|hindu\w*|sikh\w*|catholic\w*|protestant|mormon\w*|church|mosque|synagogue|god|jesus"
                        r"|christ|allah|bible|quran|koran|torah|pray\w*|religio\w*|pagan\w*|wicca\w*|evangelical"
                        r"|baptist|lutheran|methodist|scientolog\w*")),
    ("politics", _words(r"democrats?|republicans?|liberals?|conservatives?|socialis\w*|communis\w*|libertarian\w*"
                        r"|marxis\w*|fascis\w*|anarchis\w*|vot(?:e|es|ed|ing)|elections?|trump|biden|maga"
                        r"|leftists?|right[-\s]wing\w*|left[-\s]wing\w*|tory|tories|labour\s+party|green\s+party"
                        r"|politics|political|politicians?")),
    ("finances", re.compile(r"(?<!\w)(?:salary|salaries|debts?|income|bank\s+(?:account|balance|details)|mortgage"
                            r"|loans?|credit\s+(?:score|card)s?|savings|paycheck|net\s+worth|bankrupt\w*)(?!\w)"
                            r"|[$£€]\s?\d", re.IGNORECASE)),
)

_SEXUALITY_IDENTITY = _words(r"straight|bi|trans|ace")
"""Orientation words that only count said of oneself ("I'm straight"; "I like straight hair" is not)."""

_STORY_NOUNS = _words(
    r"slow[-\s]?burns?|romance|romcoms?|horror|comedy|comedies|drama|angst|fluff|mystery|mysteries|thrillers?"
    r"|fantasy|sci[-\s]?fi|science\s+fiction|adventures?|slice\s+of\s+life|sfw|nsfw|pg(?:-?13)?"
    r"|repl(?:y|ies)|responses?|paragraphs?|messages?|pacing|paced|tone|(?:first|second|third)[-\s]person"
    r"|(?:present|past)\s+tense|dialogue|narration|fade\s+to\s+black|happy\s+endings?|plots?|story|stories"
    r"|storylines?|roleplays?|rp|scenes?|worldbuilding|combat|suspense|banter|genres?|prose|pov")
"""Words that make "I prefer X" a story preference rather than a taste."""

_STORY_ANY = _words(
    r"slow|light|lighthearted|light-hearted|dark|grimdark|gritty|wholesome|fluffy|funny|comedic|romantic"
    r"|dramatic|angsty|spooky|cozy|cosy|clean|tame|mild|short|shorter|long|longer|brief|detailed|descriptive"
    r"|concise|realistic|serious|casual|tasteful|non-?graphic|vague|subtle|immersive|family[-\s]friendly"
    r"|steamy|spicy|explicit|in[-\s]character|pg|sfw|nsfw")
"""Tone and length words that make "keep it X" a story preference."""

_TRANSIENT = _words(r"right\s+now|at\s+the\s+moment|atm|today|tonight|this\s+(?:morning|afternoon|evening|week"
                    r"|weekend)|for\s+now|at\s+the\s+minute|lately|recently|for\s+the\s+time\s+being")
"""Words that make a statement a passing state (durable False)."""

_EMPHATIC_SUFFIX = re.compile(r"\s(?:so\s+much|so\s+so\s+much|a\s+lot|more\s+than\s+anything|with\s+all\s+my\s+heart"
                              r"|to\s+death|the\s+most|to\s+bits)(?!\w)", re.IGNORECASE)
_EMPHATIC_ADVERBS = frozenset({"really", "truly", "absolutely", "totally", "genuinely", "definitely", "seriously",
                               "always", "so", "deeply", "honestly"})
_HEDGE_ADVERBS = frozenset({"might", "may", "probably", "possibly", "maybe", "kinda", "kind of", "sort of", "sorta",
                            "perhaps"})

_DEICTIC = frozenset({
    "it", "its", "it's", "this", "that", "these", "those", "you", "your", "yours", "you're", "youre", "u", "ur",
    "ya", "yall", "y'all", "him", "his", "her", "hers", "she", "he", "they", "them", "their", "theirs", "we", "us",
    "our", "ours", "here", "there", "what", "how", "when", "where", "who", "whom", "why", "which", "thee", "thy",
    "everything", "anything", "something", "nothing", "everyone", "anyone", "someone", "somebody", "everybody",
    "that's", "so", "too", "very", "not", "no", "today", "tonight", "tomorrow", "yesterday", "now",
})
"""Words that tie a value to the scene or the other party ("I love you", "I like that"): no belief."""

_DANGLING = frozenset({"a", "an", "the", "of", "in", "on", "at", "to", "with", "and", "or", "for", "my", "from",
                       "by", "about", "as", "into", "some", "any", "very", "really", "&"})

_IDENTITY_REJECT = frozenset({"bit", "little", "lot", "tad", "wee", "fan", "lover", "sucker", "person", "human",
                              "mess", "part", "few", "couple", "lil"})
"""First words after "I'm a" that are not a role ("I'm a bit tired", "I'm a fan of …")."""

_IDENTITY_ADJECTIVES = frozenset({"vegan", "vegetarian", "pescatarian", "left-handed", "right-handed", "married",
                                  "single", "divorced", "widowed", "retired", "introverted", "extroverted",
                                  "extraverted", "bilingual", "trilingual", "engaged", "unemployed", "self-employed"})
"""Durable words "I'm X" (no article) may carry; other bare "I'm X" are passing states and are skipped."""

_NAME_REJECT = frozenset({"I", "Not", "Just", "Also", "Really", "Actually", "Maybe", "The", "A", "An", "Nobody",
                          "Anything", "Whatever", "Later", "Back", "Please", "Sorry", "Ok", "Okay", "Yes", "No"})
_LOWERCASE_NAME_REJECT = frozenset({"not", "unimportant", "secret", "irrelevant", "unknown", "nothing", "nobody",
                                    "anything", "whatever", "private", "classified", "weird", "long", "short",
                                    "hard", "complicated", "boring", "cursed", "a", "the", "my", "your", "still"})

_BOUNDARY_REJECT = frozenset({"problem", "problems", "worries", "worry", "way", "thanks", "thank", "one", "stop",
                              "wait", "more", "no", "please", "idea", "clue", "kidding", "doubt", "matter", "need",
                              "offense", "offence", "pressure", "rush", "hurry", "sweat", "biggie", "deal", "shit",
                              "joke", "chance", "fair", "don't", "dont", "don't!", "thank you", "wait"})

# Stops end a value: "I love cats because …" -> "cats". The first word is never cut (no leading \s).
_STOP_COMMON = (r"\s*[;:]|\s+(?:-+|because|cause|cuz|coz|but|when|whenever|if|since|though|although|while|whereas"
                r"|so\s+much|a\s+lot|lots|more\s+than|as\s+well|too|either|lol|lmao|lmfao|rofl|haha\w*|hehe\w*"
                r"|xd|tbh|btw|ngl|irl|imo|honestly|for\s+real|right\s+now|at\s+the\s+moment|atm|today|tonight"
                r"|this\s+(?:morning|afternoon|evening|week|weekend)|for\s+now|these\s+days|lately|recently"
                r"|anymore|any\s+more|nowadays|and\s+stuff|and\s+things|and\s+all\s+that|or\s+something|i|i'm|im"
                r"|i've|i'd|i'll|with\s+all\s+my\s+heart|to\s+death|to\s+bits|the\s+most|especially|personally"
                r"|please|pls|plz|though|anyway|anyways|ok|okay|yeah|now|that|which|who|whom|whose|where)(?!\w)")
_STOP_PREF = re.compile(_STOP_COMMON, re.IGNORECASE)
_STOP_PREFER = re.compile(_STOP_COMMON + r"|\s+(?:over|to|than|rather|instead|vs\.?|versus)(?!\w)", re.IGNORECASE)
_STOP_IDENTITY = re.compile(_STOP_COMMON + r"|\s*,|\s+(?:at|in|on|from|for|with|near|by|and|or|so|here|there"
                            r"|like|named|called|working|living|who|and\s+a|and\s+an)(?!\w)", re.IGNORECASE)
_STOP_PLACE = re.compile(r"\s*[;:]|\s+(?:-+|because|cause|but|with|since|so|which|where|and\s+i|lol|lmao|haha\w*"
                         r"|tbh|btw|now|right\s+now|currently|though|i|i'm|im|i've|for\s+\d+\s+\w+|for\s+(?:a|many"
                         r"|several|some)\s+\w+)(?!\w)", re.IGNORECASE)
_STOP_BOUNDARY = re.compile(_STOP_COMMON + r"|\s+in\s+(?:the|this|our|my|a|any)\s+(?:story|stories|roleplay|rp"
                            r"|scene|scenes|chat|plot|narrative)(?!\w)", re.IGNORECASE)

_STORY_SUFFIX = re.compile(r"\s+in\s+(?:the|this|our|my|a|any)\s+(?:story|stories|roleplay|rp|scene|scenes|chat|plot"
                           r"|narrative)(?!\w)", re.IGNORECASE)

# ---------------------------------------------------------------------------------------------
# Text preparation.

_TRANSLATE = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "\u2032": "'", "\u201c": '"',
                            "\u201d": '"', "\u201e": '"', "\u00ab": '"', "\u00bb": '"', "\u00a0": " "})
_ACTION = re.compile(r"\*[^*\n]*\*?")
"""An *asterisk action*; an unclosed one runs to the end of its line."""
_OOC = re.compile(r"[(\[]\s*ooc\b[^)\]]*[)\]]?|\(\([^()]*\)\)|^[ \t]*ooc[ \t]*:[^\n]*", re.IGNORECASE | re.MULTILINE)
_BOUNDARY_CHARS = frozenset('"()[]{}')
_TITLE_PERIOD = re.compile(r"(?<!\w)(?:dr|mr|mrs|ms|mx|prof|st|jr|sr|mt|vs|etc)\.", re.IGNORECASE)
_SENTENCE = re.compile(r"(?:[^\n.!?]|[.!?](?!\s|$))+[.!?]*")
_CLAUSE_SPLIT = re.compile(
    r"(?:\s*,\s*|\s+)(?:but|and|although|though|while|whereas|because|since|so|plus|also|yet|or|then)\s+"
    r"(?=(?:i|i'm|im|i've|ive|i'd|my|maybe|probably|perhaps)(?!\w))"
    r"|\s*[,:]\s*(?=(?:i|i'm|im|i've|ive|my)\s)|\s+[-\u2013\u2014]+\s+|\s*\u2014\s*", re.IGNORECASE)
_TAG_QUESTION = re.compile(r"\s*,\s*(?:don't\s+you|dont\s+you|do\s+you|right|you\s+know|ya\s+know|y'know|huh"
                           r"|isn't\s+it|aren't\s+you|how\s+about\s+you|what\s+about\s+you|and\s+you|wbu|hbu"
                           r"|you|too)\s*[?!.]*\s*$", re.IGNORECASE)

_SEPARATORS = r"[\s,:;!.\-~]*"
_I_FOLLOWS = r"(?=\s+(?:that\s+)?(?:i|i'm|im|i've|ive|i'd|my|maybe|probably)(?!\w))"
_FILLER = re.compile(
    r"(?:ooc|o\.o\.c|oh\s+and|oh|ah|and|but|so|also|plus|well|honestly|actually|btw|by\s+the\s+way|anyway|anyways"
    r"|yeah|yes|yep|ok|okay|hi|hey|hello|um+|uh+|erm|hmm+|lol|lmao|haha\w*|hehe\w*|tbh|to\s+be\s+honest|fyi"
    r"|just\s+so\s+you\s+know|for\s+the\s+record|personally|irl|in\s+real\s+life|fun\s+fact|side\s+note"
    r"|though|ngl|not\s+gonna\s+lie|you\s+know|like|funnily\s+enough|for\s+what\s+it's\s+worth|out\s+of\s+character"
    r"|real\s+talk|seriously|truthfully|admittedly|basically|and\s+yeah)(?!\w)" + _SEPARATORS, re.IGNORECASE)
_HEDGE = re.compile(
    r"(?:(?:maybe|perhaps|probably|possibly|apparently|kinda|kind\s+of|sort\s+of|sorta|idk|i\s+dunno"
    r"|not\s+sure\s+but|i'm\s+not\s+sure\s+but|im\s+not\s+sure\s+but|i\s+am\s+not\s+sure\s+but)(?!\w)"
    r"|(?:i\s+think|i\s+guess|i\s+suppose|i\s+believe|i\s+reckon|i\s+feel\s+like|it\s+seems\s+like|it\s+seems"
    r"|seems\s+like|i\s+imagine)" + _I_FOLLOWS + r"(?:\s+that)?)" + _SEPARATORS, re.IGNORECASE)
_NEGATED_HEDGE = re.compile(
    r"(?:i\s+don't\s+think|i\s+dont\s+think|i\s+do\s+not\s+think|i'm\s+not\s+sure\s+(?:if|whether)"
    r"|im\s+not\s+sure\s+(?:if|whether)|i\s+am\s+not\s+sure\s+(?:if|whether)|not\s+sure\s+(?:if|whether)"
    r"|i\s+doubt|i\s+wouldn't\s+say|i\s+would\s+not\s+say|i\s+can't\s+say|i\s+cannot\s+say"
    r"|i\s+don't\s+know\s+if|i\s+dont\s+know\s+if|idk\s+if|i\s+wonder\s+if)(?!\w)", re.IGNORECASE)


def _prepare(text: str) -> tuple[str, str, list[tuple[int, int]]]:
    """(normalised text, boundary-masked text, OOC regions); all three share offsets with `text`."""
    norm = text.translate(_TRANSLATE)
    masked = [("\n" if ch in _BOUNDARY_CHARS else ch) for ch in norm]
    for m in _ACTION.finditer(norm):
        masked[m.start():m.end()] = "\n" * (m.end() - m.start())
    for m in _TITLE_PERIOD.finditer(norm):
        masked[m.end() - 1] = "\x00"
    regions = [(m.start(), m.end()) for m in _OOC.finditer(norm)]
    return norm, "".join(masked), regions


def _in_regions(position: int, starts: list[int], regions: list[tuple[int, int]]) -> bool:
    index = bisect.bisect_right(starts, position) - 1
    return index >= 0 and regions[index][0] <= position < regions[index][1]


@dataclass(slots=True)
class _Clause:
    """One clause being analysed: `body` with fillers and hedges stripped."""

    body: str
    hedged: bool
    ooc: bool
    transient: bool
    quote: str


def _strip_prefix(clause: str) -> tuple[str, bool, bool]:
    """(body, hedged, negated): leading fillers and hedges removed, one token at a time."""
    body, hedged = clause.strip(" ,;:-~'"), False
    while body:
        if _NEGATED_HEDGE.match(body):
            return "", hedged, True
        m = _HEDGE.match(body)
        if m and m.end():
            hedged, body = True, body[m.end():]
            continue
        m = _FILLER.match(body)
        if m and m.end():
            body = body[m.end():]
            continue
        break
    return body.strip(" ,;:-~'"), hedged, False


# ---------------------------------------------------------------------------------------------
# Values.

def _tidy_end(value: str) -> str:
    while value and not (value[-1].isalnum() or value[-1] in "+#%"):
        value = value[:-1]
    return value.strip()


def _cap_words(value: str) -> str:
    words = value.split()[:MAX_VALUE_WORDS]
    while words and words[-1].lower() in _DANGLING:
        words.pop()
    return " ".join(words)


def _cut(value: str, stops: re.Pattern[str]) -> str:
    value = value.strip(" ,;:-~'")
    m = stops.search(value)
    return value[:m.start()] if m else value


def _value(raw: str, stops: re.Pattern[str], *, comma: bool = True) -> str | None:
    """The value of a pattern: cut at the first stop (and comma), capped, tidied; None if unusable."""
    value = _cut(raw, stops)
    if comma:
        value = value.split(",", 1)[0]
    value = _cap_words(_tidy_end(value))
    if not value:
        return None
    words = [w.strip(".,!?'\"").lower() for w in value.split()]
    if any(w in _DEICTIC for w in words):
        return None
    return value


def _values(raw: str, stops: re.Pattern[str]) -> list[str]:
    """One value, or each item of a list ("cats, dogs, and horses" -> three values)."""
    cut = _cut(raw, stops)
    parts = [p.strip() for p in cut.split(",")]
    if len(parts) >= 2 and all(parts):
        last = parts[-1]
        m = re.match(r"(?:and|or|&)\s+(.+)$", last, re.IGNORECASE)
        if m:
            items = parts[:-1] + [m.group(1)]
        else:
            tail = re.split(r"\s+(?:and|or|&)\s+", last, maxsplit=1)
            items = parts[:-1] + tail if len(tail) == 2 else []
        if 2 <= len(items) <= 8 and all(len(item.split()) <= 4 for item in items):
            found = [v for v in (_value(item, stops) for item in items) if v]
            if found:
                return found
    value = _value(cut, stops)
    return [value] if value else []


_ARTICLE = re.compile(r"^(?:a|an|the)\s+", re.IGNORECASE)
_FIRST_PERSON_WORDS = {"my": "their", "mine": "theirs", "myself": "themselves", "me": "them"}


def _third_person(value: str) -> str:
    """Possessives turned to {{user}}'s side: "my cat" -> "their cat"."""
    def swap(m: re.Match[str]) -> str:
        word = m.group(0)
        new = _FIRST_PERSON_WORDS[word.lower()]
        return new.capitalize() if word[0].isupper() else new
    return re.sub(r"(?<!\w)(?:my|mine|myself|me)(?!\w)", swap, value, flags=re.IGNORECASE)


def _key_value(value: str) -> str:
    """Lowercase, whitespace-collapsed, leading article dropped, first-person possessives swapped."""
    text = " ".join(_third_person(value).lower().split())
    return _ARTICLE.sub("", text) or text


def _sensitive(value: str, *, self_description: bool = False) -> str | None:
    """The never-nominate category the value mentions, or None."""
    for category, pattern in _SENSITIVE:
        if pattern.search(value):
            return category
    if self_description and _SEXUALITY_IDENTITY.search(value):
        return "sexuality"
    return None


def _sentence_end(statement: str) -> str:
    statement = " ".join(statement.split()).rstrip(" .!?,;:")
    return statement + "."


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


_MATCHERS = (_name, _credentials, _location, _finances, _used_to, _boundary, _keep_it, _my_favourite, _fan,
             _prefer, _like, _health_etc, _identity, _is_my_favourite)


def _analyse(sentence: str, quote: str, ooc: bool) -> list[Candidate]:
    """Candidates of one sentence (its trailing punctuation included)."""
    text = " ".join(sentence.split())
    if text.endswith("?"):
        tag = _TAG_QUESTION.search(text)
        if not tag:
            return []  # a question ("do I like cats?") states nothing
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
        for matcher in _MATCHERS:
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


# ---------------------------------------------------------------------------------------------
# The optional model extractor.

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
