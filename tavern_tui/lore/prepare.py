"""Provides the scan plan: entries of all books in SillyTavern's scan order, their keys compiled
into one `KeyIndex` per buffer shape.

Rule: SillyTavern 1.18 `getSortedEntries` and `parseDecorators` (public/scripts/world-info.js;
format-digest §b.4 "Lore sources"): chat lore first, then persona lore, then global and character
lore by `world_info_character_strategy`; each part sorted by `order` descending (stable, so ties
keep book order, then entry order). Keys are expanded (`{{char}}`, `{{user}}`) and trimmed here,
once per plan, not once per scan loop.

Plans are cached (`build_plan`, small LRU): a book handed to `activate` is treated as immutable,
so the cache is keyed on the books' identity (held strongly while cached, so ids are not reused),
the names and the settings the plan reads, and the index factory. An edited book must be a new
`WorldBook` object (the service does this); `clear_plan_cache` drops everything.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace
from itertools import compress
from operator import attrgetter, not_

from tavern_tui.lore.buffer import ExtraFlags, Segment
from tavern_tui.lore.collector import gc_paused
from tavern_tui.lore.context import EXTRA_SOURCES, ActivationContext, SourcedBook
from tavern_tui.lore.eval_budget import EvalBudget
from tavern_tui.lore.jsregex import JS_SPACE_CLASS, js_trim
from tavern_tui.lore.matching import (
    CompiledKey,
    IndexFactory,
    KeyIndex,
    parse_regex_key,
)
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.lore.result import Decision
from tavern_tui.lore.settings import (
    STRATEGY_CHARACTER_FIRST,
    STRATEGY_GLOBAL_FIRST,
    WorldInfoSettings,
)
from tavern_tui.lore.timed import EntryKey
from tavern_tui.text.names import substitute_names

KNOWN_DECORATORS = ("@@activate", "@@dont_activate")
_GROUP_SPLIT = re.compile(f",[{JS_SPACE_CLASS}]*")
_PRECEDENCE = {"global": 0, "chat": 1, "persona": 2, "preset": 3, "character": 4}

Shape = tuple["int | None", "int | None", ExtraFlags]
"""(entry scan depth, book scan depth, extra sources): entries with one shape share a buffer."""


@dataclass(eq=False, slots=True)
class Prepared:
    """One entry ready to scan.

    Attributes:
        pos: index in scan order.
        key: (book, uid).
        content: decorator lines removed, `{{char}}`/`{{user}}` expanded.
        primary, secondary: (expanded trimmed key, key id); id None for a blank key.
        raw_primary, raw_secondary: key ids of the raw keys for group scoring (None = raw "",
            which SillyTavern's `getScore` always counts as found); empty if never scored.
        shape: the buffer shape; `index` its key index.
        group_names: inclusion groups split as SillyTavern does (`group.split(/,\\s*/)`).
        key_ids: every non-blank key id of the entry (primary, secondary, raw), for `RunState.match`.
        template: the entry's fixed `Decision` fields (book, uid, comment, placement); fields equal
            to the `Decision` default are left out (they read as the class attribute). Small
            instance dicts keep building thousands of decisions cheap.

    The sequences are tuples (`make_plan`; empty ones are all `()`): a plan of a big book is
    long-lived, and the garbage collector stops tracking tuples of plain values.
    """

    pos: int
    key: EntryKey
    book: str
    source: str
    entry: WorldInfoEntry
    content: str
    decorators: tuple[str, ...]
    primary: Sequence[tuple[str, int | None]]
    secondary: Sequence[tuple[str, int | None]]
    raw_primary: Sequence[int | None]
    raw_secondary: Sequence[int | None]
    shape: Shape
    delay_level: int
    group_names: Sequence[str]
    key_ids: tuple[int, ...] = ()
    template: dict = field(default_factory=dict)
    keyed: Sequence[tuple[str, int]] = ()
    """`primary` without the blank keys (what key matching walks, in key order)."""
    fired_entries: dict | None = None
    """(reason, loop) -> the entry's `ActivatedEntry`, made by admission.py when it fires so."""
    segment: Segment | None = None
    """The buffer piece of the content in recursion, made by activation.py when first needed."""
    utf8_size: int = -1
    """UTF-8 bytes of `content + "\n"` (the budget's estimate), -1 until activation.py needs it."""
    ignore_budget: bool = False
    """`entry.ignore_budget` (read for every candidate of the budget loop)."""
    rolls: bool = False
    """Probability applies: `entry.use_probability` and a probability other than 100."""
    selective: bool = False
    """Its secondary keys decide too: `entry.selective` and at least one secondary key."""
    same_pos: tuple[int, ...] = ()
    """The positions of every entry with its (book, uid), its own included (`Plan.key_pos`)."""
    simple: bool = False
    """Only its keys and the activation's state (active, failed roll, timed) decide it: enabled,
    no triggers, character filter, delay level, exclude-recursion, decorators or constant flag,
    and a non-blank primary key. `scan.scan` handles such entries in bulk."""


@dataclass
class Plan:
    """Entries in scan order, one index per shape, and every compiled key by id.

    The rest is derived once per plan for the scan loops: `by_key` the last entry per (book, uid)
    (for the timed effects), `simple` the simple entries per shape, `shape_ids` every key id per shape,
    `simple_pos` their positions, `complex` the positions of the other entries, `delaying` the
    entries with a `delay`, `delay_levels` the distinct delay-until-recursion levels ascending,
    `ignoring_budget` / `preventing` / `grouping` whether any entry has `ignore_budget` /
    `prevent_recursion` / an inclusion group,
    `timing_keys` the (book, uid) of entries with a sticky or cooldown length, `owner_pos` per shape the positions of
    the simple entries owning each primary key id,
    `key_pos` the positions of every entry per (book, uid), `entry_keys` the (book, uid) of each
    entry by position; `no_match` is filled by `scan.scan`: (shape, depth) -> position -> the
    fields of that entry's no-match `Decision` (with a detail formatter).
    """

    entries: list[Prepared]
    indexes: dict[Shape, KeyIndex]
    keys: dict[int, CompiledKey] = field(default_factory=dict)
    by_key: dict[EntryKey, WorldInfoEntry] = field(default_factory=dict)
    simple: dict[Shape, list[Prepared]] = field(default_factory=dict)
    shape_ids: dict[Shape, frozenset[int]] = field(default_factory=dict)
    complex: list[int] = field(default_factory=list)
    delaying: dict[EntryKey, WorldInfoEntry] = field(default_factory=dict)
    no_match: dict[tuple, Mapping[int, dict]] = field(default_factory=dict)
    simple_pos: dict[Shape, frozenset[int]] = field(default_factory=dict)
    delay_levels: tuple[int, ...] = ()
    ignoring_budget: bool = False
    preventing: bool = False
    grouping: bool = False
    timing_keys: frozenset[EntryKey] = frozenset()
    owner_pos: dict[Shape, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    key_pos: dict[EntryKey, tuple[int, ...]] = field(default_factory=dict)
    entry_keys: list[EntryKey] = field(default_factory=list)

    def __post_init__(self) -> None:
        entries = self.entries
        keys = self.entry_keys = list(map(_KEY, entries))
        raw = list(map(_ENTRY, entries))
        self.delay_levels = tuple(sorted(set(filter(None, map(_DELAY_LEVEL, entries)))))
        self.ignoring_budget = any(map(_IGNORE_BUDGET, raw))
        self.preventing = any(map(_PREVENT_RECURSION, raw))
        self.grouping = any(map(_GROUP_NAMES, entries))
        self.timing_keys = frozenset(compress(keys, map(any, map(_TIMING, raw))))
        self.by_key.update(zip(keys, raw))  # the last entry per (book, uid)
        self.delaying.update(compress(zip(keys, raw), map(_DELAY, raw)))
        simple = list(map(_SIMPLE, entries))
        self.complex.extend(compress(map(_POS, entries), map(not_, simple)))
        if len(self.by_key) == len(entries):  # every (book, uid) once: the usual book
            self.key_pos = {key: (pos,) for key, pos in zip(keys, map(_POS, entries))}
        else:
            same: dict[EntryKey, list[int]] = {}
            for key, p in zip(keys, entries):
                same.setdefault(key, []).append(p.pos)
            self.key_pos = {key: tuple(positions) for key, positions in same.items()}
        for p, same_pos in zip(entries, map(self.key_pos.__getitem__, keys)):
            p.same_pos = same_pos
        self._index_simple(compress(entries, simple))
        if not self.shape_ids:  # a plan built by hand: every key id its entries ask for
            ids: dict[Shape, set[int]] = {}
            for p in entries:
                ids.setdefault(p.shape, set()).update(p.key_ids)
            self.shape_ids = {shape: frozenset(k) for shape, k in ids.items()}

    def _index_simple(self, simple: Iterable[Prepared]) -> None:
        """`simple`, `simple_pos` and `owner_pos` from the simple entries in scan order."""
        by_shape: dict[Shape, dict[int, list[int]]] = {}
        for p in simple:
            shape = p.shape
            group = self.simple.get(shape)
            if group is None:
                group = self.simple[shape] = []
                by_shape[shape] = {}
            group.append(p)
            owned = by_shape[shape]
            keyed = p.keyed
            for k in (keyed[0][1],) if len(keyed) == 1 else dict.fromkeys(k for _, k in keyed):
                owned.setdefault(k, []).append(p.pos)
        self.simple_pos = {shape: frozenset(map(_POS, group)) for shape, group in self.simple.items()}
        self.owner_pos = {shape: {k: tuple(pos) for k, pos in keys.items()} for shape, keys in by_shape.items()}


_KEY, _ENTRY, _POS, _SIMPLE = attrgetter("key"), attrgetter("entry"), attrgetter("pos"), attrgetter("simple")
_DELAY_LEVEL, _GROUP_NAMES = attrgetter("delay_level"), attrgetter("group_names")
_IGNORE_BUDGET, _PREVENT_RECURSION = attrgetter("ignore_budget"), attrgetter("prevent_recursion")
_TIMING, _DELAY = attrgetter("sticky", "cooldown"), attrgetter("delay")


def order_books(books: Sequence[WorldBook | SourcedBook], strategy: int) -> list[tuple[WorldInfoEntry, WorldBook, str]]:
    """All entries as (entry, book, source) in SillyTavern's scan order.

    A book name given twice is kept once, under the highest-precedence source
    (global > chat > persona > character; first occurrence within one source).
    """
    chosen: dict[str, SourcedBook] = {}
    for item in books:
        sourced = item if isinstance(item, SourcedBook) else SourcedBook(item)
        held = chosen.get(sourced.book.name)
        if held is None or _PRECEDENCE[sourced.source] < _PRECEDENCE[held.source]:
            chosen[sourced.book.name] = sourced
    parts: dict[str, list[tuple[WorldInfoEntry, WorldBook, str]]] = {s: [] for s in _PRECEDENCE}
    for sourced in chosen.values():
        parts[sourced.source].extend((entry, sourced.book, sourced.source) for entry in sourced.book.entries)

    def by_order(items: list[tuple[WorldInfoEntry, WorldBook, str]]) -> list[tuple[WorldInfoEntry, WorldBook, str]]:
        return sorted(items, key=lambda item: -item[0].order)  # stable, like JS Array.sort

    wide = parts["global"] + parts["preset"]  # a preset's books are global lore while it is in use
    if strategy == STRATEGY_CHARACTER_FIRST:
        rest = by_order(parts["character"]) + by_order(wide)
    elif strategy == STRATEGY_GLOBAL_FIRST:
        rest = by_order(wide) + by_order(parts["character"])
    else:
        rest = by_order(wide + parts["character"])
    return by_order(parts["chat"]) + by_order(parts["persona"]) + rest


def parse_decorators(content: str) -> tuple[tuple[str, ...], str]:
    """SillyTavern `parseDecorators`: leading `@@…` lines; known ones are returned, all are removed.

    `@@@name` escapes a decorator line that follows an unknown one (fallback)."""
    if not content.startswith("@@"):
        return (), content
    decorators: list[str] = []
    lines = content.split("\n")
    new_content = content
    fallbacked = False
    for i, line in enumerate(lines):
        if not line.startswith("@@"):
            new_content = "\n".join(lines[i:])
            break
        if line.startswith("@@@") and not fallbacked:
            continue
        name = line[1:] if line.startswith("@@@") else line
        if name.startswith(KNOWN_DECORATORS):
            decorators.append(name)
            fallbacked = False
        else:
            fallbacked = True
    return tuple(decorators), new_content


class _KeyRegistry:
    """Gives each distinct (text, case, whole-word) one id; regex keys ignore case/whole-word."""

    def __init__(self, expand: Callable[[str], str]) -> None:
        self.ids: dict[tuple[bool, bool], dict[str, int]] = {}  # (case, whole-word) -> text -> id
        self.keys: dict[int, CompiledKey] = {}
        self.expand = expand
        self.lookups: dict[tuple[bool, bool], Callable[[str], tuple[str, int | None]]] = {}

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
            self.keys[key_id] = CompiledKey(key_id, text, case_sensitive, whole_words)
        return key_id

    def lookup(self, case_sensitive: bool, whole_words: bool) -> Callable[[str], tuple[str, int | None]]:
        """raw key -> (expanded trimmed key, its id; None if blank) for these settings, memoised:
        entries share many keys."""
        flags = (case_sensitive, whole_words)
        found = self.lookups.get(flags)
        if found is None:
            memo: dict[str, tuple[str, int | None]] = {}
            known = memo.get

            def found(raw: str) -> tuple[str, int | None]:
                pair = known(raw)
                if pair is None:
                    text = self.expand(raw)
                    pair = memo[raw] = (text, self.get(text, *flags) if text else None)
                return pair

            self.lookups[flags] = found
        return found


_DECISION_DEFAULTS = {f.name: f.default for f in fields(Decision) if f.default is not MISSING}
assert all(getattr(Decision, name) is value for name, value in _DECISION_DEFAULTS.items())  # class attributes
_PLACEMENT = attrgetter("position", "depth", "role", "order")
_DEFAULT_POSITION, _DEFAULT_ORDER = _DECISION_DEFAULTS["position"], _DECISION_DEFAULTS["order"]
_POSITION_TYPE = type(_DEFAULT_POSITION)
assert _DECISION_DEFAULTS["depth"] is None and _DECISION_DEFAULTS["role"] is None and type(_DEFAULT_ORDER) is int
_EXTRA_FLAGS = attrgetter(*(flag for _, flag in EXTRA_SOURCES))
_NO_EXTRAS = (False,) * len(EXTRA_SOURCES)
PLAN_CACHE_SIZE = 8
_plans: OrderedDict[tuple, tuple[tuple, Plan]] = OrderedDict()
_plans_lock = threading.Lock()  # the TUI tester activates from worker threads
_building_lock = threading.RLock()
"""Held while a missing plan is built: the chat's world-info warm-up and its token gauge ask for
the same 5,000-entry book's plan at once from two workers, and building it twice in parallel
(GIL-bound, ~1 s each) doubles the wait for both; the second waits and takes the first's."""


def _expand_within(expand_key: Callable[[str], str], key: str, where: str, deadline: EvalBudget | None) -> str:
    """`expand_key(key)`, named `where` in the build's evaluation budget (its refusals)."""
    if deadline is None:
        return expand_key(key)
    with deadline.part(where):
        return expand_key(key)


def clear_plan_cache() -> None:
    """Forget every cached plan (e.g. after editing a book in place, which callers should not do)."""
    with _plans_lock:
        _plans.clear()


def build_plan(books: Sequence[WorldBook | SourcedBook], ctx: ActivationContext, settings: WorldInfoSettings,
               index_factory: IndexFactory) -> Plan:
    """The plan for `books` (see `make_plan`), from the cache when the same book objects, names,
    plan settings and index factory were seen recently. Plans are never modified after building."""
    sourced = [item if isinstance(item, SourcedBook) else SourcedBook(item) for item in books]
    dynamic: tuple[tuple[str, str], ...] = ()
    if ctx.expand_key is not None:
        # Keys with macros beyond the names expand per step (variables, time): their expansions are part of
        # the cache key, each computed once here, in the order SillyTavern scans the entries (world-info.js
        # `substituteParams(key)`: a `{{setvar}}`/`{{incvar}}` in a key writes the step's variables).
        expand_key = ctx.expand_key
        raw = dict.fromkeys(k for s in sourced for e in s.book.entries for k in (*e.key, *e.keysecondary)
                            if "{{" in k and "{{" in substitute_names(k, ctx.char_name, ctx.user_name))
        owners: dict[str, str] = {}
        if raw:
            for e, book, _ in order_books(books, settings.character_strategy):
                for k in (*e.key, *e.keysecondary):
                    if k in raw and k not in owners:
                        owners[k] = f"book '{book.name}' entry {e.uid} key"
            raw = dict.fromkeys(owners)
        dynamic = tuple((k, _expand_within(expand_key, k, owners[k], ctx.deadline)) for k in raw)
        known = dict(dynamic)
        ctx = replace(ctx, expand_key=lambda k: known[k] if k in known else expand_key(k))
    token = (tuple((id(s.book), s.source) for s in sourced), ctx.char_name, ctx.user_name,
             settings.character_strategy, settings.case_sensitive, settings.match_whole_words,
             settings.use_group_scoring, id(index_factory), dynamic)
    # Cheap guard against the commonest in-place edits (entries added, removed or the list replaced).
    guard = tuple((id(s.book.entries), len(s.book.entries), s.book.name, s.book.scan_depth) for s in sourced)
    with _plans_lock:
        held = _plans.get(token)
        if held is not None and held[0][0] == guard:
            _plans.move_to_end(token)
            return held[1]
    with _building_lock:
        with _plans_lock:
            held = _plans.get(token)
            if held is not None and held[0][0] == guard:
                return held[1]
        with gc_paused():
            plan = make_plan(books, ctx, settings, index_factory)
        _keep_plan(token, guard, sourced, index_factory, plan)
    return plan


def _keep_plan(token: tuple, guard: tuple, sourced: Sequence[SourcedBook], index_factory: IndexFactory,
               plan: Plan) -> None:
    with _plans_lock:
        # The books and the factory are kept alive with the plan, so their ids stay theirs.
        _plans[token] = ((guard, tuple(s.book for s in sourced), index_factory), plan)
        _plans.move_to_end(token)
        while len(_plans) > PLAN_CACHE_SIZE:
            _plans.popitem(last=False)


def make_plan(books: Sequence[WorldBook | SourcedBook], ctx: ActivationContext, settings: WorldInfoSettings,
              index_factory: IndexFactory) -> Plan:
    """Sort the entries, expand and compile their keys, and build one index per buffer shape."""
    ordered = order_books(books, settings.character_strategy)
    registry = _KeyRegistry(_key_expander(ctx))
    scoring = settings.use_group_scoring or any(e.use_group_scoring for e, _, _ in ordered)
    shapes: dict[Shape, tuple[Shape, set[int]]] = {}  # one tuple per shape (compared by identity), its key ids
    names = (ctx.char_name, ctx.user_name)
    entries = [_prepare(pos, entry, book, source, settings, registry, shapes, scoring, names)
               for pos, (entry, book, source) in enumerate(ordered)]
    indexes = {shape: index_factory([registry.keys[k] for k in sorted(ids)]) for shape, ids in shapes.values()}
    return Plan(entries, indexes, registry.keys, shape_ids={shape: frozenset(ids) for shape, ids in shapes.values()})


def _prepare(pos: int, entry: WorldInfoEntry, book: WorldBook, source: str, settings: WorldInfoSettings,
             registry: _KeyRegistry, shapes: dict[Shape, tuple[Shape, set[int]]], scoring: bool,
             names: tuple[str, str]) -> Prepared:
    """One entry of `make_plan`: its keys registered, its shape and decision template."""
    case = settings.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
    whole = settings.match_whole_words if entry.match_whole_words is None else entry.match_whole_words
    lookup = registry.lookup(case, whole)
    primary = tuple(map(lookup, entry.key))
    secondary = tuple(map(lookup, entry.keysecondary)) if entry.keysecondary else ()
    keyed = tuple(pair for pair in primary if pair[1] is not None)
    if len(keyed) == len(primary):
        keyed = primary  # no blank key (the usual entry): one tuple
    ids = [k for _, k in keyed]
    if secondary:
        ids += [k for _, k in secondary if k is not None]
    # JS `group.split(/,\s*/)`: no trimming before the comma ("a ,b" gives "a ").
    group_names = tuple(g for g in _GROUP_SPLIT.split(entry.group) if g) if entry.group else ()
    raw_primary: tuple[int | None, ...] = ()
    raw_secondary: tuple[int | None, ...] = ()
    if scoring and group_names:
        raw_primary = tuple(registry.get(k, case, whole) if k else None for k in entry.key)
        raw_secondary = tuple(registry.get(k, case, whole) if k else None for k in entry.keysecondary)
        ids += [k for k in raw_primary + raw_secondary if k is not None]
    key_ids = tuple(dict.fromkeys(ids)) if len(ids) > 1 else tuple(ids)
    flags = _EXTRA_FLAGS(entry)
    extras: ExtraFlags = tuple(map(bool, flags)) if any(flags) else _NO_EXTRAS  # type: ignore[assignment]
    shape: Shape = (entry.scan_depth, None if entry.scan_depth is not None else book.scan_depth, extras)
    held = shapes.get(shape)
    if held is None:
        held = shapes[shape] = (shape, set())
    shape = held[0]
    held[1].update(key_ids)
    content = entry.content or ""
    decorators: tuple[str, ...] = ()
    if content.startswith("@@"):
        decorators, content = parse_decorators(content)
    if "{{" in content or "<" in content:  # (what `substitute_names` can replace starts so)
        content = substitute_names(content, *names)
    simple = bool(not entry.disable and not entry.triggers and entry.character_filter is None
                  and not entry.delay_until_recursion and not entry.exclude_recursion and not decorators
                  and not entry.constant and entry.key and keyed)
    return Prepared(
        pos, (book.name, entry.uid), book.name, source, entry, content, decorators, primary, secondary,
        raw_primary, raw_secondary, shape, int(entry.delay_until_recursion or 0), group_names, key_ids,
        _template(entry, book.name), keyed, simple=simple, ignore_budget=bool(entry.ignore_budget),
        rolls=bool(entry.use_probability and entry.probability != 100), selective=bool(entry.selective and secondary),
    )


def _template(entry: WorldInfoEntry, book: str) -> dict:
    """The entry's fixed `Decision` fields; placement fields equal to the `Decision` default
    (the same value of the same type) are left out."""
    template = {"book": book, "uid": entry.uid, "comment": entry.comment}
    position, depth, role, order = _PLACEMENT(entry)
    if not (position is _DEFAULT_POSITION or (type(position) is _POSITION_TYPE and position == _DEFAULT_POSITION)):
        template["position"] = position
    if depth is not None:  # the default depth and role are None: nothing else is equal to it
        template["depth"] = depth
    if role is not None:
        template["role"] = role
    if not (order is _DEFAULT_ORDER or (type(order) is int and order == _DEFAULT_ORDER)):
        template["order"] = order
    return template


def _key_expander(ctx: ActivationContext) -> Callable[[str], str]:
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
