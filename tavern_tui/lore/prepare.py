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

import threading
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain, compress, repeat
from operator import attrgetter, itemgetter, not_

from tavern_tui.lore.collector import gc_paused
from tavern_tui.lore.context import ActivationContext, SourcedBook
from tavern_tui.lore.eval_budget import EvalBudget
from tavern_tui.lore.keyregistry import KeyRegistry, key_expander, preload_usual
from tavern_tui.lore.matching import CompiledKey, IndexFactory, KeyIndex
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.lore.prepared import KNOWN_DECORATORS, Prepared, Shape, parse_decorators, prepare_entry, prepare_usual
from tavern_tui.lore.settings import (
    STRATEGY_CHARACTER_FIRST,
    STRATEGY_GLOBAL_FIRST,
    WorldInfoSettings,
)
from tavern_tui.lore.timed import EntryKey
from tavern_tui.text.names import substitute_names

__all__ = ["KNOWN_DECORATORS", "Plan", "Prepared", "Shape", "build_plan", "clear_plan_cache", "make_plan",
           "order_books", "parse_decorators"]
_PRECEDENCE = {"global": 0, "chat": 1, "persona": 2, "preset": 3, "character": 4}


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
    the simple entries owning each primary key id (a key owned by one entry: id -> position; by
    several: id -> positions in scan order),
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
    owner_pos: dict[Shape, tuple[dict[int, int], dict[int, tuple[int, ...]]]] = field(default_factory=dict)
    entry_keys: list[EntryKey] = field(default_factory=list)
    made_key_pos: dict[EntryKey, tuple[int, ...]] | None = None
    """`key_pos` once made (None until first read)."""

    def __post_init__(self) -> None:
        entries = self.entries
        if not entries:
            return
        # A field per pass would read every entry's memory once per field: one pass, transposed.
        keys, raw, positions, simple, levels, groups = map(list, zip(*map(_PLANNED, entries)))
        sticky, cooldown, delay, ignore_budget, prevent_recursion = zip(*map(_TIMED, raw))
        self.entry_keys = keys
        self.delay_levels = tuple(sorted(set(filter(None, levels))))
        self.ignoring_budget, self.preventing, self.grouping = any(ignore_budget), any(prevent_recursion), any(groups)
        self.timing_keys = frozenset(chain(compress(keys, sticky), compress(keys, cooldown)))
        self.by_key.update(zip(keys, raw))  # the last entry per (book, uid)
        self.delaying.update(compress(zip(keys, raw), delay))
        self.complex.extend(compress(positions, map(not_, simple)))
        if len(self.by_key) < len(entries):  # some (book, uid) twice (the usual book has none)
            same: dict[EntryKey, list[int]] = {}
            for key, p in zip(keys, entries):
                same.setdefault(key, []).append(p.pos)
            for p in entries:
                if len(positions := same[p.key]) > 1:
                    p.shared_pos = tuple(positions)
        self._index_simple(list(compress(entries, simple)))
        if not self.shape_ids:  # a plan built by hand: every key id its entries ask for
            ids: dict[Shape, set[int]] = {}
            for p in entries:
                ids.setdefault(p.shape, set()).update(p.key_ids)
            self.shape_ids = {shape: frozenset(k) for shape, k in ids.items()}

    @property
    def key_pos(self) -> dict[EntryKey, tuple[int, ...]]:
        """The positions of every entry per (book, uid) (`Prepared.same_pos`), made when first
        read: a run reads it only for timed entries."""
        made = self.made_key_pos
        if made is None:
            made = self.made_key_pos = dict(zip(self.entry_keys, map(_SAME_POS, self.entries)))
        return made

    def _index_simple(self, simple: list[Prepared]) -> None:
        """`simple`, `simple_pos` and `owner_pos` from the simple entries in scan order."""
        if len({*map(_SHAPE, simple)}) == 1:  # the usual book: one shape
            self.simple[simple[0].shape] = simple
        else:
            for p in simple:
                group = self.simple.get(p.shape)
                if group is None:
                    group = self.simple[p.shape] = []
                group.append(p)
        self.simple_pos = {shape: frozenset(map(_POS, group)) for shape, group in self.simple.items()}
        self.owner_pos = {shape: _owners(group) for shape, group in self.simple.items()}


