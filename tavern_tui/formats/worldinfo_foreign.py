"""Turns non-SillyTavern entry shapes (V2/V3 character_book, Agnai, NovelAI, RisuAI) into
SillyTavern-shaped raw entries.

Helper module of `tavern_tui.formats.worldinfo`, which validates and coerces what these
functions return (so every format gets the same checks and error messages). The mappings are
SillyTavern 1.18's `convertCharacterBook`, `convertAgnaiMemoryBook`, `convertNovelLorebook` and
`convertRisuLorebook` (public/scripts/world-info.js; format-digest §b.1, §b.7). For the three
foreign formats each entry's uid is its index and the source fields the converter does not
read are kept under `extra[<format>]` ("agnai", "novelai", "risu"), never at the top level, so
an exported SillyTavern file is not re-detected as the foreign format.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any, NamedTuple

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import type_name


class RawEntry(NamedTuple):
    """One entry before coercion.

    Attributes:
        where: how errors name the entry, e.g. `entries["3"]` or `data[2]`.
        st: SillyTavern camelCase fields, values as found in the file (coerced later); may also
            hold the V2 names `keys`, `secondary_keys`, `id`, `enabled`, `insertion_order`,
            which the parser uses only when the SillyTavern field is absent.
        names: SillyTavern field → the source field it came from (for error messages).
        extra: what `WorldInfoEntry.extra` gets.
        fallback_uid: the uid when neither `uid` nor `id` is given (dict key or index).
    """

    where: str
    st: dict[str, Any]
    names: dict[str, str]
    extra: dict[str, Any]
    fallback_uid: int | str

# ST field → `extensions` key of a character_book entry ([ST118] convertCharacterBook /
# convertWorldInfoToCharacterBook); note the two camelCase exceptions.
EXT_KEYS = {
    "position": "position", "excludeRecursion": "exclude_recursion", "displayIndex": "display_index",
    "probability": "probability", "useProbability": "useProbability", "depth": "depth",
    "selectiveLogic": "selectiveLogic", "outletName": "outlet_name", "group": "group",
    "groupOverride": "group_override", "groupWeight": "group_weight", "preventRecursion": "prevent_recursion",
    "delayUntilRecursion": "delay_until_recursion", "scanDepth": "scan_depth",
    "matchWholeWords": "match_whole_words",
    "useGroupScoring": "use_group_scoring", "caseSensitive": "case_sensitive", "automationId": "automation_id",
    "role": "role", "vectorized": "vectorized", "sticky": "sticky", "cooldown": "cooldown", "delay": "delay",
    "matchPersonaDescription": "match_persona_description",
    "matchCharacterDescription": "match_character_description",
    "matchCharacterPersonality": "match_character_personality",
    "matchCharacterDepthPrompt": "match_character_depth_prompt", "matchScenario": "match_scenario",
    "matchCreatorNotes": "match_creator_notes", "triggers": "triggers", "ignoreBudget": "ignore_budget",
}
_CARD_ENTRY_FIELDS = frozenset({"id", "keys", "secondary_keys", "comment", "content", "constant", "selective",
                                "insertion_order", "enabled", "position", "extensions", "use_regex"})


def _array_index(key: str) -> int | None:
    # ECMAScript "array index": canonical decimal ("0", "17", not "017" or "-1"), below 2**32 - 1.
    if key.isascii() and key.isdigit() and (key == "0" or key[0] != "0") and len(key) <= 10:
        value = int(key)
        return value if value < 2**32 - 1 else None
    return None


def js_key_order(obj: dict) -> list[tuple[str, Any]]:
    """The items of a JSON object in the order JavaScript iterates them: array-index keys
    ascending, then the other keys in insertion order (ECMAScript OrdinaryOwnPropertyKeys).
    SillyTavern reads `entries` this way, and that order breaks ties between equal `order`s."""
    indexed, named = [], []
    for key, value in obj.items():
        index = _array_index(key)
        if index is None:
            named.append((key, value))
        else:
            indexed.append((index, key, value))
    indexed.sort(key=lambda item: item[0])  # array indexes are distinct: no tie to break
    return [(key, value) for _, key, value in indexed] + named


def _quoted(key: str) -> str:
    """`key` as a JSON string; letters and digits need no escape, so no encoder call."""
    return f'"{key}"' if key.isascii() and key.isalnum() else json.dumps(key, ensure_ascii=False)


def iter_objects(container: Any, label: str, file: str) -> Iterator[tuple[str, int, str | None, dict]]:
    """Yield `(where, index, dict_key, entry)` for a dict or list of entry objects.

    Raises:
        FormatError: field `label` — the container is neither an object nor a list;
            field `where` — an entry is not an object.
    """
    if isinstance(container, dict):
        items = [(f"{label}[{_quoted(k)}]", k, v) for k, v in js_key_order(container)]
    elif isinstance(container, list):
        items = [(f"{label}[{i}]", None, v) for i, v in enumerate(container)]
    elif container is None:
        raise FormatError(file, f"no {label}: not a world book", label)
    else:
        raise FormatError(file, f"{label} is a {type_name(container)}, not an object or a list", label)
    for index, (where, key, entry) in enumerate(items):
        if not isinstance(entry, dict):
            raise FormatError(file, f"entry is a {type_name(entry)}, not an object", where)
        yield where, index, key, entry


def _rest(raw: dict, used: set[str]) -> dict:
    return {k: copy.deepcopy(v) for k, v in raw.items() if k not in used}


def _namespaced(fmt: str, rest: dict) -> dict:
    return {fmt: rest} if rest else {}


def card_entries(book: dict, file: str, prefix: str) -> list[RawEntry]:
    """A character_book's `entries` → raw entries (ST `convertCharacterBook`).

    uid ← `id ?? index`, key ← `keys`, keysecondary ← `secondary_keys`, comment, content,
    constant/selective ← value `|| false`, order ← `insertion_order`, disable ← `!enabled`
    (absent ⇒ disabled), addMemo ← `!!comment`, position ← `extensions.position ??
    (position === 'before_char' ? 0 : 1)`, displayIndex ← `extensions.display_index ?? index`,
    every other field in `EXT_KEYS` from `extensions`. `extra` gets the entry fields ST does not
    read, `use_regex` when it is not true, and the unknown `extensions` keys (as `extensions`).
    """
    out = []
    for where, index, _key, raw in iter_objects(book.get("entries"), prefix + "entries", file):
        ext = raw.get("extensions")
        if ext is None:
            ext = {}
        elif not isinstance(ext, dict):
            raise FormatError(file, f"extensions is a {type_name(ext)}, not an object", where + ".extensions")
        st = {camel: ext[key] for camel, key in EXT_KEYS.items() if ext.get(key) is not None}
        names = {camel: "extensions." + EXT_KEYS[camel] for camel in st}
        if "position" not in st:  # JS: position === 'before_char' ? before : after (so a number 0 ⇒ after)
            st["position"] = 0 if raw.get("position") == "before_char" else 1
        st.setdefault("displayIndex", index)
        st.update({
            "uid": raw.get("id"), "key": raw.get("keys"), "keysecondary": raw.get("secondary_keys"),
            "comment": raw.get("comment"), "content": raw.get("content"),
            "constant": raw.get("constant") or False, "selective": raw.get("selective") or False,
            "order": raw.get("insertion_order"), "addMemo": bool(raw.get("comment")),
            "enabled": raw.get("enabled") if raw.get("enabled") is not None else False,
        })
        names.update(uid="id", key="keys", keysecondary="secondary_keys", order="insertion_order")
        extra = _rest(raw, _CARD_ENTRY_FIELDS)
        if raw.get("use_regex", True) is not True:
            extra["use_regex"] = raw["use_regex"]
        unknown = {k: copy.deepcopy(v) for k, v in ext.items() if k not in EXT_KEYS.values()}
        if unknown:
            extra["extensions"] = unknown
        out.append(RawEntry(where, st, names, extra, index))
    return out


def agnai_entries(obj: dict, file: str) -> list[RawEntry]:
    """Agnai memory book (`kind: "memory"`) → raw entries (ST `convertAgnaiMemoryBook`).

    key ← `keywords` (else `keys`), content ← `entry` (else `content`), comment ← `name`,
    order ← `weight`, disable ← `!enabled` (absent ⇒ disabled, as in ST), addMemo ← `!!name`,
    and fixed: selective false, constant false, position 0 (before char). ST ignores the
    entry's own `position`/`selective`/`constant`; they stay in `extra["agnai"]`.
    """
    out = []
    for where, index, _key, raw in iter_objects(obj.get("entries"), "entries", file):
        key_field = "keywords" if raw.get("keywords") is not None else "keys"
        content_field = "entry" if raw.get("entry") is not None else "content"
        st = {
            "key": raw.get(key_field), "keysecondary": [], "comment": raw.get("name"),
            "content": raw.get(content_field), "constant": False, "selective": False,
            "order": raw.get("weight"), "position": 0, "addMemo": bool(raw.get("name")),
            "enabled": raw.get("enabled") if raw.get("enabled") is not None else False,
            "displayIndex": index,
        }
        names = {"key": key_field, "content": content_field, "comment": "name", "order": "weight"}
        used = {key_field, content_field, "name", "weight", "enabled"}
        out.append(RawEntry(where, st, names, _namespaced("agnai", _rest(raw, used)), index))
    return out


def novelai_entries(obj: dict, file: str) -> list[RawEntry]:
    """NovelAI lorebook (`lorebookVersion`) → raw entries (ST `convertNovelLorebook`).

    key ← `keys`, content ← `text`, comment ← `displayName`, order ←
    `contextConfig.budgetPriority ?? 0`, disable ← `!enabled`, addMemo ← displayName not blank;
    fixed: selective false, position 0. `contextConfig` and the rest stay in `extra["novelai"]`.
    """
    out = []
    for where, index, _key, raw in iter_objects(obj.get("entries"), "entries", file):
        config = raw.get("contextConfig")
        priority = config.get("budgetPriority") if isinstance(config, dict) else None
        display = raw.get("displayName")
        st = {
            "key": raw.get("keys"), "keysecondary": [], "comment": display, "content": raw.get("text"),
            "constant": False, "selective": False, "order": 0 if priority is None else priority,
            "position": 0, "addMemo": isinstance(display, str) and display.strip() != "",
            "enabled": raw.get("enabled") if raw.get("enabled") is not None else False,
            "displayIndex": index,
        }
        names = {"key": "keys", "content": "text", "comment": "displayName",
                 "order": "contextConfig.budgetPriority"}
        used = {"keys", "text", "displayName", "enabled"}
        out.append(RawEntry(where, st, names, _namespaced("novelai", _rest(raw, used)), index))
    return out


def risu_entries(obj: dict, file: str) -> list[RawEntry]:
    """RisuAI lorebook (`type: "risu"`, entries in `data`) → raw entries (ST `convertRisuLorebook`).

    key ← `key` split on commas and trimmed, keysecondary ← `secondkey` likewise, comment,
    content, constant ← `alwaysActive`, selective, order ← `insertorder`, probability ←
    `activationPercent ?? 100`, useProbability ← `activationPercent ?? true` (a number counts
    as true unless 0, as in JS); fixed: position 0 (before), disable false, addMemo true.
    """
    out = []
    for where, index, _key, raw in iter_objects(obj.get("data"), "data", file):
        percent = raw.get("activationPercent")
        use_probability = percent if percent is None or isinstance(percent, (str, bool)) else percent != 0
        use_probability = True if use_probability is None else use_probability
        st = {
            "key": raw.get("key"), "keysecondary": raw.get("secondkey") or [], "comment": raw.get("comment"),
            "content": raw.get("content"), "constant": raw.get("alwaysActive"),
            # Absent `selective` is undefined in ST, which the activation reads as false.
            "selective": raw.get("selective") if raw.get("selective") is not None else False,
            "order": raw.get("insertorder"), "position": 0, "disable": False, "addMemo": True,
            "probability": 100 if percent is None else percent, "useProbability": use_probability,
            "displayIndex": index,
        }
        names = {"keysecondary": "secondkey", "constant": "alwaysActive", "order": "insertorder",
                 "probability": "activationPercent", "useProbability": "activationPercent"}
        used = {"key", "secondkey", "comment", "content", "alwaysActive", "selective", "insertorder",
                "activationPercent"}
        out.append(RawEntry(where, st, names, _namespaced("risu", _rest(raw, used)), index))
    return out


FOREIGN = {"agnai": agnai_entries, "novelai": novelai_entries, "risu": risu_entries}
"""source_format → converter. The caller picks the format: ST's `importWorldInfo` tests
`lorebookVersion` (NovelAI), `kind === "memory"` (Agnai), `type === "risu"` (Risu)."""

BOOK_CONSUMED = {"agnai": {"entries", "name", "description", "scan_depth", "token_budget", "recursive_scanning"},
                 "novelai": {"entries"}, "risu": {"data"}}
"""Top-level fields each foreign format's book-level parsing reads; the rest go to `extra[<format>]`."""


def dropped_agnai_constants(book: Any) -> list[str]:
    """One warning per entry of an Agnai memory book that says `constant: true` (kept in
    `extra["agnai"]`), which SillyTavern's `convertAgnaiMemoryBook` sets to false: the entry then
    fires by its keywords only (issue 21 item 6: the conversion is said, not silent)."""
    out = []
    for entry in getattr(book, "entries", ()):
        agnai = entry.extra.get("agnai") if isinstance(entry.extra, dict) else None
        if isinstance(agnai, dict) and agnai.get("constant") is True:
            title = f" ({entry.comment})" if entry.comment else ""
            out.append(f"entry {entry.uid}{title}: Agnai's constant: true is dropped, as SillyTavern's conversion "
                       "does; it fires by its keywords only")
    return out
