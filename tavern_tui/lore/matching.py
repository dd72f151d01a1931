"""Provides SillyTavern's key matching: regex keys, whole words, case folding, and the `KeyIndex` protocol.

Rule: SillyTavern 1.18 `WorldInfoBuffer.matchKeys` and `parseRegexFromString`
(public/scripts/world-info.js; format-digest §b.5.2, performance-anchors §1.1):

- A key of the form `/pattern/flags` (flags ⊂ gimsuy, inner `/` escaped) that compiles is a
  regex, tested on the raw buffer; case and whole-word settings do not apply to it. A key that
  looks like one but does not compile is matched as plain text (`AC/DC` is plain text).
- A plain key is compared after `toLowerCase` on both sides unless case-sensitive (`str.lower`
  gives the same result, final sigma included).
- With whole words on, a key containing whitespace is a plain substring test; any other key
  must match `(?:^|\\W)key(?:$|\\W)` where `\\W` is JS's ASCII-only class, so every non-ASCII
  character counts as a boundary: `魔法` matches inside `我会魔法了`, `ai` does not match in
  `ain't`, `#hello` matches in `say #hello`.

All matching goes through a `KeyIndex`: built once from every key of an activation, then asked
which keys occur in a text. `ReferenceIndex` does one test per key per call, exactly as
SillyTavern does; it is the correctness oracle and the baseline for faster indexes.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from typing import TYPE_CHECKING, Protocol

import regex

from tavern_tui.lore.jsregex import (
    JS_WHITESPACE,
    JSRegexError,
    JSRegexTooCostly,
    JSTranslation,
    compile_js_regex,
    compile_translation,
    js_trim,
    translate_js_regex,
)
from tavern_tui.lore.regex_budget import bounded

if TYPE_CHECKING:
    from tavern_tui.lore.model import WorldBook

DEFAULT_REGEX_TIMEOUT = 0.05
"""Seconds one regex-key search may run before it is abandoned and reported as timed out."""

_REGEX_KEY = re.compile(r"\A/([\s\S]+?)/([gimsuy]*)\Z")
_UNESCAPED_SLASH = re.compile(r"(?:^|[^\\])/")
_NON_WORD = "[^A-Za-z0-9_]"
_NEVER = regex.compile("(?!)")
_IGNORECASE = int(regex.IGNORECASE)
_log = logging.getLogger(__name__)
_new = object.__new__


@dataclass(frozen=True)
class RegexKey:
    """A parsed `/pattern/flags` key: its Python translation (`pattern`, compiled with `py_flags`)
    and whether JS's sticky `y` flag anchors the test at position 0. `refused` is why a valid
    pattern was not compiled (see `jsregex.JSRegexTooCostly`; its `compiled` then never matches),
    else "".

    `compiled` is compiled on first use when the translation is known to compile
    (`jsregex.JSTranslation.plain_syntax`; most keys): a book's regex keys are parsed when an
    activation is planned, but a key with a required literal is searched only once its literal
    is in the text (`FastIndex`), so most are never compiled in a session. `is_compiled` tells.
    """

    source: str
    flags: str
    pattern: str
    py_flags: int
    sticky: bool
    refused: str = ""
    _compiled: regex.Pattern[str] | None = field(default=None, compare=False, repr=False)

    @property
    def compiled(self) -> regex.Pattern[str]:
        """The compiled pattern (compiled now if it was not yet)."""
        compiled = self._compiled
        if compiled is None:
            try:
                compiled = compile_translation(JSTranslation(self.source, self.pattern, bool(
                    self.py_flags & _IGNORECASE), self.sticky, True, self.py_flags))
            except JSRegexError:  # pragma: no cover - `plain_syntax` rules this out (tested)
                _log.exception("regex key /%s/%s did not compile after all: it never matches", self.source, self.flags)
                compiled = _NEVER
            object.__setattr__(self, "_compiled", compiled)  # (two threads may both compile: same result)
        return compiled

    @property
    def is_compiled(self) -> bool:
        """Whether `compiled` has been compiled (always, for a key whose syntax is not plain)."""
        return self._compiled is not None


@lru_cache(maxsize=1 << 16)  # above any book's distinct keys: plain keys are cached too
def parse_regex_key(key: str) -> RegexKey | None:
    """Parse a key as SillyTavern's `parseRegexFromString` does; None if it is a plain key.

    `/…/flags`: the shortest body such that the rest is `/` plus flags ⊂ "gimsuy"; an unescaped
    `/` in the body makes it plain text; the JS pattern must compile (translated by
    `jsregex.compile_js_regex`, which lists what differs). Cached: keys repeat across calls.
    Whether it compiles is known here; compiling a translation that always compiles is left
    until the key is first searched (`RegexKey.compiled`).

    A valid pattern too costly to compile (`/a{99999999}/`) stays a regex key that never
    matches, with `refused` saying why: in SillyTavern it is a valid RegExp that needs that many
    characters to match, so "never" is what it does on any real chat, and reading it as plain
    text would match its literal spelling instead.
    """
    parts = _regex_parts(key)
    if parts is None:
        return None
    try:
        translation = translate_js_regex(*parts)
        compiled = None if translation.plain_syntax else compile_translation(translation)
    except JSRegexTooCostly as exc:
        return RegexKey(*parts, _NEVER.pattern, _NEVER.flags, False, refused=str(exc), _compiled=_NEVER)
    except JSRegexError:
        return None
    return RegexKey(*parts, translation.text, translation.flags, translation.sticky, _compiled=compiled)


def _regex_parts(key: str) -> tuple[str, str] | None:
    """(JS pattern, flags) of a key written `/…/flags` (see `parse_regex_key`), else None."""
    match = _REGEX_KEY.match(key)
    if not match or _UNESCAPED_SLASH.search(match.group(1)):
        return None
    return match.group(1).replace("\\/", "/", 1), match.group(2)  # JS String.replace with a string: first only


def regex_key_error(key: str) -> str | None:
    """Why a key written as a regex (`/…/flags`, the shape `parse_regex_key` reads) does not
    compile, or None (a plain key, or a regex that compiles). SillyTavern's `parseRegexFromString`
    returns null for such a key, so it is matched as plain text, "/" and all: a user is told,
    since that is rarely what the author meant."""
    parts = _regex_parts(key)
    if parts is None or parse_regex_key(key) is not None:  # (cached: a good key is not compiled again)
        return None
    try:
        compile_js_regex(*parts)
    except JSRegexError as exc:
        return str(exc) or "invalid regular expression"
    return None


def refused_regex_key(key: str) -> str | None:
    """Why a valid regex key was refused as too costly to compile (it never matches; see
    `parse_regex_key`), or None."""
    parsed = parse_regex_key(key)
    return parsed.refused or None if parsed is not None else None


def invalid_regex_keys(book: WorldBook) -> list[str]:
    """One warning per key of `book` that is written as a regex but does not compile (see
    `regex_key_error`) or was refused as too costly (`refused_regex_key`), naming the entry (uid
    and title), the field, the key and the reason. Each key is compiled once (cached)."""
    out = []
    for entry in book.entries:
        for field_name, keys in (("key", entry.key), ("keysecondary", entry.keysecondary)):
            for i, key in enumerate(keys):
                text = js_trim(key)
                title = f" ({entry.comment})" if entry.comment else ""
                where = f"entry {entry.uid}{title} {field_name}[{i}] {_shown(key)}"
                if (refused := refused_regex_key(text)) is not None:
                    out.append(f"{where}: regex refused ({refused}); this key never matches, the entry's "
                               "other keys still do")
                elif (why := regex_key_error(text)) is not None:
                    out.append(f"{where}: not a valid regex ({why}); matched as plain text, as SillyTavern does")
    return out


def _shown(key: str, limit: int = 80) -> str:
    """`repr` of a key, cut to `limit` characters: a refused key may be thousands long."""
    return repr(key) if len(key) <= limit else repr(key[:limit]) + f"… ({len(key)} characters)"


def has_js_whitespace(text: str) -> bool:
    """True if `text` holds a JS `\\s` character, i.e. `text.split(/\\s+/)` has more than one part:
    SillyTavern's test for a multi-word key."""
    return not JS_WHITESPACE.isdisjoint(text)


