"""Provides `analyse_regex`: what FastIndex can know about a regex key before running it.

Rule: a `/pattern/flags` key is tested as SillyTavern 1.18 tests it (`new RegExp(pattern,
flags).test(buffer)`, format-digest §b.5.2), translated by `jsregex`. From the translation,
parsed with `re._parser`, this module derives (see `RegexPlan`): a required literal (or
alternatives) for the Aho-Corasick prefilter, the scope a match must lie in (atom, piece, line
or the whole text) so results can be cached per unit, and a relaxed pattern without the
`\\b`/`\\B` assertions that is searched first. Every derivation only ever widens what may
match, so the answer stays the reference's (tests/lore/test_fastindex.py checks them by brute
force). Pure and memoized; never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import regex

from tavern_tui.lore.jsregex import translate_js_regex
from tavern_tui.lore.matching import RegexKey
from tavern_tui.lore.regex_fastplan import fast_tree

try:  # Python 3.11+: the pure-Python parser behind `re` (sre_parse is a deprecated alias of it).
    import re._constants as _sre
    import re._parser as _sre_parse
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_constants as _sre  # type: ignore[no-redef]
    import sre_parse as _sre_parse  # type: ignore[no-redef]

SEPARATOR = "\x01"
"""What buffer.py puts before every piece of a scan buffer (SillyTavern's MATCHER)."""
NEWLINE = "\n"
FOLDS_ONTO_ASCII = {"İ": "i", "ı": "i", "ſ": "s"}
"""The non-ASCII characters `regex` IGNORECASE matches against an ASCII pattern letter although
`str.lower()` does not turn them into it (pattern `i` matches `İ`, `I` matches `ı`, `s`/`S` match
`ſ`), and the letter each stands for. The tests re-derive this by brute force over all code points."""
FOLD_FIX = str.maketrans(FOLDS_ONTO_ASCII)
_LITERAL_STOP = re.compile(r"[\n\x01]")
# Characters a folded literal may hold: ASCII and Latin-1/Extended-A letters, whose `regex`
# IGNORECASE classes all lower-case (after `FOLD_FIX`) to one character; not ß, which `regex`'s
# newer Unicode tables also match against U+1DF95 (the tests check all of this by brute force).
FOLDED_LITERAL_STOP = re.compile(r"[^\x00-\x7f\xc0-\u017f]|[\n\x01\xdf]")
MIN_LITERAL = 3
"""Shortest ASCII literal worth a prefilter (one character less with a non-ASCII one, e.g. two
CJK characters): shorter ones occur almost everywhere and flood the automaton."""

# -- regex analysis -----------------------------------------------------------------------------

ATOM, PIECE, LINE, TEXT = "atom", "piece", "line", "text"
"""Scopes of a regex key: the units of the text a match must lie in (see `RegexPlan.scope`)."""


@dataclass(frozen=True)
class RegexPlan:
    """What FastIndex knows about one regex key.

    Attributes:
        required: alternatives of which every match contains at least one (lower-cased when
            `folded`), or None if no safe literal was found.
        folded: the literals are looked up case-insensitively (the key has the `i` flag).
        scope: where a match must lie, so results can be cached per unit string: ATOM (no
            element can consume `\\n` or `\\x01`: units split at both), PIECE (none can consume
            `\\x01`: `text.split("\\x01")`), LINE (none can consume `\\n`: `text.split("\\n")`),
            TEXT (anything else, every anchored or sticky pattern: the whole text).
        relaxed: the translation without its `\\b`/`\\B` assertions, or None. It matches
            wherever the key does (dropping a zero-width assertion that is not inside a negative
            lookaround only widens a pattern) and runs ~5-20x faster in `regex`, whose literal and
            class scans a leading boundary assertion defeats; searched first.
    """

    required: frozenset[str] | None
    folded: bool
    scope: str
    relaxed: str | None = None


def analyse_regex(rx: RegexKey) -> RegexPlan:
    """Derive the prefilter literal and the scope of a parsed regex key (see `RegexPlan`).

    Works on the Python translation (`rx.pattern`, not compiled) parsed by `re._parser`; a pattern it
    cannot parse (e.g. `\\p{…}` under `u`) gets no literal and TEXT scope, which is always safe.
    Memoized on the translation and flags, so rebuilding an index for an edited book is cheap.
    Never raises.
    """
    flags = rx.py_flags
    return _analyse(rx.pattern, bool(flags & _IGNORECASE), bool(flags & _FULLCASE), rx.sticky)


@lru_cache(maxsize=1 << 14)
def _analyse(pattern: str, folded: bool, fullcase: bool, sticky: bool) -> RegexPlan:
    if folded and fullcase:
        return RegexPlan(None, True, TEXT)  # multi-character folds: literals would not be safe
    # jsregex spells \b and \B as ASCII-scoped boundaries, or under `iu` as long lookaround
    # groups. They consume nothing and hold no literal, so an empty group stands in for them (and
    # `_reach` need not read them as anchors): in `stripped`, the relaxed pattern. The tree is
    # read from `bare`, where they are left out unless a quantifier follows one (the parser
    # unpacks an empty group to nothing otherwise: the same tree, fewer tokens to read). The
    # spelling cannot come from anything else: jsregex escapes a literal "(" as \x28.
    stripped = bare = pattern
    for spelled in _BOUNDARIES:
        if spelled in pattern:
            stripped = stripped.replace(spelled, "(?:)")
            bare = bare.replace(spelled, "(?:)" if any(spelled + q in pattern for q in "*+?{") else "")
    tree = fast_tree(bare)  # the usual simple translation, without `re._parser`
    if tree is None:
        try:
            tree = list(_sre_parse.parse(bare))
        except Exception:  # noqa: BLE001 - any parse failure only means "no shortcut"
            return RegexPlan(None, folded, TEXT)
    required = _best(_requirements(tree, folded))
    # (only `(?!` and `(?<!` make negative lookarounds: the walk is needed only if one is written)
    relaxed = stripped if stripped != pattern and not (
        ("(?!" in stripped or "(?<!" in stripped) and _has_negative_lookaround(tree)) else None
    scope = TEXT if sticky else {0: ATOM, _NL: PIECE, _SEP: LINE}.get(_reach(tree), TEXT)
    return RegexPlan(required, folded, scope, relaxed)


def _has_negative_lookaround(items: list) -> bool:
    for op, av in items:
        if op is _sre.ASSERT_NOT:
            return True
        children = (av[3],) if op is _sre.SUBPATTERN else (av[2],) if op in _REPEATS else \
            tuple(av[1]) if op is _sre.BRANCH else (av[1],) if op is _sre.ASSERT else \
            (av,) if _ATOMIC is not None and op is _ATOMIC else ()
        if any(_has_negative_lookaround(list(child)) for child in children):
            return True
    return False


@lru_cache(maxsize=1 << 14)
def compile_relaxed(pattern: str, flags: int) -> regex.Pattern[str] | None:
    try:
        return regex.compile(pattern, flags)
    except (regex.error, OverflowError, RecursionError):
        return None


_IGNORECASE, _FULLCASE = int(regex.IGNORECASE), int(regex.FULLCASE)  # int tests: Flag.__and__ is Python code
_BOUNDARIES = tuple(dict.fromkeys(translate_js_regex(b, flags).text
                                  for b in ("\\b", "\\B") for flags in ("", "iu")))
_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT} | (
    {_sre.POSSESSIVE_REPEAT} if hasattr(_sre, "POSSESSIVE_REPEAT") else set())
