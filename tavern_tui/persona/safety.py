"""Provides the secret and prompt-injection scans that guard persona text.

Rule: seed 002 ADR-0079 decision 11. Every write surface refuses credential-shaped text before
storing it (`refuse_secrets`), with an error that names the kind and never echoes the secret.
Persona text is injection-scanned when loaded and each hit renders as `[BLOCKED]`
(`block_injections`). Belief nominations pass the same two scans. Pure: no I/O, no state.

The scans are heuristics tuned to refuse credential-shaped and model-hijacking text while
leaving ordinary roleplay prose alone. Every pattern runs in linear time: each unbounded run
starts at a keyword or a token boundary and is possessive (or bounded), so a long adversarial
input cannot make the engine backtrack.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import regex

from tavern_tui.errors import SecretRefused

__all__ = [
    "BLOCKED",
    "INJECTION_KINDS",
    "SECRET_KINDS",
    "Finding",
    "block_injections",
    "find_injections",
    "find_secrets",
    "refuse_secrets",
]

SECRET_KINDS = ("api_key", "bearer_token", "private_key", "password", "jwt")
"""Kinds `find_secrets` reports; `SecretRefused.kind` is one of them."""

INJECTION_KINDS = ("ignore_instructions", "role_tag", "system_override", "jailbreak_mode", "prompt_leak")
"""Kinds `find_injections` reports."""

BLOCKED = "[BLOCKED]"
"""What `block_injections` renders in place of each injection hit."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One hit of a scan: `text[start:end]` matched a pattern of class `kind`.

    Attributes:
        kind: a `SECRET_KINDS` or `INJECTION_KINDS` name.
        start, end: character offsets into the scanned text (end exclusive).
    """

    kind: str
    start: int
    end: int


_Check = Callable[[str, "regex.Match[str]"], "tuple[int, int] | None"]


@dataclass(frozen=True, slots=True)
class _Rule:
    kind: str
    pattern: regex.Pattern[str]
    check: _Check | None = None  # refines or rejects a raw match; None keeps the match span


def _scan(text: str, rules: Sequence[_Rule]) -> list[Finding]:
    hits: list[tuple[int, int, int, str]] = []
    for order, rule in enumerate(rules):
        for m in rule.pattern.finditer(text):
            span = rule.check(text, m) if rule.check is not None else m.span()
            if span is not None and span[1] > span[0]:
                hits.append((span[0], -span[1], order, rule.kind))
    # Earliest start wins, then the longest hit, so findings never overlap.
    hits.sort()
    findings: list[Finding] = []
    last_end = 0
    for start, neg_end, _order, kind in hits:
        if start >= last_end:
            findings.append(Finding(kind, start, -neg_end))
            last_end = -neg_end
    return findings


# --- secrets -------------------------------------------------------------------------------

_TOK = r"[A-Za-z0-9_-]"  # base64url / key alphabet
_HTTP_TOK = r"[A-Za-z0-9._~+/=-]"  # RFC 6750 token68 alphabet


def _long_token(cls: str, letters_only: str) -> str:
    # 20+ chars with a digit, or 32+ of anything: real keys have digits; long hyphenated prose does not.
    return rf"(?:(?={letters_only}*+[0-9]){cls}{{20,}}+|{cls}{{32,}}+)"


_API_KEY_RULES = [
    # OpenAI sk-/sk-proj-, Anthropic sk-ant-: one prefix, the body alphabet includes "-".
    rf"(?<![A-Za-z0-9_-])sk-{_long_token(_TOK, '[A-Za-z_-]')}",
    r"(?<![A-Za-z0-9])(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}(?![A-Za-z0-9])",
    r"(?<![A-Za-z0-9_])(?:gh[pousr]_[A-Za-z0-9]{30,}+|github_pat_[A-Za-z0-9_]{30,}+)",
    r"(?<![A-Za-z0-9])xox[abposr]-[A-Za-z0-9-]{10,}+",
    r"(?<![A-Za-z0-9_-])AIza[0-9A-Za-z_-]{30,}+",
    # Generic `api_key: <long token>`; the keyword is what makes a bare token a credential.
    r"(?<![A-Za-z0-9])(?i:api[_ -]?(?:key|secret|token)|apikey|access[_ -]?(?:token|key(?:[_ -]?id)?)"
    r"|secret[_ -]?(?:access[_ -]?)?key|client[_ -]?secret|auth[_ -]?token)(?![A-Za-z])"
    r"[\"']?[ \t]*+[:=][ \t]*+[\"']?[A-Za-z0-9_\-./+=]{16,}+",
]

_BEARER_RULES = [
    # An Authorization header is a credential whatever the token's length.
    r"(?<![A-Za-z0-9])(?i:(?:proxy-)?authorization)[\"']?[ \t]*+[:=][ \t]*+[\"']?"
    rf"(?i:bearer|token|basic)[ \t]++{_HTTP_TOK}{{3,}}+",
    # A bare "Bearer" needs a long token so "Bearer of bad news" stays prose.
    rf"(?<![A-Za-z0-9])(?i:bearer)[ \t]++{_long_token(_HTTP_TOK, '[A-Za-z._~+/=-]')}",
]

_PEM_BEGIN = regex.compile(r"-----BEGIN (?:[A-Z0-9]++ ){0,3}PRIVATE KEY(?: BLOCK)?-----", regex.IGNORECASE)
_PEM_END = regex.compile(r"-----END (?:[A-Z0-9]++ ){0,3}PRIVATE KEY(?: BLOCK)?-----", regex.IGNORECASE)
_ANY_BEGIN = regex.compile(r"-----BEGIN", regex.IGNORECASE)


def _private_key_span(text: str, m: regex.Match[str]) -> tuple[int, int]:
    # Extend to the END line, looking no further than the next BEGIN so the search stays linear.
    nxt = _ANY_BEGIN.search(text, m.end())
    end = _PEM_END.search(text, m.end(), nxt.start() if nxt else len(text))
    return m.start(), end.end() if end else m.end()


_PASSWORD = regex.compile(
    r"(?<![A-Za-z0-9])(?P<key>(?i:pass(?:word|wd|phrase|code)|pwd|pw|secret))(?![A-Za-z])"
    r"[\"']?[ \t]*+(?P<sep>[:=])[ \t]*+"
    # The value sits in a lookahead so a rejected candidate does not swallow the next keyword;
    # it is bounded so many candidates in a row stay linear.
    r"(?=(?P<val>\"[^\"\r\n]{1,200}+\"|'[^'\r\n]{1,200}+'|\S{1,200}+))"
)
# "my password is hunter2": the owner stating their own credential in a sentence.
_MY_PASSWORD = regex.compile(
    r"(?<![A-Za-z0-9])(?i:my)[ \t]++(?i:pass(?:word|wd|phrase|code)|pin|pw)[ \t]++(?i:is)[ \t]*+:?[ \t]*+"
    r"(?=(?P<val>\"[^\"\r\n]{1,200}+\"|'[^'\r\n]{1,200}+'|\S{1,200}+))"
)
_PROSE_STARTS = frozenset({
    "a", "an", "the", "too", "very", "not", "so", "quite", "really", "secret", "private", "weak", "strong", "long",
    "short", "hard", "easy", "safe", "stored", "saved", "written", "in", "on", "at", "my", "something", "always",
    "never", "still", "just", "different", "same", "expired", "wrong", "lost", "forgotten", "none", "nothing",
})
_URL_CREDENTIALS = regex.compile(
    r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}+://[^\s:/@]{1,100}+:[^\s:/@]{1,100}+@"
)
_LINE_REST = regex.compile(r"[ \t.,;:!?)\]}]*+(?:\r?\n|\Z)")
_PLACEHOLDERS = frozenset({"none", "null", "nil", "n/a", "na", "empty", "redacted", "hidden", "unknown", "tbd"})
_STRONG = regex.compile(r"[0-9@#$%^&*_+=~/\\|<>{}\[\]]")
_TRAILING = ".,;:!?)]}"


def _password_span(text: str, m: regex.Match[str]) -> tuple[int, int] | None:
    key, sep = m["key"].lower(), m["sep"]
    vs, ve = m.span("val")
    val = text[vs:ve]
    quoted = len(val) >= 3 and val[0] in "\"'" and val[-1] == val[0]
    if not quoted:
        val = val.rstrip(_TRAILING)
        ve = vs + len(val)
    core = val.strip("\"'")
    if not core or (len(core) <= 10 and (core.lower() in _PLACEHOLDERS or set(core) <= set("*xX•"))):
        return None
    strong = _STRONG.search(core) is not None
    if key == "secret":
        # "Secret: she is the lost princess" is a roleplay field, so a secret needs a password-like value.
        ok = sep == "=" or (strong and len(core) >= 6)
    else:
        # "password: swordfish" alone on its line is a credential; "password: I forgot it" is prose.
        ok = sep == "=" or quoted or strong or _LINE_REST.match(text, ve) is not None
    return (m.start(), ve) if ok else None


def _my_password_span(text: str, m: regex.Match[str]) -> tuple[int, int] | None:
    vs, ve = m.span("val")
    val = text[vs:ve]
    quoted = len(val) >= 3 and val[0] in "\"'" and val[-1] == val[0]
    core = val.strip("\"'") if quoted else val.rstrip(_TRAILING)
    # "my password is too weak" is prose; "my password is hunter2!" is the password.
    if not core or (not quoted and core.lower() in _PROSE_STARTS):
        return None
    return m.start(), vs + len(val if quoted else core)


_SECRET_RULES: tuple[_Rule, ...] = (
    *(_Rule("api_key", regex.compile(p)) for p in _API_KEY_RULES),
    *(_Rule("bearer_token", regex.compile(p)) for p in _BEARER_RULES),
    _Rule("private_key", _PEM_BEGIN, _private_key_span),
    _Rule("password", _PASSWORD, _password_span),
    _Rule("password", _MY_PASSWORD, _my_password_span),
    _Rule("password", _URL_CREDENTIALS),
    _Rule("jwt", regex.compile(rf"(?<![A-Za-z0-9_-])eyJ{_TOK}{{7,}}+\.{_TOK}{{7,}}+\.{_TOK}*+")),
)


def find_secrets(text: str, kinds: Collection[str] | None = None) -> list[Finding]:
    """Credential-shaped spans of `text`, in text order and non-overlapping (only the rules of
    `kinds` when given: a chat message is scanned without "password", whose rule would otherwise
    take `password: sk-…` as a password and hide the key).

    Each `Finding.kind` is one of `SECRET_KINDS`: "api_key" (OpenAI/Anthropic `sk-`, AWS `AKIA`,
    GitHub `ghp_`/`github_pat_`, Slack `xox?-`, Google `AIza`, `api_key: <long token>`),
    "bearer_token" (`Authorization: Bearer …`, `Bearer <long token>`), "private_key" (a PEM
    `BEGIN … PRIVATE KEY` block), "password" (`password: value`/`pwd=value`/`secret: value`,
    `scheme://user:pass@`), "jwt" (three base64url segments, the first starting `eyJ`).
    Rule: seed 002 ADR-0079 decision 11. Raises nothing.
    """
    if kinds is None:
        return _scan(text, _SECRET_RULES)
    return _scan(text, tuple(rule for rule in _SECRET_RULES if rule.kind in kinds))


def refuse_secrets(text: str, where: str) -> None:
    """Return None when `text` holds nothing credential-shaped; the write surface may store it.

    `where` names the write surface or field ("persona entry", "affirm", …) for the message.
    Rule: seed 002 ADR-0079 decision 11 (refuse before storing).

    Raises:
        SecretRefused: for the first finding of `find_secrets`; the message names its kind and
            `where` and never contains the secret text.
    """
    findings = find_secrets(text)
    if findings:
        raise SecretRefused(findings[0].kind, where)


# --- injections ----------------------------------------------------------------------------

_SP = r"[\s\u200b\u200c\u200d\u2060\ufeff]++"  # whitespace, including zero-width padding
_VERB = r"(?:ignore|disregard|forget|override|bypass|discard)"
_QUAL = (r"(?:all|any|every|each|of|the|your|these|those|previous|previously|prior|above|earlier|preceding"
         r"|foregoing|former|original|initial|system|developer|safety|existing|current|old|given)")
# At least one of these must qualify the noun: "ignore the instructions on the box" stays prose.
_STRONG_QUAL = (r"(?:all|any|every|your|these|previous|previously|prior|above|earlier|preceding|foregoing"
                r"|former|original|initial|system|developer|safety|existing|old)")
_POSITIONAL_QUAL = (r"(?:your|previous|previously|prior|above|earlier|preceding|foregoing|former|original"
                    r"|initial|system|developer|safety|existing|old)")
# Nouns that only mean a model's instructions, and generic ones that need a positional qualifier.
_MODEL_NOUN = r"(?:instructions?|directives?|prompts?|guidelines|programming)"
_GENERIC_NOUN = r"(?:rules|directions|commands|constraints|restrictions|context|messages|conversation|text)"
_APOS = r"['\u2019]"

_INJECTION_PATTERNS: tuple[tuple[str, str], ...] = (
    ("ignore_instructions",
     rf"\b{_VERB}{_SP}(?:{_QUAL}{_SP}){{0,3}}{_STRONG_QUAL}{_SP}(?:{_QUAL}{_SP}){{0,3}}{_MODEL_NOUN}\b"),
    ("ignore_instructions",
     rf"\b{_VERB}{_SP}(?:{_QUAL}{_SP}){{0,3}}{_POSITIONAL_QUAL}{_SP}(?:{_QUAL}{_SP}){{0,3}}{_GENERIC_NOUN}\b"),
    # "ignore the above", "disregard all of the text above"
    ("ignore_instructions",
     rf"\b{_VERB}{_SP}(?:all{_SP}(?:of{_SP})?)?(?:(?:the|everything|anything){_SP}"
     rf"(?:(?:text|messages?|prompt|content|conversation){_SP})?)?above\b"),
    # "forget everything above", "forget all you were told", "forget everything so far"
    ("ignore_instructions",
     rf"\b{_VERB}{_SP}(?:about{_SP})?(?:everything|anything|all)(?:{_SP}(?:that|of{_SP}(?:that|this|it)))?{_SP}"
     rf"(?:above|earlier|previously|so{_SP}far|up{_SP}(?:to|until){_SP}(?:now|here|this{_SP}point)"
     rf"|(?:before|prior{_SP}to){_SP}(?:this|now|these)"
     rf"|you(?:{_APOS}ve|{_SP}have|{_SP}were|{_SP}was|{_SP}are)?{_SP}(?:been{_SP})?"
     rf"(?:told|taught|instructed|given|programmed|trained))\b"),
    # Chat-template tokens and fake role markers.
    ("role_tag", r"<[|\uff5c][A-Za-z_\u2581 ]{1,40}+[|\uff5c]>(?:[ \t]*+(?:system|user|assistant|developer)\b)?"),
    ("role_tag", r"<[ \t]*+/?[ \t]*+(?:system|assistant|user|developer|sys|s|im_start|im_end|instructions?)[ \t]*+>"),
    ("role_tag",
     rf"\[[ \t]*+/?[ \t]*+(?:system|sys|inst|assistant)(?:{_SP}(?:note|message|prompt|instructions?|override))?"
     r"[ \t]*+[\]:]"),
    ("role_tag", r"<<[ \t]*+/?[ \t]*+SYS[ \t]*+>>"),
    ("role_tag",
     r"(?m)^[ \t]*+#{1,6}+[ \t]*+(?:system|assistant|user|human|developer|instructions?|response)[ \t]*+(?::|$)"),
    ("role_tag", r"(?m)^[ \t]*+(?-i:SYSTEM|ASSISTANT)[ \t]*+:"),
    ("system_override",
     rf"\b(?:new|updated|revised|real|actual|true|override|secret|hidden){_SP}(?:system{_SP})?"
     r"(?:instructions?|directives?|prompt)[ \t]*+:"),
    ("system_override", rf"\bsystem{_SP}(?:override|update|alert|notice|message|prompt|instructions?|command)[ \t]*+:"),
    ("system_override", rf"\b(?:admin|administrator|developer|root|sudo|system){_SP}override\b"),
    ("system_override",
     rf"\b(?:admin|administrator|developer|root|sudo){_SP}(?:command|instructions?|message)[ \t]*+:"),
    ("system_override", rf"\bend{_SP}of{_SP}(?:the{_SP})?(?:system{_SP}prompt|(?:system{_SP})?instructions)\b"),
    ("jailbreak_mode",
     rf"\byou{_SP}are{_SP}now{_SP}(?:in{_SP})?(?:an?{_SP}|the{_SP})?"
     rf"(?:(?:(?-i:DAN)|jailbroken|unrestricted|unfiltered|uncensored|unlocked)(?:{_SP}mode)?"
     rf"|(?:developer|dev|god|jailbreak|evil|debug|admin|sudo|root|maintenance){_SP}mode)\b"),
    ("jailbreak_mode",
     rf"\b(?:enable|enter|activate|engage|unlock|switch{_SP}(?:to|into)|turn{_SP}on|go{_SP}into){_SP}(?:the{_SP})?"
     rf"(?:developer|dev|god|jailbreak|(?-i:DAN)|unrestricted|unfiltered|uncensored|debug|admin|sudo|root){_SP}mode\b"),
    ("jailbreak_mode",
     rf"\b(?:developer|dev|jailbreak|(?-i:DAN)|god|unrestricted|unfiltered|uncensored|debug){_SP}mode{_SP}"
     rf"(?:is{_SP})?(?:now{_SP})?(?:enabled|activated|on|engaged|unlocked)\b"),
    ("jailbreak_mode", rf"\bdo{_SP}anything{_SP}now\b"),
    ("jailbreak_mode",
     rf"\b(?:(?:pretend|act|behave|respond){_SP}(?:as{_SP}if{_SP}|like{_SP}|that{_SP})?you|you{_SP}now)"
     rf"{_SP}(?:have|had){_SP}no{_SP}(?:restrictions|filters|limits|limitations|guidelines|boundaries"
     rf"|content{_SP}polic(?:y|ies)|ethical{_SP}guidelines)\b"),
    ("prompt_leak",
     rf"\b(?:reveal|print|show|display|output|repeat|recite|leak|dump|disclose|expose|share|paste|list"
     rf"|tell{_SP}me|give{_SP}me|write{_SP}out|spell{_SP}out){_SP}"
     rf"(?:(?:me|us|all|the|your|its|of|full|entire|complete|exact|whole|verbatim|current){_SP}){{0,4}}"
     rf"(?:system{_SP}(?:prompt|message|instructions?)|(?:initial|original|hidden|secret){_SP}(?:prompt|instructions)"
     rf"|pre-?prompt|(?:prompt|instructions){_SP}(?:above|you{_SP}(?:were{_SP}given|received|got))"
     rf"|(?:words|text|everything){_SP}above)\b"),
    ("prompt_leak",
     rf"\bwhat{_SP}(?:is|are|was|were){_SP}your{_SP}(?:system{_SP}prompt"
     rf"|(?:initial|original|hidden|secret|system){_SP}(?:prompt|instructions))\b"),
)

_INJECTION_RULES: tuple[_Rule, ...] = tuple(
    _Rule(kind, regex.compile(p, regex.IGNORECASE)) for kind, p in _INJECTION_PATTERNS
)


def find_injections(text: str) -> list[Finding]:
    """Prompt-injection spans of `text`, in text order and non-overlapping.

    Each `Finding.kind` is one of `INJECTION_KINDS`: "ignore_instructions" ("ignore all previous
    instructions", "forget everything above"), "role_tag" (`<|im_start|>system`, `[INST]`, `</s>`,
    `<system>`, `### System:` at a line start), "system_override" ("new instructions:", "system
    override"), "jailbreak_mode" ("you are now in developer mode", DAN), "prompt_leak" ("reveal your
    system prompt"). Case-insensitive. Rule: seed 002 ADR-0079 decision 11. Raises nothing.
    """
    return _scan(text, _INJECTION_RULES)


def block_injections(text: str) -> tuple[str, list[Finding]]:
    """`text` with each `find_injections` hit replaced by `[BLOCKED]`, and the findings.

    Everything outside the hits is kept byte for byte; clean text comes back unchanged (the same
    string). Finding offsets refer to the input `text`, not the result.
    Rule: seed 002 ADR-0079 decision 11 (scan persona text when loaded). Raises nothing.
    """
    findings = find_injections(text)
    if not findings:
        return text, findings
    parts: list[str] = []
    pos = 0
    for f in findings:
        parts.append(text[pos:f.start])
        parts.append(BLOCKED)
        pos = f.end
    parts.append(text[pos:])
    return "".join(parts), findings