def whole_word_pattern(key: str) -> re.Pattern[str]:
    """`(?:^|\\W)key(?:$|\\W)` with JS semantics: ASCII `\\W`, `^`/`$` at the very ends."""
    return re.compile(f"(?:\\A|{_NON_WORD}){re.escape(key)}(?:\\Z|{_NON_WORD})")


@dataclass(frozen=True)
class CompiledKey:
    """One distinct key to look for.

    Attributes:
        key_id: the caller's id for it (unique within one index).
        text: the key as matched: already macro-expanded and trimmed for primary/secondary
            matching; raw for SillyTavern's group scoring (which skips both steps).
        case_sensitive, whole_words: the effective settings (entry ?? global); ignored when
            `text` parses as a regex key.
    """

    key_id: int
    text: str
    case_sensitive: bool
    whole_words: bool

    @staticmethod
    def quick(key_id: int, text: str, case_sensitive: bool, whole_words: bool) -> CompiledKey:
        """`CompiledKey(key_id, text, case_sensitive, whole_words)`, the same object made ~2x
        quicker (the frozen `__init__` sets each field through `object.__setattr__`): a plan
        of a big book registers thousands."""
        key = _new(CompiledKey)
        fields = key.__dict__
        fields["key_id"], fields["text"], fields["case_sensitive"], fields["whole_words"] = (
            key_id, text, case_sensitive, whole_words)
        return key


@dataclass(frozen=True)
class KeyHits:
    """Result of one `KeyIndex.hits` call: ids found, and ids whose regex search timed out
    (neither found nor known absent)."""

    matched: frozenset[int]
    timed_out: frozenset[int] = frozenset()