_ATOMIC = getattr(_sre, "ATOMIC_GROUP", None)
_SEP, _NL, _ALL = 1, 2, 3  # may consume \x01, may consume \n, both (also: anchored or not understood)
_SEP_CODE, _NL_CODE = ord(SEPARATOR), ord(NEWLINE)


def _reach(items: list) -> int:
    """Which separators some element of `items` (lookaround bodies included) may consume, as
    `_SEP | _NL`; `_ALL` for anchors and anything not understood.

    A pattern that can neither consume `c` nor anchor has every match, and whatever its
    lookarounds inspect, between two `c` characters or text ends: a match of that unit alone.
    Both separators are control characters without case variants, so IGNORECASE cannot add
    them to a literal or a class (checked by the tests)."""
    reach = 0
    for op, av in items:
        if op is _sre.LITERAL:
            reach |= _SEP if av == _SEP_CODE else _NL if av == _NL_CODE else 0
        elif op is _sre.NOT_LITERAL:
            reach |= _NL if av == _SEP_CODE else _SEP if av == _NL_CODE else _ALL
        elif op is _sre.IN:
            reach |= _class_reach(av)
        elif op is _sre.SUBPATTERN:
            reach |= _reach(list(av[3]))
        elif op in _REPEATS:
            reach |= _reach(list(av[2]))
        elif op is _sre.BRANCH:
            for branch in av[1]:
                reach |= _reach(list(branch))
        elif op in (_sre.ASSERT, _sre.ASSERT_NOT):
            reach |= _reach(list(av[1]))
        elif op is _sre.GROUPREF:
            continue  # repeats a group's text, which is accounted for where the group is
        elif _ATOMIC is not None and op is _ATOMIC:
            reach |= _reach(list(av))
        else:  # ANY, AT (\A, \Z), CATEGORY, GROUPREF_EXISTS, anything new: assume the worst
            return _ALL
        if reach == _ALL:
            return _ALL
    return reach


