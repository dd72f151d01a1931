"""Reads and writes world books (lorebooks): SillyTavern World Info files, Chub hybrids, Agnai,
NovelAI, RisuAI, V3 `lorebook_v3` files and a card's embedded `character_book`.

Every reader returns a `tavern_tui.lore.model.WorldBook` whose entries carry SillyTavern 1.18
field values (`newWorldInfoEntryDefinition` defaults fill what a file leaves out; format-digest
§b.2). Fields the model does not name stay in `extra` so `to_st_json` / `to_character_book`
give them back. Pure: bytes/dicts in, objects/dicts out.
"""

from __future__ import annotations

import copy
from pathlib import PurePath
from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import load_json_object, type_name
from tavern_tui.formats.sniff import WORLD_BOOK, sniff_kind
from tavern_tui.formats.worldinfo_fields import FIELD_PLAN, ST_FIELDS, Invalid, coerce_value, uid_of
from tavern_tui.formats.worldinfo_foreign import (
    BOOK_CONSUMED,
    EXT_KEYS,
    FOREIGN,
    RawEntry,
    card_entries,
    iter_objects,
)
from tavern_tui.lore.model import (
    CharacterFilter,
    Position,
    Role,
    SelectiveLogic,
    WorldBook,
    WorldInfoEntry,
)

_ST_NAMES = frozenset({"uid"} | {camel for camel, _, _ in ST_FIELDS})
_V2_MARKERS = frozenset({"keys", "secondary_keys", "id", "enabled", "insertion_order"})
_BOOK_FIELDS = ("name", "description", "scan_depth", "token_budget", "recursive_scanning")

# --- public API ------------------------------------------------------------------------


def parse_world_book(data: bytes, file: str) -> WorldBook:
    """Parse a world-book file (UTF-8 JSON, BOM allowed), recognising the format by content.

    Formats, tested in this order:
    - `spec: "lorebook_v3"` → `data` is a character_book (source_format "lorebook_v3");
    - `lorebookVersion` → NovelAI, `kind: "memory"` → Agnai, `type: "risu"` → RisuAI
      (ST `importWorldInfo` + `convertNovelLorebook`/`convertAgnaiMemoryBook`/
      `convertRisuLorebook`; see `worldinfo_foreign`);
    - `entries` object → SillyTavern World Info: uid = the entry's `uid`, else the dict key;
      missing fields get the 1.18 defaults. If entries also carry V2 fields (`keys`, `id`,
      `enabled`, `insertion_order`, `secondary_keys`: Chub "SillyTavern" exports) the result is
      source_format "st+v2"; ST fields win, the V2 ones are used only where the ST one is
      absent, and all of them stay in `extra` verbatim;
    - `entries` list → ST entries (uid ?? index) if any has `key`/`uid`, else a bare V2
      character_book (source_format "card").
    Book: `name` (the file's, else the file's stem), `description`, `scan_depth`,
    `token_budget`, `recursive_scanning` (absent → None, i.e. "use the global"); every other
    top-level field goes to `extra`.

    Coercion: numeric strings are accepted for numbers; `key` may be a comma-separated string
    (split, trimmed); `delayUntilRecursion` true → 1, false → 0; `role` null → system;
    null tri-states stay None; null elsewhere means "default"; position also accepts
    "before_char"/"after_char".

    A broken entry fails the whole file: nothing is half-imported.

    Raises:
        FormatError(file, reason, field): a PNG; not UTF-8; not JSON (line/column); top level not an
        object; a character card / preset / chat file (`sniff_kind`); no `entries`; `entries`
        neither object nor list; an entry not an object (field `entries["3"]` or `entries[2]`);
        a bad value (field e.g. `entries["3"].key`, `entries[2].content`, `data[0].insertorder`):
        key not a list/string, text fields not strings, numbers not numbers, position not 0-7,
        selectiveLogic not 0-3, role not 0-2; duplicate uids (both entries named).
    """
    obj = _load_json(data, file)
    stem = PurePath(file).stem or file
    if obj.get("spec") == "lorebook_v3":
        return _lorebook_v3(obj, file, stem)
    fmt = ("novelai" if "lorebookVersion" in obj else "agnai" if obj.get("kind") == "memory"
           else "risu" if obj.get("type") == "risu" else None)
    if fmt:
        return _foreign_book(obj, file, stem, fmt)
    if "entries" not in obj:
        kind = sniff_kind(obj)
        if kind not in (None, WORLD_BOOK):
            raise FormatError(file, f"this is a {kind} file, not a world book")
        raise FormatError(file, "no entries: not a world book (World Info needs an `entries` object)", "entries")
    entries = obj["entries"]
    if isinstance(entries, list) and entries and not any(
        isinstance(e, dict) and ("key" in e or "uid" in e) for e in entries
    ):
        return _card_book(obj, file, stem, "card", "", {})
    return _st_book(obj, file, stem)