class KeyIndex(Protocol):
    """Finds which keys occur in a text (SillyTavern `matchKeys`, for many keys at once).

    Implementations are built from a sequence of `CompiledKey` (see `IndexFactory`) and must
    give the same answer as `ReferenceIndex` for every key. The text is a scan buffer as
    SillyTavern builds it (`"\\x01" + messages.join("\\n\\x01")`, …) or one piece of it.
    """

    def hits(self, text: str, keys: Collection[int] | None = None) -> KeyHits:
        """Keys found in `text`. With `keys`, only those ids are asked about (the result may
        still contain others; callers filter). Never raises for a slow regex: a search that
        exceeds the index's time limit is listed in `timed_out`."""
        ...


IndexFactory = Callable[[Sequence[CompiledKey]], KeyIndex]
"""Builds a `KeyIndex` from keys. Pass `functools.partial(ReferenceIndex, regex_timeout=…)`
to change the time limit."""


class _Plain:
    __slots__ = ("folded", "needle", "pattern")

    def __init__(self, key: CompiledKey) -> None:
        self.folded = not key.case_sensitive
        self.needle = key.text.lower() if self.folded else key.text
        whole = key.whole_words and not has_js_whitespace(self.needle)
        self.pattern = whole_word_pattern(self.needle) if whole else None

    def test(self, text: str) -> bool:
        if self.pattern is not None:
            return self.pattern.search(text) is not None
        return self.needle in text


class ReferenceIndex:
    """The oracle `KeyIndex`: one compiled test per key per call, as SillyTavern does.

    Args:
        keys: the keys; ids must be unique.
        regex_timeout: seconds each regex-key search may take (`regex` module `timeout=`).

    Raises:
        ValueError: duplicate key ids.
    """

    def __init__(self, keys: Iterable[CompiledKey], *, regex_timeout: float = DEFAULT_REGEX_TIMEOUT) -> None:
        self.regex_timeout = regex_timeout
        self._plain: dict[int, _Plain] = {}
        self._regex: dict[int, RegexKey] = {}
        for key in keys:
            if key.key_id in self._plain or key.key_id in self._regex:
                raise ValueError(f"duplicate key id {key.key_id}")
            parsed = parse_regex_key(key.text)
            if parsed is not None:
                self._regex[key.key_id] = parsed
            else:
                self._plain[key.key_id] = _Plain(key)

    def hits(self, text: str, keys: Collection[int] | None = None) -> KeyHits:
        """See `KeyIndex.hits`."""
        matched: set[int] = set()
        timed_out: set[int] = set()
        lowered: str | None = None
        plain = self._plain.items() if keys is None else ((k, self._plain[k]) for k in keys if k in self._plain)
        for key_id, matcher in plain:
            if matcher.folded:
                if lowered is None:
                    lowered = text.lower()
                found = matcher.test(lowered)
            else:
                found = matcher.test(text)
            if found:
                matched.add(key_id)
        wanted = self._regex.items() if keys is None else ((k, self._regex[k]) for k in keys if k in self._regex)
        for key_id, rx in wanted:
            try:
                search = rx.compiled.match if rx.sticky else rx.compiled.search
                # (charged to the step's regex budget, see lore.regex_budget)
                if bounded(self.regex_timeout, partial(search, text)) is not None:
                    matched.add(key_id)
            except TimeoutError:
                timed_out.add(key_id)
        return KeyHits(frozenset(matched), frozenset(timed_out))


class IndexCache:
    """Memoizes an `IndexFactory` on the exact key tuple, so repeated activations over the same
    books reuse their indexes (e.g. an Aho-Corasick automaton). Holds at most `size` indexes.

    Attributes:
        in_use: held by a caller for a whole activation (`assembly.worldinfo.WorldInfoStep.run`):
            an index's per-text caches are not safe to update from two threads at once, and the
            app activates from worker threads (the tester, the warm-up when a chat opens) as
            well as from the event loop. Reentrant.
    """

    def __init__(self, factory: IndexFactory = ReferenceIndex, size: int = 8) -> None:
        self.factory = factory
        self.size = size
        self._cache: dict[tuple[CompiledKey, ...], KeyIndex] = {}
        self._lock = threading.Lock()  # guards `_cache` itself
        self.in_use = threading.RLock()

    def wait_free(self) -> None:
        """Block until no other thread holds `in_use` (returns at once when free). A caller on an
        event loop runs this in a thread first, so the loop does not block on the lock later
        (the app's warm-up primes in parts, so the next part may still come first: one part)."""
        with self.in_use:
            pass

    def __call__(self, keys: Sequence[CompiledKey]) -> KeyIndex:
        token = tuple(keys)
        with self._lock:
            index = self._cache.pop(token, None)
            if index is None:
                index = self.factory(token)
            self._cache[token] = index
            while len(self._cache) > self.size:
                self._cache.pop(next(iter(self._cache)))
        return index