def _class_reach(items: list) -> int:
    """Which separators the character class `items` may match."""
    negated = False
    listed = 0
    for op, av in items:
        if op is _sre.NEGATE:  # always first
            negated = True
        elif op is _sre.LITERAL:
            listed |= _SEP if av == _SEP_CODE else _NL if av == _NL_CODE else 0
        elif op is _sre.RANGE:
            listed |= (_SEP if av[0] <= _SEP_CODE <= av[1] else 0) | (_NL if av[0] <= _NL_CODE <= av[1] else 0)
        elif not negated:
            return _ALL  # CATEGORY etc. in a plain class might hold either
    # […] matches what is listed; [^…] what is not (an unknown item there only shrinks it).
    return _ALL & ~listed if negated else listed


def _requirements(items: list, folded: bool) -> list[frozenset[str]]:
    """Requirements (sets of alternative literals) that every match of the sequence `items` meets.

    Runs of consecutive literals; what a group or a repeat of at least one holds; for an
    alternation, the union of each branch's best requirement if every branch has one. Nothing
    is taken from optional parts, lookarounds, classes or backreferences."""
    found: list[frozenset[str]] = []
    run: list[str] = []
    for op, av in items:
        if op is _sre.LITERAL:
            run.append(chr(av))
            continue
        if run:
            found.append(frozenset(["".join(run)]))
            run = []
        if op is _sre.SUBPATTERN:
            if not ((av[1] or 0) | (av[2] or 0)) & _sre.SRE_FLAG_IGNORECASE:  # jsregex never scopes i
                found.extend(_requirements(list(av[3]), folded))
        elif op in _REPEATS:
            if av[0] >= 1:
                found.extend(_requirements(list(av[2]), folded))
        elif op is _sre.BRANCH:
            options = [_best(_requirements(list(branch), folded)) for branch in av[1]]
            if all(option is not None for option in options):
                found.append(frozenset().union(*options))  # type: ignore[arg-type]
        elif _ATOMIC is not None and op is _ATOMIC:
            found.extend(_requirements(list(av), folded))
    if run:
        found.append(frozenset(["".join(run)]))
    return [r for r in (_usable(req, folded) for req in found) if r is not None]


def _usable(alternatives: frozenset[str], folded: bool) -> frozenset[str] | None:
    """Shrink each alternative to its longest part the prefilter can look for; None if one has
    no part long enough (`MIN_LITERAL`).

    A part of a required literal is required too. Parts stop at `\\n` and `\\x01` (where the text
    is cut into atoms) and, when folded, at characters whose `regex` case folding is not
    `str.lower`'s (`FOLDED_LITERAL_STOP`)."""
    out = []
    for literal in alternatives:
        # The longest part long enough for its kind ("lä" from "fußlä" under `i`, not "fu").
        parts = [part for part in (FOLDED_LITERAL_STOP if folded else _LITERAL_STOP).split(literal)
                 if len(part) >= (MIN_LITERAL if part.isascii() else MIN_LITERAL - 1)]
        if not parts:
            return None
        best = max(parts, key=len)
        out.append(best.translate(FOLD_FIX).lower() if folded else best)
    return frozenset(out)


def _best(requirements: list[frozenset[str]]) -> frozenset[str] | None:
    """The most selective requirement: the longest shortest alternative, then the fewest."""
    if not requirements:
        return None
    return max(requirements, key=lambda r: (min(map(len, r)), -len(r)))
