"""Provides the scan plan: entries of all books in SillyTavern's scan order, their keys compiled
into one `KeyIndex` per buffer shape.

Rule: SillyTavern 1.18 `getSortedEntries` and `parseDecorators` (public/scripts/world-info.js;
format-digest §b.4 "Lore sources"): chat lore first, then persona lore, then global and character
lore by `world_info_character_strategy`; each part sorted by `order` descending (stable, so ties
keep book order, then entry order). Keys are expanded (`{{char}}`, `{{user}}`) and trimmed here,
once per activation, not once per scan loop.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from tavern_tui.assembly.macros import substitute_names
from tavern_tui.lore.buffer import ExtraFlags
from tavern_tui.lore.context import EXTRA_SOURCES, ActivationContext, SourcedBook
from tavern_tui.lore.jsregex import JS_SPACE_CLASS, js_trim
from tavern_tui.lore.matching import (
    CompiledKey,
    IndexFactory,
    KeyIndex,
    parse_regex_key,
)
from tavern_tui.lore.model import WorldBook, WorldInfoEntry
from tavern_tui.lore.settings import (
    STRATEGY_CHARACTER_FIRST,
    STRATEGY_GLOBAL_FIRST,
    WorldInfoSettings,
)
from tavern_tui.lore.timed import EntryKey

KNOWN_DECORATORS = ("@@activate", "@@dont_activate")
_GROUP_SPLIT = re.compile(f",[{JS_SPACE_CLASS}]*")
_PRECEDENCE = {"global": 0, "chat": 1, "persona": 2, "character": 3}

Shape = tuple["int | None", "int | None", ExtraFlags]
"""(entry scan depth, book scan depth, extra sources): entries with one shape share a buffer."""


@dataclass(eq=False)
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


@dataclass
class Plan:
    """Entries in scan order, one index per shape, and every compiled key by id."""

    entries: list[Prepared]
    indexes: dict[Shape, KeyIndex]
    keys: dict[int, CompiledKey] = field(default_factory=dict)


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

    if strategy == STRATEGY_CHARACTER_FIRST:
        rest = by_order(parts["character"]) + by_order(parts["global"])
    elif strategy == STRATEGY_GLOBAL_FIRST:
        rest = by_order(parts["global"]) + by_order(parts["character"])
    else:
        rest = by_order(parts["global"] + parts["character"])
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


def build_plan(books: Sequence[WorldBook | SourcedBook], ctx: ActivationContext, settings: WorldInfoSettings,
               index_factory: IndexFactory) -> Plan:
    """Sort the entries, expand and compile their keys, and build one index per buffer shape."""
    ordered = order_books(books, settings.character_strategy)
    registry = _KeyRegistry()
    scoring = settings.use_group_scoring or any(e.use_group_scoring for e, _, _ in ordered)
    shape_keys: dict[Shape, set[int]] = {}
    entries: list[Prepared] = []

    def expand(key: str) -> str:
        return js_trim(substitute_names(key, ctx.char_name, ctx.user_name))

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
        ids = shape_keys.setdefault(shape, set())
        ids.update(k for _, k in primary + secondary if k is not None)
        ids.update(k for k in raw_primary + raw_secondary if k is not None)
        decorators, content = parse_decorators(entry.content or "")
        entries.append(Prepared(
            pos=pos, key=(book.name, entry.uid), book=book.name, source=source, entry=entry,
            content=substitute_names(content, ctx.char_name, ctx.user_name), decorators=decorators,
            primary=primary, secondary=secondary, raw_primary=raw_primary, raw_secondary=raw_secondary,
            shape=shape, delay_level=int(entry.delay_until_recursion or 0), group_names=group_names,
        ))
    indexes = {shape: index_factory([registry.keys[k] for k in sorted(ids)]) for shape, ids in shape_keys.items()}
    return Plan(entries, indexes, registry.keys)


def _split_groups(group: str) -> list[str]:
    # JS `group.split(/,\s*/)`: no trimming before the comma ("a ,b" gives "a ").
    return _GROUP_SPLIT.split(group) if group else []