def from_character_book(book: dict, file: str, name: str) -> WorldBook:
    """Convert a card's `character_book` (V2/V3 spec shape) into a WorldBook ("card").

    Follows ST 1.18 `convertCharacterBook` (world-info.js): uid = `id ?? index`; key = `keys`;
    keysecondary = `secondary_keys || []`; comment = `comment || ''`; content; constant and
    selective = value `|| false`; order = `insertion_order`; position = `extensions.position
    ?? (position == 'before_char' ? 0 : 1)`; disable = `!enabled` (absent ⇒ disabled);
    addMemo = `!!comment`; displayIndex = `extensions.display_index ?? index`; every other ST
    field from `extensions.<snake_case>` (`useProbability`, `selectiveLogic` are camelCase
    there), defaults where absent. `characterFilter` is not mapped (as in ST).

    Nothing is lost: entry fields ST does not read (`name`, `priority`, `case_sensitive`,
    unknown ones, `use_regex` unless true) go to the entry's `extra`, unknown `extensions`
    keys to `extra["extensions"]`; book fields other than name, description, scan_depth,
    token_budget, recursive_scanning and entries go to the book's `extra` (`extensions` only
    when non-empty). `to_character_book` restores them,
    so book → WorldBook → character_book → WorldBook is lossless.

    `name` is the character's name: a book without its own name is called
    "<name>'s Lorebook" (ST `importEmbeddedWorldInfo`). Error fields are prefixed
    `character_book.` (e.g. `character_book.entries[2].keys`).

    Raises:
        FormatError: as `parse_world_book`, for the entries list and each entry.
    """
    if not isinstance(book, dict):
        raise FormatError(file, f"character_book is a {type_name(book)}, not an object", "character_book")
    return _card_book(book, file, f"{name}'s Lorebook", "card", "character_book.", {})


def to_st_json(book: WorldBook) -> dict:
    """Return a SillyTavern 1.18 World Info file for `book`: `{"entries": {"<uid>": {...}},
    "name", ...}`.

    Each entry has every 1.18 field in camelCase (`characterFilter`/`displayIndex` only when
    set), then its `extra` keys (an `extra` key never overrides an ST field). Book-level
    `description` (if non-empty), `scan_depth`/`token_budget`/`recursive_scanning` (if not
    None) and `extra` are written at the top level; ST ignores them. `parse_world_book` on
    the JSON of this dict gives back an equal book, except `source_format`, which becomes
    "st" (or "st+v2" when V2 fields sit in `extra`).

    Raises:
        ValueError: two entries with the same uid.
    """
    entries: dict[str, dict] = {}
    for entry in book.entries:
        if str(entry.uid) in entries:
            raise ValueError(f"duplicate uid {entry.uid!r} in world book {book.name!r}")
        entries[str(entry.uid)] = _entry_to_st(entry)
    out: dict[str, Any] = {"entries": entries, "name": book.name}
    if book.description:
        out["description"] = book.description
    for field in _BOOK_FIELDS[2:]:
        if getattr(book, field) is not None:
            out[field] = getattr(book, field)
    for key, value in book.extra.items():
        out.setdefault(key, copy.deepcopy(value))
    return out


