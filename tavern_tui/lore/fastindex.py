"""Provides `FastIndex`: a `KeyIndex` that answers exactly as `ReferenceIndex`, built for big books.

Rule: the answer is SillyTavern 1.18 `WorldInfoBuffer.matchKeys` for every key, as
`matching.ReferenceIndex` implements it (whole words with JS's ASCII `\\W`, `toLowerCase` folding,
multi-word keys as substring tests, `/regex/flags` keys on the raw buffer with a time limit).
How it gets there fast (performance-anchors §1.1, §5):

- Units and their cache. A scan buffer is `"\\x01" + pieces.join("\\n\\x01")` (buffer.py), and
  chat messages repeat from one generation step to the next. Cut the text at every `\\n` and
  `\\x01` into atoms: a plain key holding neither character matches the text iff it matches an
  atom, because every occurrence lies inside one atom and what an atom edge stands for (`\\n`,
  `\\x01` or a text end) is a `\\W` boundary either way. `str.lower()` commutes with the cut
  (its only context rule, final sigma, stops at `\\n` and `\\x01`, neither cased nor
  case-ignorable). So the facts about an atom string (plain keys and prefilter literals in it,
  regex results) are cached by the string itself and reused across calls and activations.
- Plain keys, per atom, lower-cased once with `str.lower()` as the reference lowers both sides:
  * whole-word keys made only of `[A-Za-z0-9_]`: a whole-word occurrence is exactly a maximal
    run of those characters equal to the key, so one set lookup per run finds them all;
  * all other keys go into two ahocorasick_rs automata (`scanners.Automaton`: folded and case-sensitive) searched with
    OVERLAPPING matches, so nested keys ("Jon" in "Jon Snow") all report; each occurrence of a
    whole-word key is checked for the reference's `(?:^|\\W)key(?:$|\\W)` with ASCII `\\W` on
    the same (folded or raw) text. Lengths that change under folding (`İ`) do not matter: no
    offset is mapped back to the original text.
- Regex keys are compiled by `matching.parse_regex_key`, exactly as the reference does. From the
  translated pattern (parsed with `re._parser`, `regex_plan.analyse_regex`) we derive:
  * a required literal, or alternatives one of which every match contains, fed to the automata
    as a prefilter: where none occurs, the regex cannot match and is not run. Under the `i` flag
    only ASCII and Latin-1/Extended-A letters are used (not ß), lower-cased and looked up in the
    lowered text, also after mapping `İ ı ſ` (which `regex` folds onto i, I, s;
    `FOLDS_ONTO_ASCII`) to those letters;
  * a scope: a pattern that can consume neither `\\n` nor `\\x01` (lookaround bodies included),
    has no `\\A`/`\\Z` anchor and is not sticky matches the text iff it matches an atom; one
    that avoids only `\\x01` is decided per `\\x01`-piece, one that avoids only `\\n` per line;
    anything else runs on the whole text as in the reference. `\\b` keeps the atom scope.
    Results are cached per unit string (or per whole text). The undecided units of a key are
    searched in one go, joined by a separator its scope cannot cross;
  * a relaxed pattern without the `\\b`/`\\B` assertions, a cheap necessary condition
    searched first (`RegexPlan.relaxed`), compiled once the key's own searches have covered
    `RELAX_AFTER` characters (compiling costs about that much). No match of the key starts
    before the leftmost relaxed match, so the key is then searched from there (`pos=`, which
    leaves the text before it in view of lookbehinds: the same search, shorter).
- Scan loops. The next loop's buffer is the last one + "\\n\\x01" + recursion text: its atoms
  and lines are the last buffer's and the rest's, so it is composed from the cached one (`_Text`)
  and only the rest is looked at for the keys the last buffer decided (PIECE and TEXT scopes,
  whose units do not compose so, are searched as usual). What a whole text was found to hold
  or not (`_Text.rx_true` / `rx_false`) is kept with it. Scan buffers never come back once the
  window moves on, so only the last few are kept; their messages stay cached as units.
- Priming (`prime`, from the app's warm-up when a chat opens): every entry content a recursion
  loop may add is cut into units ahead of time, and the ATOM-scope regex keys are decided in
  them in bulk (one pass per key over all its candidate units joined; only matches are
  recorded, a primed unit holds no other), so a step that first activates an entry neither
  scans its content nor searches it.
- Locating keys (`first_hits`): activation.py asks, for its fired entries' keys, which buffer
  piece holds each first (a piece is usually cached from the last step, verdicts included); the
  pieces of the last loop's buffer are skipped for plain and ATOM-scope keys it did not hold.
- Odd keys (an empty needle, a needle holding `\\n` or `\\x01`) are tested on the whole text
  the reference's way.

Timeouts: a search that exceeds `regex_timeout` is reported in `timed_out`, as by the reference,
and never cached; each key gets one search of at most `regex_timeout` per call (the relaxed
prefilter has a budget of its own). FastIndex searches less text than the reference (known
units, units without the literal), so a key the reference reports as timed out can come out
decided here (e.g. found in a remembered message); never the other way round for the same
search.

Not thread-safe: the caches are plain dicts (use one index per thread).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from itertools import accumulate
from operator import attrgetter

import regex

from tavern_tui.lore.matching import (
    DEFAULT_REGEX_TIMEOUT,
    CompiledKey,
    KeyHits,
    RegexKey,
    has_js_whitespace,
    parse_regex_key,
    whole_word_pattern,
)
from tavern_tui.lore.regex_plan import (
    ATOM,
    FOLD_FIX,
    FOLDS_ONTO_ASCII,
    LINE,
    NEWLINE,
    PIECE,
    SEPARATOR,
    TEXT,
    RegexPlan,
    analyse_regex,
    compile_relaxed,
)
from tavern_tui.lore.scanners import WORD_RUN, Automaton, WordKeys

_HAS_FOLD_EXCEPTION = re.compile(f"[{''.join(FOLDS_ONTO_ASCII)}]")
_NOTHING = KeyHits(frozenset())
_UNKNOWN = object()
_KEYS, _LITS = attrgetter("keys"), attrgetter("lits")
_PLUS_ONE = (1).__add__
RELAX_AFTER = 1500
"""Characters a regex key is searched with its own pattern before its relaxed pattern is
compiled (see `FastIndex._quick`)."""
_PRIME_RELAXED = 50_000  # `_prime_atom_regexes` passes over joined texts this long with the relaxed pattern
_LONG_TEXT = 2000  # texts at least this long are remembered as bases for composed texts
_LONG_KEPT = 6  # how many are kept: this step's scan buffers and the last step's


# -- the index ----------------------------------------------------------------------------------

@dataclass
class _Unit:
    """Facts about one unit string (an atom, a piece or a line), true wherever the string occurs:
    the plain keys found in it by the reference's rules, the prefilter literals present, and the
    regex keys already searched in it."""

    keys: frozenset[int]
    lits: frozenset[int]
    size: int
    candidates: frozenset[int] | None = None  # regex keys worth searching here (lazy)
    rx_true: set[int] = field(default_factory=set)
    rx_false: set[int] = field(default_factory=set)
    open: frozenset[int] | None = None  # undecided candidates (`FastIndex._open`; lazy, reset on change)
    primed: bool = False  # every primed ATOM-scope key is decided: matches in rx_true, none elsewhere


@dataclass
class _Text:
    """A whole text asked about recently: its atoms, the union of their facts, its pieces and
    lines (lazily, for PIECE/LINE-scope regexes) and the regex keys decided for it as a whole
    (`rx_true` / `rx_false`: found in this very text or not, any scope; never a timeout).

    A text that is a cached one (`base`) + `"\\n"` + more (the next scan loop's buffer: the last
    one plus this loop's recursion text) is `composed`: its atoms and lines are the base's plus
    those of the rest (`split` = where the rest starts), so the base's facts and verdicts carry
    over and only the rest is looked at for keys the base has decided."""

    atoms: dict[str, _Unit] | None  # ordered, each distinct atom once (None: not put together yet)
    keys: frozenset[int]
    lits: frozenset[int]
    size: int
    splits: dict[str, dict[str, _Unit]] = field(default_factory=dict)
    candidates: frozenset[int] | None = None  # regex keys worth searching in this text (lazy)
    rx_true: set[int] = field(default_factory=set)
    rx_false: set[int] = field(default_factory=set)
    open: frozenset[int] | None = None  # candidates in neither rx_true nor rx_false (lazy; reset on change)
    base: _Text | None = None
    split: int = 0
    rest_atoms: dict[str, _Unit] | None = None


def _atoms(text: str) -> list[str]:
    """`text` cut at every `\\n` and `\\x01`, in order (one C-level split)."""
    return text.replace(SEPARATOR, NEWLINE).split(NEWLINE) if SEPARATOR in text else text.split(NEWLINE)


class FastIndex:
    """A `KeyIndex` equal to `ReferenceIndex` (the contract): Aho-Corasick for plain keys,
    literal prefilters for regex keys, and results cached per message-sized unit of text (see
    the module docstring).

    Args:
        keys: the keys; ids must be unique.
        regex_timeout: seconds a regex key's search may take per `hits` call (`regex` module
            `timeout=`), as in `ReferenceIndex`.
        cache_chars: roughly how many characters of unit strings and whole texts keep their
            results; the least recently used go first.

    Attributes:
        plans: regex key id -> its `RegexPlan` (literal prefilter and scope), for diagnostics.

    Raises:
        ValueError: duplicate key ids.
    """

    def __init__(self, keys: Iterable[CompiledKey], *, regex_timeout: float = DEFAULT_REGEX_TIMEOUT,
                 cache_chars: int = 4_000_000) -> None:
        self.regex_timeout = regex_timeout
        self.cache_chars = cache_chars
        self.plans: dict[int, RegexPlan] = {}
        self._folded = Automaton()
        self._exact = Automaton()
        # Whole-word keys made only of JS \w characters: a whole-word occurrence is exactly a
        # maximal \w run equal to the needle, so a set lookup per run finds them (no automaton
        # matches for "a" inside every word).
        self._folded_words = WordKeys()
        self._exact_words = WordKeys()
        self._odd: dict[int, tuple[bool, str, re.Pattern[str] | None]] = {}
        self._regex: dict[int, RegexKey] = {}
        self._literal_ids: dict[tuple[bool, str], int] = {}
        lit_regexes: list[set[int]] = []  # literal id -> regex keys having it among their alternatives
        seen: set[int] = set()
        for key in keys:
            if key.key_id in seen:
                raise ValueError(f"duplicate key id {key.key_id}")
            seen.add(key.key_id)
            parsed = parse_regex_key(key.text)
            if parsed is not None:
                self._add_regex(key.key_id, parsed, lit_regexes)
                continue
            # Exactly the reference's `_Plain`: the needle, folding and the whole-word decision.
            folded = not key.case_sensitive
            needle = key.text.lower() if folded else key.text
            if key.whole_words and WORD_RUN.fullmatch(needle):  # (no whitespace in it: skip that test)
                (self._folded_words if folded else self._exact_words).add(needle, key.key_id)
                continue
            whole = key.whole_words and not has_js_whitespace(needle)
            if not needle or SEPARATOR in needle or NEWLINE in needle:
                self._odd[key.key_id] = (folded, needle, whole_word_pattern(needle) if whole else None)
                continue
            automaton = self._folded if folded else self._exact
            slot = automaton.add(needle)
            (automaton.whole if whole else automaton.any)[slot].append(key.key_id)
        self._folded.build()
        self._exact.build()
        self._folded_words.build()
        self._exact_words.build()
        self._lit_regexes = [frozenset(x) for x in lit_regexes]
        self._regex_ids = frozenset(self._regex)
        self._requires = {k: None if p.required is None else frozenset(
            self._literal_ids[(p.folded, literal)] for literal in p.required) for k, p in self.plans.items()}
        self._unfiltered = frozenset(k for k, p in self.plans.items() if p.required is None)
        self._scopes = {scope: frozenset(k for k, p in self.plans.items() if p.scope == scope)
                        for scope in (ATOM, PIECE, LINE, TEXT)}
        self._units: dict[str, _Unit] = {}
        self._prime_skipped: frozenset[int] = frozenset()  # ATOM keys `prime` could not decide (timeouts)
        self._primed_atoms: frozenset[int] = frozenset()  # the ATOM keys a primed unit has decided
        self._relaxed: dict[int, regex.Pattern[str] | None] = {}  # key id -> compiled relaxed pattern
        self._unrelaxed: dict[int, int] = {}  # key id -> characters searched before compiling it
        self._texts: dict[str, _Text] = {}
        self._long: list[str] = []  # the last long texts asked about, oldest first (`_composed`)
        self._cached_chars = 0

    def _add_regex(self, key_id: int, parsed: RegexKey, lit_regexes: list[set[int]]) -> None:
        self._regex[key_id] = parsed
        plan = self.plans[key_id] = analyse_regex(parsed)
        for literal in plan.required or ():
            lit = self._literal_ids.get((plan.folded, literal))
            if lit is None:
                lit = self._literal_ids[(plan.folded, literal)] = len(lit_regexes)
                lit_regexes.append(set())
                automaton = self._folded if plan.folded else self._exact
                automaton.lits[automaton.add(literal)].append(lit)
            lit_regexes[lit].add(key_id)

    # -- public ---------------------------------------------------------------------------------

    def hits(self, text: str, keys: Collection[int] | None = None) -> KeyHits:
        """See `matching.KeyIndex.hits`: equal to `ReferenceIndex(same keys).hits(text, keys)`.

        Only asked keys are reported, as by the reference. Never raises for a slow regex."""
        info = self._text(text)
        if keys is not None and len(keys) == 1:  # the activation locating one key: be quick
            (key_id,) = keys
            if key_id not in self._odd:
                plan = self.plans.get(key_id)
                if plan is None:
                    found: bool | None = key_id in info.keys
                else:
                    found = self._one_regex(text, info, key_id, plan)
                if self._cached_chars > self.cache_chars:
                    self._trim()
                return _NOTHING if found is False else KeyHits(frozenset(keys)) if found else KeyHits(
                    frozenset(), frozenset(keys))
        wanted: frozenset[int] | set[int] | None
        if keys is None or isinstance(keys, (set, frozenset)):
            wanted = keys  # type: ignore[assignment]
        else:
            wanted = frozenset(keys)
        found: set[int] = set()  # odd and regex keys (the plain ones are `info.keys`)
        if self._odd:
            self._odd_hits(text, wanted, found)
        timed_out: set[int] = set()
        if self._regex:
            self._regex_hits(text, info, wanted, found, timed_out)
        if self._cached_chars > self.cache_chars:
            self._trim()
        plain = info.keys if wanted is None else info.keys & wanted
        matched = plain.union(found) if found else plain  # one copy of a set that can be large
        if not matched and not timed_out:
            return _NOTHING
        return KeyHits(matched, frozenset(timed_out))

    def first_hits(self, texts: Iterable[str], keys: Collection[int], base: str | None = None,
                   base_pieces: int = 0) -> dict[int, int]:
        """For each key of `keys`, the position in `texts` of the first text it is found in (as
        `hits(text, keys)` finds it; a timed-out search counts as not found); keys found in no
        text are left out.

        The same answer as asking `hits` text by text for the keys not yet placed (each key's
        answer for a text does not depend on the other keys asked), without building a
        `KeyHits` per text: activation.py places each fired entry's key in a buffer piece so.

        `base`, `base_pieces`: the first `base_pieces` texts are `"\x01"` + pieces of `base`, a
        text asked about with `hits` before (a scan loop's buffer; the texts are the next loop's
        pieces). Every atom of such a text is an atom of `base`, so a plain or ATOM-scope regex
        key that `base` does not hold cannot be in them: those keys start at `base_pieces`.
        (A piece's lines need not be lines of `base`: other scopes are looked for everywhere.)"""
        remaining = set(keys)
        placed: dict[int, int] = {}
        regex_ids, odd = self._regex_ids, self._odd
        rx_left = remaining & regex_ids
        odd_left = {k for k in remaining if k in odd} if odd else set()
        head = remaining  # the keys looked for in the first `skip_to` texts
        skip_to = 0
        texts_seen = self._texts
        known = texts_seen.get(base) if base is not None and base_pieces > 0 else None
        if known is not None:
            atom_rx = rx_left & self._scopes[ATOM]
            absent = (remaining - regex_ids - odd_left - known.keys) | (atom_rx & known.rx_false) \
                | (atom_rx - self._candidates(known))
            if absent:
                head, skip_to = remaining - absent, base_pieces
        for position, text in enumerate(texts):
            if position < skip_to:
                if not head:
                    continue
                wanted, rx_wanted = head, rx_left & head
            else:
                if not remaining:
                    break
                wanted, rx_wanted = remaining, rx_left
            # A known piece (the common case) is read in place, not moved to the recent end: if
            # the cache fills up, a piece dropped early is rebuilt from its cached units (cheap).
            info = texts_seen.get(text)
            if info is None:
                info = self._text(text)
            # Most pieces hold none of the keys: test before building sets.
            found = None if wanted.isdisjoint(info.keys) else wanted.intersection(info.keys)
            if odd_left:
                found = found or set()
                self._odd_hits(text, odd_left, found)
            if rx_wanted:
                # A piece is usually the same string as in the previous step, so its verdicts
                # are kept with its cached text: only its undecided candidates are searched.
                if info.rx_true and not rx_wanted.isdisjoint(info.rx_true):
                    found = found or set()
                    found |= rx_wanted & info.rx_true
                undecided = info.open
                if undecided is None:
                    undecided = info.open = self._candidates(info) - info.rx_true - info.rx_false
                if not rx_wanted.isdisjoint(undecided):
                    found = found or set()
                    self._regex_hits(text, info, rx_wanted & undecided, found, set())  # keeps the verdicts
            if found:
                for key_id in found:
                    placed[key_id] = position
                remaining -= found
                rx_left -= found
                odd_left -= found
                if head is not remaining:
                    head = head - found
        if self._cached_chars > self.cache_chars:
            self._trim()
        return placed

    def prime(self, texts: Iterable[str]) -> int:
        """Work out ahead of time the unit facts (plain keys found, prefilter literals present,
        the ATOM-scope regex keys' verdicts) of texts a later scan will hold: a book's entry
        contents, which recursion adds to the buffer. A step that first activates an entry then
        finds its content's atoms decided instead of scanning and searching them inside the step
        (the app primes in its warm-up worker). Answers never change: only when work is done.

        Stops once the cache holds half of `cache_chars` (a step's own texts need the rest).

        Returns:
            How many of `texts` were primed.
        """
        limit = self.cache_chars // 2
        done = 0
        units: dict[str, _Unit] = {}
        for text in texts:
            if self._cached_chars > limit:
                break
            units.update(self._units_of(_atoms(text)))
            done += 1
        if self._regex:
            self._prime_atom_regexes(units)
        return done

    def _prime_atom_regexes(self, units: dict[str, _Unit]) -> None:
        """Decide the ATOM-scope regex keys in `units` in bulk (`prime`). Per key, one pass over
        its undecided candidate units joined by "\\n" (which the key cannot cross) finds the units
        holding a match of its relaxed pattern (a necessary condition), and only those are then
        searched alone; without a relaxed pattern, a unit holding a match of the key itself is
        decided by that. Only the matches are recorded: a primed unit (`_Unit.primed`) holds no
        match of a primed ATOM key outside its `rx_true`. A key that times out here is left to
        the steps (`_prime_skipped`)."""
        atom_ids = self._scopes[ATOM]
        everywhere = atom_ids & self._unfiltered  # candidates in every unit
        pending: dict[int, list[tuple[str, _Unit]]] = {}
        listed = list(units.items())
        for unit in listed:
            for key_id in (self._open(unit[1]) & atom_ids) - everywhere:
                pending.setdefault(key_id, []).append(unit)
        # Keys without a literal are candidates everywhere: searched in every unit joined once
        # (a unit that has decided such a key already is skipped below).
        shared: tuple[str, list[int]] = ("", [0])
        if everywhere and listed:
            for key_id in everywhere:
                pending[key_id] = listed
            shared = self._joined(listed)
        timeout = self.regex_timeout
        skipped = set(self._prime_skipped)
        for key_id, chosen in pending.items():
            text, starts = shared if chosen is listed else self._joined(chosen)
            own = self._regex[key_id].compiled
            # A long text (a key without a literal: every unit) is passed over with the cheaper
            # relaxed pattern; a short one (the units holding the key's literal, which the
            # relaxed pattern mostly matches too) with the key itself.
            pattern = self._quick(key_id, len(text)) or own if len(text) >= _PRIME_RELAXED else own
            try:
                # (finditer's matches do not overlap, but no match spans two units, so every
                # unit holding a match has one that starts in it)
                # (`concurrent`: the GIL is let go during the scan of a long text, so the app's
                # screen keeps answering while its warm-up worker primes)
                flagged = {bisect_right(starts, match.start()) - 1
                           for match in pattern.finditer(text, timeout=timeout, concurrent=True)}
            except TimeoutError:
                skipped.add(key_id)
                continue
            for position in flagged:
                string, info = chosen[position]
                if key_id in info.rx_true or key_id in info.rx_false:
                    continue  # decided before
                if pattern is not own:
                    try:
                        if own.search(string, timeout=timeout) is None:
                            info.rx_false.add(key_id)
                            continue
                    except TimeoutError:
                        skipped.add(key_id)  # (its verdicts so far stay: they are explicit)
                        continue
                info.rx_true.add(key_id)
        self._prime_skipped = frozenset(skipped)
        self._primed_atoms = atom_ids - self._prime_skipped
        for info in units.values():
            info.primed = True
            info.open = None

    def clear_cache(self) -> None:
        """Forget every cached unit and text (the automata stay built)."""
        self._units.clear()
        self._texts.clear()
        self._long.clear()
        self._cached_chars = 0

    # -- units ----------------------------------------------------------------------------------

    def _text(self, text: str) -> _Text:
        """The facts of a whole text, cached (an activation asks about one text many times)."""
        info = self._texts.pop(text, None)
        if info is None:
            info = self._composed(text)
            if info is None:
                atoms = self._units_of(_atoms(text))
                if len(atoms) == 1:
                    (unit,) = atoms.values()
                    keys, lits = unit.keys, unit.lits
                else:
                    keys = frozenset().union(*map(_KEYS, atoms.values()))
                    lits = frozenset().union(*map(_LITS, atoms.values()))
                info = _Text(atoms, keys, lits, len(text) + 100)
            self._cached_chars += info.size
            if len(text) >= _LONG_TEXT:  # a scan buffer: the next loop's may extend it
                self._long.append(text)
                if len(self._long) > _LONG_KEPT:
                    # Buffers do not come back in later steps (the window moves): forget them
                    # early (their messages and contents stay cached as units).
                    dropped = self._texts.pop(self._long.pop(0), None)
                    if dropped is not None:
                        self._cached_chars -= dropped.size
        self._texts[text] = info  # (re)inserted last: the most recently used
        return info

    def _composed(self, text: str) -> _Text | None:
        """`text` as a recently seen long text + "\n" + a rest, if it is one (see `_Text`)."""
        for base_text in reversed(self._long):
            cut = len(base_text)
            if cut < len(text) and text[cut] == NEWLINE and text.startswith(base_text):
                base = self._texts.get(base_text)
                if base is None:
                    continue
                # Cutting at that "\n": the atoms (and lines) of text are the base's, then the rest's.
                rest = self._units_of(_atoms(text[cut + 1:]))
                keys = base.keys.union(*map(_KEYS, rest.values()))
                lits = base.lits.union(*map(_LITS, rest.values()))
                # (its atoms, the base's and the rest's, are put together only if asked for)
                return _Text(None, keys, lits, len(text) + 100, base=base, split=cut + 1, rest_atoms=rest)
        return None

    def _units_of(self, strings: list[str]) -> dict[str, _Unit]:
        """The distinct strings with their facts, in order (a repeated unit is looked at once)."""
        units, out = self._units, {}
        for string in dict.fromkeys(strings):
            info = units.pop(string, None)  # `_unit` inlined for the known ones: the common case
            if info is None:
                info = self._unit(string)
            else:
                units[string] = info  # (re)inserted last: the most recently used
            out[string] = info
        return out

    def _unit(self, string: str) -> _Unit:
        info = self._units.pop(string, None)
        if info is None:
            if SEPARATOR in string or NEWLINE in string:
                # A piece or a line: the union of its atoms (no key or literal holds \n or \x01).
                parts = [self._unit(atom) for atom in dict.fromkeys(_atoms(string))]
                info = _Unit(frozenset().union(*(u.keys for u in parts)),
                             frozenset().union(*(u.lits for u in parts)), len(string) + 100)
            else:
                keys: set[int] = set()
                lits: set[int] = set()
                self._exact.scan(string, keys, lits)
                if self._exact_words:
                    self._exact_words.scan(string, keys)
                lowered = string.lower()
                if self._folded_words:
                    self._folded_words.scan(lowered, keys)
                if self._folded.ac is not None:
                    self._folded.scan(lowered, keys, lits)
                    if self._folded.has_lits and not string.isascii() and _HAS_FOLD_EXCEPTION.search(string):
                        # `regex` reads İ ı ſ as ASCII letters under IGNORECASE; str.lower does not.
                        self._folded.scan_literals(string.translate(FOLD_FIX).lower(), lits)
                info = _Unit(frozenset(keys), frozenset(lits), len(string) + 100)
            self._cached_chars += info.size
        self._units[string] = info  # (re)inserted last: the most recently used
        return info

    def _split(self, text: str, info: _Text, separator: str) -> dict[str, _Unit]:
        units = info.splits.get(separator)
        if units is None:
            units = info.splits[separator] = self._units_of(text.split(separator))
        return units

    def _atoms_of(self, info: _Text) -> dict[str, _Unit]:
        """The atoms of a text (a composed one's: the base's, then the rest's new ones)."""
        if info.atoms is None:
            info.atoms = {**self._atoms_of(info.base), **info.rest_atoms}  # type: ignore[arg-type]
        return info.atoms

    def _rest_units(self, text: str, info: _Text, scope: str) -> dict[str, _Unit]:
        """The atoms (ATOM) or lines (LINE) of a composed text's rest (see `_Text`)."""
        if scope == ATOM:
            return info.rest_atoms  # type: ignore[return-value]
        units = info.splits.get("rest")
        if units is None:
            units = info.splits["rest"] = self._units_of(text[info.split:].split(NEWLINE))
        return units

    def _trim(self) -> None:
        while self._cached_chars > self.cache_chars and (self._units or self._texts):
            if self._texts:
                self._cached_chars -= self._texts.pop(next(iter(self._texts))).size
            else:
                self._cached_chars -= self._units.pop(next(iter(self._units))).size

    # -- matching -------------------------------------------------------------------------------

    def _odd_hits(self, text: str, wanted: Collection[int] | None, matched: set[int]) -> None:
        """Keys no unit can decide, tested as the reference tests them."""
        lowered: str | None = None
        for key_id, (folded, needle, pattern) in self._odd.items():
            if wanted is not None and key_id not in wanted:
                continue
            if folded:
                if lowered is None:
                    lowered = text.lower()
                hay = lowered
            else:
                hay = text
            if (pattern.search(hay) is not None) if pattern is not None else needle in hay:
                matched.add(key_id)

    @staticmethod
    def _joined(chosen: list[tuple[str, _Unit]], joiner: str = NEWLINE) -> tuple[str, list[int]]:
        """The unit strings joined by `joiner` (one a unit's scope cannot cross), and where each
        starts (a single unit is its own string, at 0)."""
        if len(chosen) == 1:
            return chosen[0][0], [0]
        strings = [string for string, _ in chosen]
        return joiner.join(strings), list(accumulate(map(_PLUS_ONE, map(len, strings[:-1])), initial=0))

    def _open(self, info: _Unit) -> frozenset[int]:
        """The regex keys still undecided in a unit: its candidates without its verdicts and,
        once primed, without the primed ATOM keys (a primed unit records only their matches)."""
        undecided = info.open
        if undecided is None:
            undecided = self._candidates(info) - info.rx_true - info.rx_false
            if info.primed:
                undecided -= self._primed_atoms
            info.open = undecided
        return undecided

    def _candidates(self, info: _Unit | _Text) -> frozenset[int]:
        """Regex keys that may match inside this unit or text: no literal needed, or one is present."""
        if info.candidates is None:
            base = info.base if isinstance(info, _Text) else None
            if base is not None:  # the base's, plus what the literals new in the rest bring
                info.candidates = self._candidates(base).union(
                    *map(self._lit_regexes.__getitem__, info.lits - base.lits))
            else:
                info.candidates = self._unfiltered.union(*map(self._lit_regexes.__getitem__, info.lits))
        return info.candidates

    def _regex_hits(self, text: str, info: _Text, wanted: Collection[int] | None, matched: set[int],
                    timed_out: set[int]) -> None:
        """Add the asked regex keys found in `text` to `matched` (timed out: `timed_out`), and
        keep the verdicts with `info` (`_Text.rx_true` / `rx_false`)."""
        asked = self._regex_ids if wanted is None else self._regex_ids & (
            wanted if isinstance(wanted, (set, frozenset)) else set(wanted))
        if not asked:
            return
        # A regex with a required literal cannot match a text without one of its alternatives.
        if len(asked) <= 16:  # e.g. locating one key: check the few asked keys one by one
            requires, lits = self._requires, info.lits
            possible = {k for k in asked if requires[k] is None or not requires[k].isdisjoint(lits)}
        else:
            possible = self._candidates(info) if wanted is None else self._candidates(info) & asked
        if not possible:
            return
        base = info.base
        for scope, separator in ((ATOM, None), (PIECE, SEPARATOR), (LINE, NEWLINE)):
            ids = possible & self._scopes[scope]
            if not ids:
                continue
            if base is not None and scope != PIECE:
                # Atoms and lines of a composed text are the base's and the rest's: a key the
                # base has decided is found there, or can only be in the rest.
                known = ids & base.rx_true
                matched |= known
                undecided = ids - known
                in_rest = (undecided & base.rx_false) | (undecided - self._candidates(base))
                if in_rest:
                    self._unit_hits(self._rest_units(text, info, scope), in_rest, matched, timed_out, NEWLINE)
                undecided -= in_rest
                if undecided:  # asked afresh, or timed out for the base: all units
                    units = self._atoms_of(info) if scope == ATOM else self._split(text, info, NEWLINE)
                    self._unit_hits(units, undecided, matched, timed_out, NEWLINE)
            else:
                units = self._atoms_of(info) if separator is None else self._split(text, info, separator)
                self._unit_hits(units, ids, matched, timed_out, separator or NEWLINE)
            info.rx_true |= ids & matched
            info.rx_false |= ids - matched - timed_out
            info.open = None
        ids = possible & self._scopes[TEXT]
        if ids:
            self._text_hits(text, info, ids, matched, timed_out)

    def _one_regex(self, text: str, info: _Text, key_id: int, plan: RegexPlan) -> bool | None:
        """`_regex_hits` for a single key: found, not found, or None if it timed out."""
        required = self._requires[key_id]
        if required is not None and required.isdisjoint(info.lits):
            return False
        matched: set[int] = set()
        timed_out: set[int] = set()
        if plan.scope == TEXT:
            self._text_hits(text, info, {key_id}, matched, timed_out)
        else:
            separator = None if plan.scope == ATOM else SEPARATOR if plan.scope == PIECE else NEWLINE
            units = self._atoms_of(info) if separator is None else self._split(text, info, separator)
            self._unit_hits(units, {key_id}, matched, timed_out, separator or NEWLINE)
        return True if matched else None if timed_out else False

    def _unit_hits(self, units: dict[str, _Unit], ids: set[int], matched: set[int],
                   timed_out: set[int], joiner: str) -> None:
        """Regex keys whose matches lie in one unit: found iff found in some unit.

        Known results first (a key already seen matching an old message needs no search in the
        new one). Then each key is searched once, in its undecided candidate units joined by
        `joiner` (a separator its scope cannot cross, so no match spans two units), with
        `regex_timeout` for that search; the leftmost match tells which units are decided."""
        todo = set(ids)
        for info in units.values():
            if info.rx_true:
                known = todo & info.rx_true
                if known:
                    matched |= known
                    todo -= known
                    if not todo:
                        return
        pending: dict[int, list[tuple[str, _Unit]]] = {}
        for unit in units.items():
            info = unit[1]
            # (`todo` holds no key a unit has found: those went above)
            undecided = info.open
            if undecided is None:
                undecided = self._open(info)
            if undecided and not todo.isdisjoint(undecided):
                for key_id in todo & undecided:
                    pending.setdefault(key_id, []).append(unit)
        for key_id, chosen in pending.items():
            found = self._search_units(key_id, chosen, joiner)
            if found is None:
                timed_out.add(key_id)
            elif found:
                matched.add(key_id)

    def _search_units(self, key_id: int, chosen: list[tuple[str, _Unit]], joiner: str) -> bool | None:
        """Search a unit-scoped key in the joined units; record what the search decides per
        unit. None if it timed out (nothing recorded past what the prefilter proved)."""
        for _, info in chosen:
            info.open = None  # its verdicts change below
        text, starts = self._joined(chosen, joiner)
        rx = self._regex[key_id]
        first = pos = 0  # the first unit, and position, the prefilter could not rule out
        quick = self._quick(key_id, len(text))
        if quick is not None:
            try:
                hint = quick.search(text, timeout=self.regex_timeout)
            except TimeoutError:  # the prefilter has a budget of its own: go on without it
                hint = _UNKNOWN
            if hint is None:
                for _, info in chosen:
                    info.rx_false.add(key_id)
                return False
            if hint is not _UNKNOWN:
                # The relaxed pattern matches wherever the key does, so no match of the key
                # starts before the leftmost relaxed one. `pos` keeps the text before it in view
                # of lookbehinds (unlike slicing), so this is the whole search, only shorter.
                pos = hint.start()
                first = bisect_right(starts, pos) - 1
        try:
            found = rx.compiled.search(text, pos, timeout=self.regex_timeout)
        except TimeoutError:
            for _, info in chosen[:first]:
                info.rx_false.add(key_id)
            return None
        last = len(chosen) if found is None else bisect_right(starts, found.start()) - 1
        for _, info in chosen[:last]:
            info.rx_false.add(key_id)
        if found is None:
            return False
        chosen[last][1].rx_true.add(key_id)
        return True

    def _quick(self, key_id: int, chars: int) -> regex.Pattern[str] | None:
        """The compiled relaxed pattern of a regex key (`RegexPlan.relaxed`) for a search of
        `chars` characters, or None: search with the key itself.

        Compiling costs about as much as the key's own (slower) search of ~1,500 characters, so
        a key is compiled once its searches without it have covered `RELAX_AFTER` characters
        (at most twice the cheaper cost; most keys are searched a few times in a session)."""
        quick = self._relaxed.get(key_id, _UNKNOWN)
        if quick is _UNKNOWN:
            relaxed = self.plans[key_id].relaxed
            if relaxed is None:
                quick = self._relaxed[key_id] = None
            else:
                searched = self._unrelaxed.get(key_id, 0) + chars
                if searched < RELAX_AFTER:
                    self._unrelaxed[key_id] = searched
                    return None
                quick = self._relaxed[key_id] = compile_relaxed(relaxed, self._regex[key_id].compiled.flags)
        return quick  # type: ignore[return-value]

    def _search(self, key_id: int, text: str) -> bool | None:
        """Search one regex key in the whole text as the reference does (match at 0 if sticky);
        None if it timed out. The relaxed pattern goes first with a budget of its own, so it
        never makes a key time out that the reference's search would decide; a match of the
        key cannot start before its leftmost match (see `_search_units`)."""
        rx = self._regex[key_id]
        quick = self._quick(key_id, len(text))
        pos = 0
        if quick is not None:
            try:
                hint = (quick.match if rx.sticky else quick.search)(text, timeout=self.regex_timeout)
                if hint is None:
                    return False
                if not rx.sticky:
                    pos = hint.start()
            except TimeoutError:
                pass
        try:
            if rx.sticky:
                return rx.compiled.match(text, timeout=self.regex_timeout) is not None
            return rx.compiled.search(text, pos, timeout=self.regex_timeout) is not None
        except TimeoutError:
            return None

    def _text_hits(self, text: str, info: _Text, ids: set[int], matched: set[int], timed_out: set[int]) -> None:
        """Regex keys searched in the whole text as the reference does (`info` holds this
        text's finished searches)."""
        for key_id in ids:
            if key_id in info.rx_true:
                matched.add(key_id)
            elif key_id not in info.rx_false:
                result = self._search(key_id, text)
                if result is None:
                    timed_out.add(key_id)
                    continue
                info.open = None
                if result:
                    info.rx_true.add(key_id)
                    matched.add(key_id)
                else:
                    info.rx_false.add(key_id)
