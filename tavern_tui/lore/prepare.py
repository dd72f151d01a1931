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
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, field, fields, replace

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
    """

    pos: int
    key: EntryKey
    book: str
    source: str
    entry: WorldInfoEntry
    content: str
    decorators: tuple[str, ...]
    primary: list[tuple[str, int | None]]
    secondary: list[tuple[str, int | None]]
    raw_primary: list[int | None]
    raw_secondary: list[int | None]
    shape: Shape
    delay_level: int
    group_names: list[str]
    key_ids: tuple[int, ...] = ()
    template: dict = field(default_factory=dict)
    keyed: list[tuple[str, int]] = field(default_factory=list)
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
    (for the timed effects), `same_key` every entry per (book, uid), `simple` the simple entries
    per shape, `owners` the simple entries by primary key id, `shape_ids` every key id per shape,
    `simple_pos` their positions, `complex` the positions of the other entries, `delaying` the
    entries with a `delay`, `delay_levels` the distinct delay-until-recursion levels ascending,
    `ignoring_budget` / `preventing` / `grouping` whether any entry has `ignore_budget` /
    `prevent_recursion` / an inclusion group,
    `timing_keys` the (book, uid) of entries with a sticky or cooldown length, `owner_pos` per shape the positions of
    the simple entries owning each primary key id,
    `key_pos` the positions of every entry per (book, uid); `no_match` is filled by `scan.scan`:
    (shape, depth) -> position -> the fields of that entry's no-match `Decision` (with a detail
    formatter).
    """

    entries: list[Prepared]
    indexes: dict[Shape, KeyIndex]
    keys: dict[int, CompiledKey] = field(default_factory=dict)
    by_key: dict[EntryKey, WorldInfoEntry] = field(default_factory=dict)
    same_key: dict[EntryKey, list[Prepared]] = field(default_factory=dict)
    simple: dict[Shape, list[Prepared]] = field(default_factory=dict)
    owners: dict[int, list[Prepared]] = field(default_factory=dict)
    shape_ids: dict[Shape, frozenset[int]] = field(default_factory=dict)
    complex: list[int] = field(default_factory=list)
    delaying: dict[EntryKey, WorldInfoEntry] = field(default_factory=dict)
    no_match: dict[tuple, dict[int, dict]] = field(default_factory=dict)
    simple_pos: dict[Shape, frozenset[int]] = field(default_factory=dict)
    delay_levels: tuple[int, ...] = ()
    ignoring_budget: bool = False
    preventing: bool = False
    grouping: bool = False
    timing_keys: frozenset[EntryKey] = frozenset()
    owner_pos: dict[Shape, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    key_pos: dict[EntryKey, tuple[int, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.delay_levels = tuple(sorted({p.delay_level for p in self.entries if p.delay_level}))
        self.ignoring_budget = any(p.entry.ignore_budget for p in self.entries)
        self.preventing = any(p.entry.prevent_recursion for p in self.entries)
        self.grouping = any(p.group_names for p in self.entries)
        self.timing_keys = frozenset(p.key for p in self.entries if p.entry.sticky or p.entry.cooldown)
        for p in self.entries:
            if not p.simple:
                self.complex.append(p.pos)
            self.by_key[p.key] = p.entry
            if p.entry.delay:
                self.delaying[p.key] = p.entry
            self.same_key.setdefault(p.key, []).append(p)
            if p.simple:
                self.simple.setdefault(p.shape, []).append(p)
                for k in dict.fromkeys(k for _, k in p.primary if k is not None):
                    self.owners.setdefault(k, []).append(p)
        self.simple_pos = {shape: frozenset(p.pos for p in group) for shape, group in self.simple.items()}
        self.key_pos = {key: tuple(p.pos for p in same) for key, same in self.same_key.items()}
        for p in self.entries:
            p.same_pos = self.key_pos[p.key]
        by_shape: dict[Shape, dict[int, list[int]]] = {shape: {} for shape in self.simple}
        for k, owning in self.owners.items():
            for p in owning:
                by_shape[p.shape].setdefault(k, []).append(p.pos)
        self.owner_pos = {shape: {k: tuple(pos) for k, pos in keys.items()} for shape, keys in by_shape.items()}
        if not self.shape_ids:  # a plan built by hand: every key id its entries ask for
            ids: dict[Shape, set[int]] = {}
            for p in self.entries:
                ids.setdefault(p.shape, set()).update(p.key_ids)
            self.shape_ids = {shape: frozenset(k) for shape, k in ids.items()}


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

    def __init__(self) -> None:
        self.ids: dict[tuple[str, bool, bool], int] = {}
        self.keys: dict[int, CompiledKey] = {}

    def get(self, text: str, case_sensitive: bool, whole_words: bool) -> int:
        if parse_regex_key(text) is not None:
            case_sensitive, whole_words = True, False
        token = (text, case_sensitive, whole_words)
        key_id = self.ids.get(token)
        if key_id is None:
            key_id = self.ids[token] = len(self.ids)
            self.keys[key_id] = CompiledKey(key_id, text, case_sensitive, whole_words)
        return key_id


_DECISION_DEFAULTS = {f.name: f.default for f in fields(Decision) if f.default is not MISSING}
assert all(getattr(Decision, name) is value for name, value in _DECISION_DEFAULTS.items())  # class attributes
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
    registry = _KeyRegistry()
    scoring = settings.use_group_scoring or any(e.use_group_scoring for e, _, _ in ordered)
    shape_keys: dict[Shape, set[int]] = {}
    shapes: dict[Shape, Shape] = {}
    entries: list[Prepared] = []
    expand = _key_expander(ctx)
    for pos, (entry, book, source) in enumerate(ordered):
        case = settings.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
        whole = settings.match_whole_words if entry.match_whole_words is None else entry.match_whole_words
        primary = [(text, registry.get(text, case, whole) if text else None) for text in map(expand, entry.key)]
        secondary = [(text, registry.get(text, case, whole) if text else None)
                     for text in map(expand, entry.keysecondary)]
        group_names = [g for g in _split_groups(entry.group) if g]
        raw_primary: list[int | None] = []
        raw_secondary: list[int | None] = []
        if scoring and group_names:
            raw_primary = [registry.get(k, case, whole) if k else None for k in entry.key]
            raw_secondary = [registry.get(k, case, whole) if k else None for k in entry.keysecondary]
        extras: ExtraFlags = tuple(bool(getattr(entry, flag)) for _, flag in EXTRA_SOURCES)  # type: ignore[assignment]
        shape: Shape = (entry.scan_depth, None if entry.scan_depth is not None else book.scan_depth, extras)
        shape = shapes.setdefault(shape, shape)  # one tuple per shape: activation compares them by identity
        ids = shape_keys.setdefault(shape, set())
        ids.update(k for _, k in primary + secondary if k is not None)
        ids.update(k for k in raw_primary + raw_secondary if k is not None)
        decorators, content = parse_decorators(entry.content or "")
        key_ids = tuple(dict.fromkeys([k for _, k in primary + secondary if k is not None]
                                      + [k for k in raw_primary + raw_secondary if k is not None]))
        template = {"book": book.name, "uid": entry.uid, "comment": entry.comment}
        for name in ("position", "depth", "role", "order"):
            value = getattr(entry, name)
            default = _DECISION_DEFAULTS[name]
            if not (value is default or (type(value) is type(default) and value == default)):
                template[name] = value
        simple = bool(not entry.disable and not entry.triggers and entry.character_filter is None
                      and not entry.delay_until_recursion and not entry.exclude_recursion and not decorators
                      and not entry.constant and entry.key and any(k is not None for _, k in primary))
        entries.append(Prepared(
            pos=pos, key=(book.name, entry.uid), book=book.name, source=source, entry=entry,
            content=substitute_names(content, ctx.char_name, ctx.user_name), decorators=decorators,
            primary=primary, secondary=secondary, raw_primary=raw_primary, raw_secondary=raw_secondary,
            shape=shape, delay_level=int(entry.delay_until_recursion or 0), group_names=group_names,
            key_ids=key_ids, template=template, simple=simple,
            keyed=[(text, k) for text, k in primary if k is not None], ignore_budget=bool(entry.ignore_budget),
            rolls=bool(entry.use_probability and entry.probability != 100),
            selective=bool(entry.selective and secondary),
        ))
    indexes = {shape: index_factory([registry.keys[k] for k in sorted(ids)]) for shape, ids in shape_keys.items()}
    return Plan(entries, indexes, registry.keys, shape_ids={shape: frozenset(ids) for shape, ids in shape_keys.items()})


def _key_expander(ctx: ActivationContext) -> Callable[[str], str]:
    """A key's macros expanded and trimmed, memoised for the plan: many entries share a key."""
    expanded: dict[str, str] = {}

    def expand(key: str) -> str:
        # Once per distinct key: a key shared by many entries (a 2 MB expansion of
        # `{{newline::1000}}` × 2000 in each of 27 entries) is expanded and trimmed once.
        done = expanded.get(key)
        if done is None:
            named = substitute_names(key, ctx.char_name, ctx.user_name)
            if ctx.expand_key is not None and "{{" in named:
                named = ctx.expand_key(key)  # the whole engine (names included)
            done = expanded[key] = js_trim(named)
        return done

    return expand


def _split_groups(group: str) -> list[str]:
    # JS `group.split(/,\s*/)`: no trimming before the comma ("a ,b" gives "a ").
    return _GROUP_SPLIT.split(group) if group else []
