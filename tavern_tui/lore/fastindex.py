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
  regex results; `fastunits.Unit`) are cached by the string itself and reused across calls and
  activations.
- Plain keys, per atom, lower-cased once with `str.lower()` as the reference lowers both sides:
  * whole-word keys made only of `[A-Za-z0-9_]`: a whole-word occurrence is exactly a maximal
    run of those characters equal to the key, so one set lookup per run finds them all;
  * all other keys go into two ahocorasick_rs automata (`scanners.Automaton`: folded and case-sensitive) searched with
    OVERLAPPING matches, so nested keys ("Jon" in "Jon Snow") all report; each occurrence of a
    whole-word key is checked for the reference's `(?:^|\\W)key(?:$|\\W)` with ASCII `\\W` on
    the same (folded or raw) text. Lengths that change under folding (`İ`) do not matter: no
    offset is mapped back to the original text.
- Regex keys (`fastregex`): a literal prefilter, a scope (atom, piece, line or the whole text)
  and a relaxed pattern, from `regex_plan.analyse_regex`; results cached per unit string.
- Scan loops. The next loop's buffer is the last one + "\\n\\x01" + recursion text: its atoms
  and lines are the last buffer's and the rest's, so it is composed from the cached one
  (`fastunits.Text`) and only the rest is looked at for the keys the last buffer decided
  (PIECE and TEXT scopes, whose units do not compose so, are searched as usual). What a whole
  text was found to hold or not (`Text.rx_true` / `rx_false`) is kept with it. Scan buffers
  never come back once the window moves on, so only the last few are kept; their messages stay
  cached as units.