def _owners(group: list[Prepared]) -> tuple[dict[int, int], dict[int, tuple[int, ...]]]:
    """Primary key id -> the position of the one entry of `group` owning it, and key id -> the
    positions (scan order) of the entries owning a key several own (each entry once per key;
    `Prepared.primary_ids`). Built in C-level passes; only the shared keys are walked."""
    ids = list(map(_PRIMARY_IDS, group))
    keys = list(chain.from_iterable(ids))
    positions = list(chain.from_iterable(map(repeat, map(_POS, group), map(len, ids))))
    one = dict(zip(keys, positions))  # (a key owned twice keeps its last owner: moved below)
    many: dict[int, tuple[int, ...]] = {}
    if len(one) < len(keys):
        counts = Counter(keys)
        shared = set(compress(counts, map((1).__lt__, counts.values())))
        chosen = list(map(shared.__contains__, keys))
        lists: defaultdict[int, list[int]] = defaultdict(list)
        for k, pos in zip(compress(keys, chosen), compress(positions, chosen)):
            lists[k].append(pos)
        many = dict(zip(lists, map(tuple, lists.values())))
        for k in many:
            del one[k]
    return one, many


_POS = attrgetter("pos")
_SHAPE, _PRIMARY_IDS, _SAME_POS = attrgetter("shape"), attrgetter("primary_ids"), attrgetter("same_pos")
_FIRST, _GROUP_SCORING = itemgetter(0), attrgetter("use_group_scoring")
_PLANNED = attrgetter("key", "entry", "pos", "simple", "delay_level", "group_names")
_TIMED = attrgetter("sticky", "cooldown", "delay", "ignore_budget", "prevent_recursion")


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


_macro_keys_held: OrderedDict[int, tuple[WorldBook, list[WorldInfoEntry], int, tuple[str, ...]]] = OrderedDict()
_MACRO_KEYS_KEPT = 64


def _macro_keys(book: WorldBook) -> tuple[str, ...]:
    """The book's primary and secondary keys holding `{{` (a macro, before the names are put
    in), in entry order; kept while the same book object comes back with the same entry list:
    every build looks, and walking a 5,000-entry book's keys took ~3 ms each time."""
    with _plans_lock:
        held = _macro_keys_held.get(id(book))
    if held is not None and held[0] is book and held[1] is book.entries and held[2] == len(book.entries):
        return held[3]
    keys = tuple(k for e in book.entries for k in (*e.key, *e.keysecondary) if "{{" in k)
    with _plans_lock:
        _macro_keys_held[id(book)] = (book, book.entries, len(book.entries), keys)
        while len(_macro_keys_held) > _MACRO_KEYS_KEPT:
            _macro_keys_held.popitem(last=False)
    return keys


def clear_plan_cache() -> None:
    """Forget every cached plan (e.g. after editing a book in place, which callers should not do)."""
    with _plans_lock:
        _plans.clear()
        _macro_keys_held.clear()


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
        raw = dict.fromkeys(k for s in sourced for k in _macro_keys(s.book)
                            if "{{" in substitute_names(k, ctx.char_name, ctx.user_name))
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
    registry = KeyRegistry(key_expander(ctx))
    scoring = settings.use_group_scoring or any(map(_GROUP_SCORING, map(_FIRST, ordered)))
    shapes: dict[Shape, tuple[Shape, set[int]]] = {}  # one tuple per shape (compared by identity), its key ids
    names = (ctx.char_name, ctx.user_name)
    lookup = preload_usual(registry, ordered, settings, scoring)
    if lookup is not None:  # the usual book: a column at a time
        entries = prepare_usual(ordered, lookup, shapes, names)
    else:
        entries = [prepare_entry(pos, entry, book, source, settings, registry, shapes, scoring, names)
                   for pos, (entry, book, source) in enumerate(ordered)]
    by_id = registry.keys.__getitem__
    indexes = {shape: index_factory(list(map(by_id, sorted(ids)))) for shape, ids in shapes.values()}
    return Plan(entries, indexes, registry.keys, shape_ids={shape: frozenset(ids) for shape, ids in shapes.values()})


