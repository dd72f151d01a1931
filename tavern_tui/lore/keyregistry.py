"""Provides `KeyRegistry`: one id per distinct key of a plan, and each raw key's expansion.

Rule: SillyTavern 1.18 `WorldInfoBuffer.matchKeys` and `getSortedEntries`
(public/scripts/world-info.js; format-digest §b.4, §b.5.2): a key is matched after its macros
are expanded (`{{char}}`, `{{user}}`, …) and it is trimmed (`String.prototype.trim`); case and
whole-word settings are the entry's, else the global ones, and a regex key ignores both. A plan
(`prepare.make_plan`) registers every key once here: (text, case, whole-word) -> id ->
`CompiledKey`, in the order the entries are scanned.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import chain, compress, filterfalse, repeat
from operator import attrgetter, contains, itemgetter

from tavern_tui.lore.context import ActivationContext
from tavern_tui.lore.jsregex import js_trim
from tavern_tui.lore.matching import CompiledKey, parse_regex_key
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.text.names import substitute_names


class KeyRegistry:
    """Gives each distinct (text, case, whole-word) one id; regex keys ignore case/whole-word."""

    def __init__(self, expand: Callable[[str], str]) -> None:
        self.ids: dict[tuple[bool, bool], dict[str, int]] = {}  # (case, whole-word) -> text -> id
        self.keys: dict[int, CompiledKey] = {}
        self.expand = expand
        self.lookups: dict[tuple[bool, bool], Callable[[str], tuple[str, int | None]]] = {}
        self.memos: dict[tuple[bool, bool], dict[str, tuple[str, int | None]]] = {}  # what `lookup` found

    def preload(self, raws: Iterable[str], case_sensitive: bool, whole_words: bool) -> None:
        """Look up every key of `raws` (in order, as `lookup` would one by one: the same ids),
        then make `lookup` for these settings a plain dict read: callers must ask only for keys
        of `raws`. A key without macros (no `{{` or `<`, what `substitute_names` can replace
        starts so) is only trimmed; the others are expanded one by one, in order."""
        flags = (case_sensitive, whole_words)
        memo = self.memos.setdefault(flags, {})
        raws = list(filterfalse(memo.__contains__, raws))
        texts = list(map(js_trim, raws))
        for i in compress(range(len(raws)), map(any, zip(map(contains, raws, repeat("{{")),
                                                          map(contains, raws, repeat("<"))))):
            texts[i] = self.expand(raws[i])
        ids, keys, quick = self.ids.setdefault(flags, {}), self.keys, CompiledKey.quick
        found: dict[str, int] = {}
        for text in dict.fromkeys(texts):
            key_id = ids.get(text)
            if key_id is None and text:
                if text[:1] == "/":  # (perhaps a regex key: `get` decides)
                    key_id = self.get(text, case_sensitive, whole_words)
                else:  # `get` for a plain key, inline: most keys are
                    key_id = ids[text] = len(keys)
                    keys[key_id] = quick(key_id, text, case_sensitive, whole_words)
            found[text] = key_id  # type: ignore[assignment]  # (None for "")
        memo.update(zip(raws, zip(texts, map(found.__getitem__, texts))))
        self.lookups[flags] = memo.__getitem__

    def get(self, text: str, case_sensitive: bool, whole_words: bool) -> int:
        """The id of `text` matched with these settings (registered now if new)."""
        if text[:1] == "/" and parse_regex_key(text) is not None:  # (a regex key starts with "/")
            case_sensitive, whole_words = True, False
        ids = self.ids.get((case_sensitive, whole_words))
        if ids is None:
            ids = self.ids[(case_sensitive, whole_words)] = {}
        key_id = ids.get(text)
        if key_id is None:
            key_id = ids[text] = len(self.keys)
            self.keys[key_id] = CompiledKey.quick(key_id, text, case_sensitive, whole_words)
        return key_id

    def lookup(self, case_sensitive: bool, whole_words: bool) -> Callable[[str], tuple[str, int | None]]:
        """raw key -> (expanded trimmed key, its id; None if blank) for these settings, memoised:
        entries share many keys."""
        flags = (case_sensitive, whole_words)
        found = self.lookups.get(flags)
        if found is None:
            memo = self.memos.setdefault(flags, {})
            known = memo.get

            def found(raw: str) -> tuple[str, int | None]:
                pair = known(raw)
                if pair is None:
                    text = self.expand(raw)
                    pair = memo[raw] = (text, self.get(text, *flags) if text else None)
                return pair

            self.lookups[flags] = found
        return found


def preload_usual(registry: KeyRegistry, ordered: list[tuple[WorldInfoEntry, WorldBook, str]],
                  settings: WorldInfoSettings, scoring: bool) -> Callable[[str], tuple[str, int | None]] | None:
    """The usual book (no group scoring, no entry overriding the case or whole-word setting):
    every primary and secondary key looked up at once, in the order `prepared.prepare_entry` asks
    for them (so ids come out the same). Returns the lookup for the book's settings (a dict
    read), or None when the book is not such a book (the entries then look their keys up one by one)."""
    if scoring or not ordered:
        return None
    raw = list(map(itemgetter(0), ordered))
    case, whole = settings.case_sensitive, settings.match_whole_words
    if {*map(_CASE, raw)} <= {None, case} and {*map(_WHOLE, raw)} <= {None, whole}:
        registry.preload(dict.fromkeys(chain.from_iterable(chain.from_iterable(map(_KEY_LISTS, raw)))), case, whole)
        return registry.lookup(case, whole)
    return None


_CASE, _WHOLE = attrgetter("case_sensitive"), attrgetter("match_whole_words")
_KEY_LISTS = attrgetter("key", "keysecondary")


def key_expander(ctx: ActivationContext) -> Callable[[str], str]:
    """A key's macros expanded and trimmed, memoised for the plan: many entries share a key."""
    expanded: dict[str, str] = {}

    def expand(key: str) -> str:
        # Once per distinct key: a key shared by many entries (a 2 MB expansion of
        # `{{newline::1000}}` × 2000 in each of 27 entries) is expanded and trimmed once.
        done = expanded.get(key)
        if done is None:
            named = substitute_names(key, ctx.char_name, ctx.user_name) if "{{" in key or "<" in key else key
            if ctx.expand_key is not None and "{{" in named:
                named = ctx.expand_key(key)  # the whole engine (names included)
            done = expanded[key] = js_trim(named)
        return done

    return expand