- Priming (`prime`, from the app's warm-up when a chat opens; `fastprime`): every entry content
  a recursion loop may add is cut into units ahead of time and its ATOM-scope regex keys are
  decided in bulk, so a step that first activates an entry neither scans nor searches it.
- Locating keys (`first_hits`): the activation (admission.py) asks, for its fired entries'
  keys, which buffer piece holds each first (a piece is usually cached from the last step,
  verdicts included); the pieces of the last loop's buffer are skipped for plain and ATOM-scope
  keys it did not hold.
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
from collections.abc import Collection, Iterable
from operator import attrgetter

import regex

from tavern_tui.lore.fastprime import prime_atom_regexes
from tavern_tui.lore.fastregex import candidates, one_regex, regex_hits
from tavern_tui.lore.fastunits import Text, Unit
from tavern_tui.lore.jsregex import JS_WHITESPACE
from tavern_tui.lore.matching import (
    DEFAULT_REGEX_TIMEOUT,
    CompiledKey,
    KeyHits,
    RegexKey,
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
_KEYS, _LITS, _KEY_ID = attrgetter("keys"), attrgetter("lits"), attrgetter("key_id")
RELAX_AFTER = 1500
"""Characters a regex key is searched with its own pattern before its relaxed pattern is
compiled (see `FastIndex._quick`)."""
_LONG_TEXT = 2000  # texts at least this long are remembered as bases for composed texts
_LONG_KEPT = 6  # how many are kept: this step's scan buffers and the last step's


# -- the index ----------------------------------------------------------------------------------

def _atoms(text: str) -> list[str]:
    """`text` cut at every `\\n` and `\\x01`, in order (one C-level split)."""
    return text.replace(SEPARATOR, NEWLINE).split(NEWLINE) if SEPARATOR in text else text.split(NEWLINE)


LONG_NEEDLE = 1_000
"""Plain keys longer than this (characters) are tested with `in` like the odd ones rather than put in
an automaton: no real key is that long, and a hostile 30,000-character key took ~1 s per automaton."""


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
        keys = list(keys)
        if len(set(map(_KEY_ID, keys))) < len(keys):
            ids = list(map(_KEY_ID, keys))
            raise ValueError(f"duplicate key id {next(k for i, k in enumerate(ids) if k in ids[:i])}")
        words = self._add_keys(keys, lit_regexes)
        self._folded.build()
        self._exact.build()
        self._exact_words.build(words[False])
        self._folded_words.build(words[True])
        self._lit_regexes = [frozenset(x) for x in lit_regexes]
        self._regex_ids = frozenset(self._regex)
        self._requires = {k: None if p.required is None else frozenset(
            self._literal_ids[(p.folded, literal)] for literal in p.required) for k, p in self.plans.items()}
        self._unfiltered = frozenset(k for k, p in self.plans.items() if p.required is None)
        self._scopes = {scope: frozenset(k for k, p in self.plans.items() if p.scope == scope)
                        for scope in (ATOM, PIECE, LINE, TEXT)}
        self._units: dict[str, Unit] = {}
        self._prime_skipped: frozenset[int] = frozenset()  # ATOM keys `prime` could not decide (timeouts)
        self._primed_atoms: frozenset[int] = frozenset()  # the ATOM keys a primed unit has decided
        self._relaxed: dict[int, regex.Pattern[str] | None] = {}  # key id -> compiled relaxed pattern
        self._unrelaxed: dict[int, int] = {}  # key id -> characters searched before compiling it
        self._texts: dict[str, Text] = {}
        self._long: list[str] = []  # the last long texts asked about, oldest first (`_composed`)
        self._cached_chars = 0

    def _add_keys(self, keys: list[CompiledKey], lit_regexes: list[set[int]]) -> tuple[list[tuple[str, int]], ...]:
        """Put each key where it is looked for: regex keys (`_add_regex`), the automata, the odd
        keys; returns the whole-word keys made of word characters as (needle, id) pairs, exact
        ones then folded ones (for `WordKeys.build`)."""
        words: tuple[list[tuple[str, int]], list[tuple[str, int]]] = ([], [])
        for key in keys:
            text = key.text
            parsed = parse_regex_key(text) if text[:1] == "/" else None  # (only "/…" parses)
            if parsed is not None:
                self._add_regex(key.key_id, parsed, lit_regexes)
                continue
            # Exactly the reference's `_Plain`: the needle, folding and the whole-word decision.
            folded = not key.case_sensitive
            needle = text.lower() if folded else text
            if key.whole_words and WORD_RUN.fullmatch(needle):  # (no whitespace in it: skip that test)
                words[folded].append((needle, key.key_id))
                continue
            whole = key.whole_words and JS_WHITESPACE.isdisjoint(needle)  # (`has_js_whitespace`)
            if not needle or SEPARATOR in needle or NEWLINE in needle or len(needle) > LONG_NEEDLE:
                self._odd[key.key_id] = (folded, needle, whole_word_pattern(needle) if whole else None)
                continue
            automaton = self._folded if folded else self._exact
            slots = automaton.slot
            slot = slots.setdefault(needle, len(slots))  # (`Automaton.add`)
            (automaton.whole if whole else automaton.any)[slot].append(key.key_id)
        return words

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
                    found = one_regex(self, text, info, key_id, plan)
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
            regex_hits(self, text, info, wanted, found, timed_out)
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
        `KeyHits` per text: the activation (admission.py) places each fired entry's key in a buffer piece so.

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
        absent = self._absent_from(base, remaining, rx_left, odd_left) if base_pieces > 0 else None
        head, skip_to = (remaining - absent, base_pieces) if absent else (remaining, 0)  # head: sought before skip_to
        texts_seen = self._texts
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
                if info.open is None or not rx_wanted.isdisjoint(info.open):  # (else nothing to search)
                    found = self._search_undecided(text, info, rx_wanted, found)
            if found:
                placed.update(dict.fromkeys(found, position))
                remaining -= found
                rx_left -= found
                odd_left -= found
                if head is not remaining:
                    head = head - found
        if self._cached_chars > self.cache_chars:
            self._trim()
        return placed

    def _absent_from(self, base: str | None, keys: set[int], rx_keys: set[int], odd_keys: set[int]) -> set[int] | None:
        """The keys of `keys` no piece of `base` can hold, for `first_hits` to skip those pieces:
        plain and ATOM-scope regex keys that `base`, asked about before, was found without.
        None when `base` is not cached."""
        known = self._texts.get(base) if base is not None else None
        if known is None:
            return None
        atom_rx = rx_keys & self._scopes[ATOM]
        return (keys - self._regex_ids - odd_keys - known.keys) | (atom_rx & known.rx_false) \
            | (atom_rx - candidates(self, known))

    def _search_undecided(self, text: str, info: Text, rx_wanted: set[int], found: set[int] | None) -> set[int] | None:
        """`found` plus the keys of `rx_wanted` that `text` holds among its not yet decided
        regex candidates (searched; the verdicts are kept with `info`, for the next step)."""
        undecided = info.open
        if undecided is None:
            undecided = info.open = candidates(self, info) - info.rx_true - info.rx_false
        if rx_wanted.isdisjoint(undecided):
            return found
        found = found or set()
        regex_hits(self, text, info, rx_wanted & undecided, found, set())  # keeps the verdicts
        return found

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
        units: dict[str, Unit] = {}
        for text in texts:
            if self._cached_chars > limit:
                break
            units.update(self._units_of(_atoms(text)))
            done += 1
        if self._regex:
            prime_atom_regexes(self, units)
        return done

    def clear_cache(self) -> None:
        """Forget every cached unit and text (the automata stay built)."""
        self._units.clear()
        self._texts.clear()
        self._long.clear()
        self._cached_chars = 0

    # -- units ----------------------------------------------------------------------------------

    def _text(self, text: str) -> Text:
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
                info = Text(atoms, keys, lits, len(text) + 100)
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

    def _composed(self, text: str) -> Text | None:
        """`text` as a recently seen long text + "\n" + a rest, if it is one (see `Text`)."""
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
                return Text(None, keys, lits, len(text) + 100, base=base, split=cut + 1, rest_atoms=rest)
        return None

    def _units_of(self, strings: list[str]) -> dict[str, Unit]:
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

    def _unit(self, string: str) -> Unit:
        info = self._units.pop(string, None)
        if info is None:
            if SEPARATOR in string or NEWLINE in string:
                # A piece or a line: the union of its atoms (no key or literal holds \n or \x01).
                parts = [self._unit(atom) for atom in dict.fromkeys(_atoms(string))]
                info = Unit(frozenset().union(*(u.keys for u in parts)),
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
                info = Unit(frozenset(keys), frozenset(lits), len(string) + 100)
            self._cached_chars += info.size
        self._units[string] = info  # (re)inserted last: the most recently used
        return info

    def _split(self, text: str, info: Text, separator: str) -> dict[str, Unit]:
        units = info.splits.get(separator)
        if units is None:
            units = info.splits[separator] = self._units_of(text.split(separator))
        return units

    def _atoms_of(self, info: Text) -> dict[str, Unit]:
        """The atoms of a text (a composed one's: the base's, then the rest's new ones)."""
        if info.atoms is None:
            info.atoms = {**self._atoms_of(info.base), **info.rest_atoms}  # type: ignore[arg-type]
        return info.atoms

    def _rest_units(self, text: str, info: Text, scope: str) -> dict[str, Unit]:
        """The atoms (ATOM) or lines (LINE) of a composed text's rest (see `Text`)."""
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
                quick = self._relaxed[key_id] = compile_relaxed(relaxed, self._regex[key_id].py_flags)
        return quick  # type: ignore[return-value]
