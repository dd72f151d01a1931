"""Provides `Candidate`, the belief categories, and the English lexicons, text preparation and
value helpers the belief extractors are built from.

Rules: seed 002 (ADR-0079) decision 6 and DESIGN.md "Persona and nominations": the categories a
belief may be nominated from and the never-nominate ones (always sensitivity "high"), and the
words the deterministic extractor (`extract`) reads first-person statements with. Text
preparation normalises curly quotes, masks *asterisk actions* and finds `(OOC: …)` / `[OOC: …]`
regions; the model extractor (`model_extract`) normalises quotes and skips actions the same way.

Pure: no database, no network. Every pattern is anchored or uses disjoint classes.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

CATEGORIES = ("name", "preference", "dislike", "identity", "boundary", "story")
"""Categories a belief may be nominated from (subject to seed 002 decision 6's other rules)."""

NEVER_NOMINATE_CATEGORIES = ("health", "sexuality", "religion", "politics", "credentials", "location", "finances")
"""Categories that are stored but never nominated (seed 002 decision 6); always sensitivity "high"."""

ALL_CATEGORIES = CATEGORIES + NEVER_NOMINATE_CATEGORIES

CATEGORY_SENSITIVITY = {"name": "low", "preference": "low", "dislike": "low", "story": "low",
                        "identity": "normal", "boundary": "normal",
                        **{category: "high" for category in NEVER_NOMINATE_CATEGORIES}}
"""The sensitivity each category carries."""

MAX_VALUE_WORDS = 6
"""Words kept of a belief's value ("I love X": X); longer values are cut and dangling words trimmed."""

HEDGED_CONFIDENCE = 0.45
"""Confidence of a hedged statement ("maybe I'm a morning person"); hypotheses never exceed 0.5."""


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
                              "joke", "chance", "fair", "don't", "dont", "don't!", "thank you"})

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
