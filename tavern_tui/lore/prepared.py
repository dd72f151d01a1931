"""Provides `Prepared`: one world-info entry ready to scan, and how a plan prepares its entries.

Rule: SillyTavern 1.18 `checkWorldInfo` and `parseDecorators` (public/scripts/world-info.js;
format-digest §b.4, §b.5): an entry's keys are expanded and trimmed (`keyregistry`), its content
loses its leading decorator lines and gets `{{char}}`/`{{user}}` expanded, its inclusion groups
are split as `group.split(/,\\s*/)`. `prepare_entry` prepares one entry; `prepare_usual` a
whole usual book at once (the same values, a column at a time).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass, fields
from functools import partial
from itertools import chain, compress, repeat
from operator import attrgetter, contains, is_, is_not, itemgetter, methodcaller, ne, not_

from tavern_tui.lore.buffer import ExtraFlags, Segment
from tavern_tui.lore.context import EXTRA_SOURCES
from tavern_tui.lore.jsregex import JS_SPACE_CLASS
from tavern_tui.lore.keyregistry import KeyRegistry
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.lore.result import Decision
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.lore.timed import EntryKey
from tavern_tui.text.names import substitute_names

KNOWN_DECORATORS = ("@@activate", "@@dont_activate")
_GROUP_SPLIT = re.compile(f",[{JS_SPACE_CLASS}]*")

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
        template: the entry's fixed `Decision` fields (book, uid, comment, placement), made when
            first read (`fixed` holds it); fields equal to the `Decision` default are left out
            (they read as the class attribute). Small instance dicts keep building thousands of
            decisions cheap.

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
    fixed: dict | None = None
    """`template` once made (None until first read)."""
    keyed: Sequence[tuple[str, int]] = ()
    """`primary` without the blank keys (what key matching walks, in key order)."""
    primary_ids: tuple[int, ...] = ()
    """The ids of `keyed`, each once, in key order (`key_ids` itself when the entry has no other key)."""
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
    shared_pos: tuple[int, ...] | None = None
    """`same_pos` when another entry has its (book, uid) too, else None."""
    simple: bool = False
    """Only its keys and the activation's state (active, failed roll, timed) decide it: enabled,
    no triggers, character filter, delay level, exclude-recursion, decorators or constant flag,
    and a non-blank primary key. `scan.scan` handles such entries in bulk."""

    @property
    def same_pos(self) -> tuple[int, ...]:
        """The positions of every entry with its (book, uid), its own included (`Plan.key_pos`)."""
        shared = self.shared_pos
        return (self.pos,) if shared is None else shared

    @property
    def template(self) -> dict:
        """The entry's fixed `Decision` fields (see the class docstring), made when first read:
        most entries of a big book never get a decision object."""
        fixed = self.fixed
        if fixed is None:
            fixed = self.fixed = _template(self.entry, self.book)
        return fixed


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


_DECISION_DEFAULTS = {f.name: f.default for f in fields(Decision) if f.default is not MISSING}
assert all(getattr(Decision, name) is value for name, value in _DECISION_DEFAULTS.items())  # class attributes
_PLACEMENT = attrgetter("position", "depth", "role", "order")
_DEFAULT_POSITION, _DEFAULT_ORDER = _DECISION_DEFAULTS["position"], _DECISION_DEFAULTS["order"]
_POSITION_TYPE = type(_DEFAULT_POSITION)
assert _DECISION_DEFAULTS["depth"] is None and _DECISION_DEFAULTS["role"] is None and type(_DEFAULT_ORDER) is int
_EXTRA_FLAGS = attrgetter(*(flag for _, flag in EXTRA_SOURCES))
_NO_EXTRAS = (False,) * len(EXTRA_SOURCES)

def prepare_entry(pos: int, entry: WorldInfoEntry, book: WorldBook, source: str, settings: WorldInfoSettings,
             registry: KeyRegistry, shapes: dict[Shape, tuple[Shape, set[int]]], scoring: bool,
             names: tuple[str, str]) -> Prepared:
    """One entry of `prepare.make_plan`: its keys registered (`registry`), its shape (the one
    tuple of `shapes` for it, whose key ids it adds to); `prepare_usual` does the same for a
    whole usual book."""
    case = settings.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
    whole = settings.match_whole_words if entry.match_whole_words is None else entry.match_whole_words
    lookup = registry.lookup(case, whole)
    primary = tuple(map(lookup, entry.key))
    secondary = tuple(map(lookup, entry.keysecondary)) if entry.keysecondary else ()
    ids = list(map(_SECOND, primary))
    if None in ids:  # a blank key (not matched)
        keyed = tuple(pair for pair in primary if pair[1] is not None)
        ids = [k for k in ids if k is not None]
    else:
        keyed = primary  # the usual entry: one tuple
    primary_ids = tuple(dict.fromkeys(ids)) if len(ids) > 1 else tuple(ids)
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
    key_ids = primary_ids if len(ids) == len(primary_ids) else tuple(dict.fromkeys(ids))  # (no other id: the same)
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
        keyed=keyed, primary_ids=primary_ids, simple=simple, ignore_budget=bool(entry.ignore_budget),
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




def prepare_usual(ordered: list[tuple[WorldInfoEntry, WorldBook, str]], lookup: Callable[[str], tuple[str, int | None]],
                  shapes: dict[Shape, tuple[Shape, set[int]]], names: tuple[str, str]) -> list[Prepared]:
    """`prepare_entry` for every entry of `ordered` (scan order) at once, a column at a time in
    C-level passes: a usual book, whose every key `lookup` reads from a dict
    (`keyregistry.preload_usual`), without group scoring (no raw key ids). The same `Prepared`
    values, and the same `shapes`, as entry by entry (tests/lore/test_usual_plan.py).

    The fields of every entry are read in one pass (`_FIELDS`, then transposed): a pass per
    field over thousands of entries costs more in memory reads than in Python."""
    n = len(ordered)
    raw, books, sources = zip(*ordered)
    (key, keysecondary, content, group, disable, triggers, character_filter, delay_until_recursion,
     exclude_recursion, constant, ignore_budget, use_probability, probability, selective, uid, scan_depth,
     *extra) = zip(*map(_FIELDS, raw))
    book_names = list(map(_NAME, books))
    primary = list(map(tuple, map(partial(map, lookup), key)))
    secondary: list[tuple[tuple[str, int | None], ...]] = [()] * n
    for i in compress(range(n), keysecondary):  # (most entries have none)
        secondary[i] = tuple(map(lookup, keysecondary[i]))
    ids = list(map(list, map(partial(map, _SECOND), primary)))
    keyed = primary.copy()
    for i in compress(range(n), map(contains, ids, repeat(None))):  # blank keys (not matched)
        keyed[i] = tuple(pair for pair in primary[i] if pair[1] is not None)
        ids[i] = [k for k in ids[i] if k is not None]
    primary_ids = list(map(tuple, map(dict.fromkeys, ids)))
    key_ids = primary_ids.copy()
    for i in compress(range(n), secondary):
        more = ids[i] + [k for _, k in secondary[i] if k is not None]
        key_ids[i] = primary_ids[i] if len(more) == len(primary_ids[i]) else tuple(dict.fromkeys(more))
    shape = _shapes(scan_depth, list(map(_SCAN_DEPTH, books)), extra, key_ids, shapes)
    contents, decorators = _contents(content, names)
    # `prepare_entry`'s `simple`: nothing but its keys decides (see `Prepared.simple`).
    simple = list(map(all, zip(map(not_, map(any, zip(
        disable, triggers, map(is_not, character_filter, repeat(None)), delay_until_recursion, exclude_recursion,
        decorators, constant))), key, keyed)))
    groups: list[tuple[str, ...]] = [()] * n
    for i in compress(range(n), group):
        groups[i] = tuple(g for g in _GROUP_SPLIT.split(group[i]) if g)
    levels = [0] * n
    for i in compress(range(n), delay_until_recursion):
        levels[i] = int(delay_until_recursion[i])
    return list(map(  # every field of `Prepared`, in order (checked below)
        Prepared, range(n), list(zip(book_names, uid)), book_names, sources, raw, contents, decorators, primary,
        secondary, repeat(()), repeat(()), shape, levels, groups, key_ids, repeat(None), keyed, primary_ids,
        repeat(None), repeat(None), repeat(-1), map(bool, ignore_budget),
        map(all, zip(use_probability, map(ne, probability, repeat(100)))), map(all, zip(selective, secondary)),
        repeat(None), simple))


assert [f.name for f in fields(Prepared)] == [
    "pos", "key", "book", "source", "entry", "content", "decorators", "primary", "secondary", "raw_primary",
    "raw_secondary", "shape", "delay_level", "group_names", "key_ids", "fixed", "keyed", "primary_ids",
    "fired_entries", "segment", "utf8_size", "ignore_budget", "rolls", "selective", "shared_pos", "simple"]
_FIELDS = attrgetter(
    "key", "keysecondary", "content", "group", "disable", "triggers", "character_filter", "delay_until_recursion",
    "exclude_recursion", "constant", "ignore_budget", "use_probability", "probability", "selective", "uid",
    "scan_depth", *(flag for _, flag in EXTRA_SOURCES))


def _shapes(depths: Sequence[int | None], book_depths: list[int | None], extra: Sequence[Sequence[bool]],
            key_ids: list[tuple[int, ...]], shapes: dict[Shape, tuple[Shape, set[int]]]) -> list[Shape]:
    """Each entry's shape (one tuple per distinct shape, the first met) from its scan depth, its
    book's and its extra-source flags (a column per flag), the key ids of each shape added to
    `shapes` (in the order the shapes are first met), as `prepare_entry` does."""
    n = len(depths)
    flags = list(zip(*extra))
    extras: list[ExtraFlags] = [_NO_EXTRAS] * n  # type: ignore[list-item]
    for i in compress(range(n), map(any, flags)):
        extras[i] = tuple(map(bool, flags[i]))  # type: ignore[assignment]
    for i in compress(range(n), map(is_not, depths, repeat(None))):
        book_depths[i] = None  # (an entry's own scan depth: the book's does not apply)
    spelled = list(zip(depths, book_depths, extras))
    held: dict[Shape, Shape] = {}
    shape = list(map(held.setdefault, spelled, spelled))
    for one in held:
        ids = shapes.setdefault(one, (one, set()))[1]
        ids.update(chain.from_iterable(key_ids if len(held) == 1 else compress(key_ids, map(is_, shape, repeat(one)))))
    return shape


def _contents(raw: Sequence[str | None], names: tuple[str, str]) -> tuple[list[str], list[tuple[str, ...]]]:
    """Each entry's content (`raw`, by entry) without its decorator lines, names expanded, and
    its decorators."""
    n = len(raw)
    contents: list[str] = list(raw)  # type: ignore[arg-type]  # (None made "" here:)
    for i in compress(range(n), map(is_, contents, repeat(None))):
        contents[i] = ""
    decorators: list[tuple[str, ...]] = [()] * n
    special = map(any, zip(map(_STARTS_DECORATED, contents), map(contains, contents, repeat("{{")),
                           map(contains, contents, repeat("<"))))
    for i in compress(range(n), special):  # (what `substitute_names` can replace starts so)
        content = contents[i]
        if content.startswith("@@"):
            decorators[i], content = parse_decorators(content)
        if "{{" in content or "<" in content:
            content = substitute_names(content, *names)
        contents[i] = content
    return contents, decorators


_SECOND = itemgetter(1)
_NAME, _SCAN_DEPTH = attrgetter("name"), attrgetter("scan_depth")
_STARTS_DECORATED = methodcaller("startswith", "@@")