def to_character_book(book: WorldBook) -> dict:
    """Return a V2/V3 `character_book` for `book` (ST server `convertWorldInfoToCharacterBook`).

    Entries: `{id: uid, keys, secondary_keys, comment, content, constant, selective,
    insertion_order: order, enabled: !disable, position: 'before_char' if position == 0 else
    'after_char', use_regex: true, extensions: {...extra["extensions"], position,
    exclude_recursion, display_index, probability, useProbability, depth, selectiveLogic,
    outlet_name, group, ..., triggers, ignore_budget}}` plus the entry's other `extra` keys.
    Differences from ST, for losslessness: `use_group_scoring` None stays null (ST writes
    false); `use_regex` keeps a non-true value found in `extra`; a set `character_filter` is
    written as `extensions.characterFilter` (ST drops it). Book: `name`, `description`,
    `scan_depth`, `token_budget`, `recursive_scanning` when set, `extensions` (always, the
    V2 validator requires it) and the other `extra` keys except `originalData`.
    """
    entries = []
    for entry in book.entries:
        st = _entry_to_st(entry)
        kept = entry.extra.get("extensions")
        ext = copy.deepcopy(kept) if isinstance(kept, dict) else {}
        ext.update({key: st[camel] for camel, key in EXT_KEYS.items() if camel in st})
        if "characterFilter" in st:
            ext["characterFilter"] = st["characterFilter"]
        out = {
            "id": entry.uid, "keys": list(entry.key), "secondary_keys": list(entry.keysecondary),
            "comment": entry.comment, "content": entry.content, "constant": entry.constant,
            "selective": entry.selective, "insertion_order": entry.order, "enabled": not entry.disable,
            "position": "before_char" if entry.position == Position.BEFORE_CHAR else "after_char",
            "use_regex": entry.extra.get("use_regex", True), "extensions": ext,
        }
        for key, value in entry.extra.items():
            out.setdefault(key, copy.deepcopy(value))
        entries.append(out)
    result: dict[str, Any] = {"name": book.name}
    if book.description:
        result["description"] = book.description
    for field in _BOOK_FIELDS[2:]:
        if getattr(book, field) is not None:
            result[field] = getattr(book, field)
    extensions = book.extra.get("extensions")
    result["extensions"] = copy.deepcopy(extensions) if isinstance(extensions, dict) else {}
    for key, value in book.extra.items():
        if key != "originalData":
            result.setdefault(key, copy.deepcopy(value))
    result["entries"] = entries
    return result


# --- building --------------------------------------------------------------------------


def _load_json(data: bytes, file: str) -> dict:
    if not data.strip():
        raise FormatError(file, "file is empty")
    if data.startswith(b"\x89PNG\r\n\x1a\n"):  # cards, NovelAI `naidata` images: not read here
        raise FormatError(file, "this is a PNG image (a character card?), not a world book JSON file")
    return load_json_object(data, file)


def _lorebook_v3(obj: dict, file: str, stem: str) -> WorldBook:
    """A `spec: "lorebook_v3"` file: its `data` is a character_book; the wrapper's other fields go to `extra`."""
    if not isinstance(obj.get("data"), dict):
        raise FormatError(file, f"lorebook_v3 data is a {type_name(obj.get('data'))}, not an object", "data")
    extra = {k: copy.deepcopy(v) for k, v in obj.items() if k not in ("spec", "data")}
    return _card_book(obj["data"], file, stem, "lorebook_v3", "data.", extra)


def _foreign_book(obj: dict, file: str, stem: str, fmt: str) -> WorldBook:
    """A NovelAI, Agnai or RisuAI book, converted; fields the converter does not read stay in `extra[fmt]`."""
    raws = FOREIGN[fmt](obj, file)
    book = _book_fields(obj if fmt == "agnai" else {}, file, stem, "")
    rest = {k: copy.deepcopy(v) for k, v in obj.items() if k not in BOOK_CONSUMED[fmt]}
    return _finish(book, raws, file, fmt, {fmt: rest} if rest else {})


def _st_book(obj: dict, file: str, stem: str) -> WorldBook:
    """SillyTavern World Info, "st+v2" when any entry carries Chub's V2 fields beside the ST ones."""
    raws = []
    hybrid = False
    for where, index, key, raw in iter_objects(obj["entries"], "entries", file):
        hybrid = hybrid or not _V2_MARKERS.isdisjoint(raw)
        extra = {} if raw.keys() <= _ST_NAMES else {k: copy.deepcopy(v) for k, v in raw.items() if k not in _ST_NAMES}
        fallback = index if key is None else uid_of(key)  # a text key: never refused
        raws.append(RawEntry(where, raw, {}, extra, key if fallback is None else fallback))
    book = _book_fields(obj, file, stem, "")
    extra = {k: copy.deepcopy(v) for k, v in obj.items() if k not in _BOOK_FIELDS and k != "entries"}
    return _finish(book, raws, file, "st+v2" if hybrid else "st", extra)


def _book_fields(obj: dict, file: str, fallback_name: str, prefix: str) -> dict[str, Any]:
    """name/description/scan_depth/token_budget/recursive_scanning of a book object."""
    name, description = (
        "" if obj.get(k) is None else coerce_value("text", obj[k], file, prefix + k) for k in ("name", "description")
    )
    return {
        "name": name or fallback_name,
        "description": description,
        "scan_depth": coerce_value("int", obj.get("scan_depth"), file, prefix + "scan_depth"),
        "token_budget": coerce_value("int", obj.get("token_budget"), file, prefix + "token_budget"),
        "recursive_scanning": coerce_value("bool", obj.get("recursive_scanning"), file, prefix + "recursive_scanning"),
    }


def _card_book(book: dict, file: str, fallback_name: str, fmt: str, prefix: str, extra: dict) -> WorldBook:
    """A character_book-shaped dict → WorldBook (ST `convertCharacterBook`, see `from_character_book`)."""
    raws = card_entries(book, file, prefix)
    extra.update({k: copy.deepcopy(v) for k, v in book.items() if k not in _BOOK_FIELDS and k != "entries"})
    if extra.get("extensions") in (None, {}):
        extra.pop("extensions", None)  # written back as {} by to_character_book
    elif not isinstance(extra["extensions"], dict):
        kind = type_name(extra["extensions"])
        raise FormatError(file, f"extensions is a {kind}, not an object", prefix + "extensions")
    return _finish(_book_fields(book, file, fallback_name, prefix), raws, file, fmt, extra)


def _finish(fields: dict, raws: list[RawEntry], file: str, fmt: str, extra: dict) -> WorldBook:
    """Coerce every raw entry (all-or-nothing), check uids are unique, build the book."""
    entries: list[WorldInfoEntry] = []
    seen: dict[int | str, str] = {}
    for raw in raws:
        entry = _build_entry(raw, file)
        if entry.uid in seen:
            reason = f"duplicate uid {entry.uid!r}: {seen[entry.uid]} has the same uid"
            raise FormatError(file, reason, f"{raw.where}.{raw.names.get('uid', 'uid')}")
        seen[entry.uid] = raw.where
        entries.append(entry)
    return WorldBook(entries=entries, source_format=fmt, extra=extra, **fields)


def _build_entry(raw: RawEntry, file: str) -> WorldInfoEntry:
    """One SillyTavern-shaped raw entry → WorldInfoEntry; absent or null values get defaults."""
    st = raw.st
    uid = None
    for field in ("uid", "id"):
        if st.get(field) is not None:
            try:
                uid = uid_of(st[field])
            except Invalid as bad:
                raise FormatError(file, bad.reason, _loc(raw, field)) from None
            break
    values: dict[str, Any] = {}
    for camel, attr, coerce, same, blank_is_null, fallback in FIELD_PLAN:
        field, value = camel, st.get(camel)
        if type(value) is same:  # a string for a text field, a boolean for a flag: kept as it is
            values[attr] = value
            continue
        if value is None and fallback and st.get(fallback) is not None:  # (an entry may hold a "" key)
            field, value = fallback, st[fallback]
        if value is None or (blank_is_null and isinstance(value, str) and not value.strip()):
            continue  # absent, null or "" → the 1.18 default (None for tri-states and timed effects)
        try:
            coerced = coerce(value)
        except Invalid as bad:  # the location is built for an error only
            raise FormatError(file, bad.reason, _loc(raw, field) + bad.suffix) from None
        values[attr] = (not coerced) if field == "enabled" else coerced
    return WorldInfoEntry(uid=raw.fallback_uid if uid is None else uid, extra=raw.extra, **values)


def _loc(raw: RawEntry, field: str) -> str:
    """How an error names `field` of `raw`: the entry, then the source field it came from."""
    return f"{raw.where}.{raw.names.get(field, field)}"


def _entry_to_st(entry: WorldInfoEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"uid": entry.uid}
    for camel, attr, _kind in ST_FIELDS:
        value = getattr(entry, attr)
        if isinstance(value, (Position, SelectiveLogic, Role)):
            value = int(value)
        elif isinstance(value, CharacterFilter):
            value = {"isExclude": value.is_exclude, "names": list(value.names), "tags": list(value.tags)}
        elif isinstance(value, list):
            value = list(value)
        if value is not None or camel not in ("characterFilter", "displayIndex"):
            out[camel] = value
    for key, value in entry.extra.items():
        out.setdefault(key, copy.deepcopy(value))
    return out
