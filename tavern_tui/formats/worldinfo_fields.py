"""Provides the SillyTavern world-info entry fields (`ST_FIELDS`, `V2_FALLBACK`) and how each
value is coerced (`FIELD_PLAN`, `coerce_value`, `uid_of`): what `worldinfo` builds an entry with.

Rules: SillyTavern 1.18 `world-info.js` (`newWorldInfoEntryTemplate`, its `Number()` and
boolean reads) and format-digest §b.2 (entry fields, 1.18 defaults). A coercer takes a non-null
value and returns it coerced or raises `Invalid` with the reason; the caller adds the file and
the field, so a valid value costs no location string.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from enum import IntEnum
from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.jsontypes import type_name
from tavern_tui.lore.model import CharacterFilter, Position, Role, SelectiveLogic

# SillyTavern 1.18 entry fields (camelCase in files) → model attribute, coercion kind.
ST_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("key", "key", "keys"), ("keysecondary", "keysecondary", "keys"), ("comment", "comment", "text"),
    ("content", "content", "text"), ("constant", "constant", "bool"), ("vectorized", "vectorized", "bool"),
    ("selective", "selective", "bool"), ("selectiveLogic", "selective_logic", "logic"),
    ("addMemo", "add_memo", "bool"), ("order", "order", "int"), ("position", "position", "position"),
    ("disable", "disable", "bool"), ("ignoreBudget", "ignore_budget", "bool"),
    ("excludeRecursion", "exclude_recursion", "bool"), ("preventRecursion", "prevent_recursion", "bool"),
    ("delayUntilRecursion", "delay_until_recursion", "level"),
    ("matchPersonaDescription", "match_persona_description", "bool"),
    ("matchCharacterDescription", "match_character_description", "bool"),
    ("matchCharacterPersonality", "match_character_personality", "bool"),
    ("matchCharacterDepthPrompt", "match_character_depth_prompt", "bool"),
    ("matchScenario", "match_scenario", "bool"), ("matchCreatorNotes", "match_creator_notes", "bool"),
    ("probability", "probability", "number"), ("useProbability", "use_probability", "bool"),
    ("depth", "depth", "int"), ("outletName", "outlet_name", "text"), ("group", "group", "text"),
    ("groupOverride", "group_override", "bool"), ("groupWeight", "group_weight", "number"),
    ("scanDepth", "scan_depth", "int"), ("caseSensitive", "case_sensitive", "bool"),
    ("matchWholeWords", "match_whole_words", "bool"), ("useGroupScoring", "use_group_scoring", "bool"),
    ("automationId", "automation_id", "text"), ("role", "role", "role"), ("sticky", "sticky", "int"),
    ("cooldown", "cooldown", "int"), ("delay", "delay", "int"),
    ("characterFilter", "character_filter", "filter"), ("triggers", "triggers", "triggers"),
    ("displayIndex", "display_index", "int"),
)
# V2 field a Chub hybrid may carry instead of the ST one; used only when the ST field is absent.
V2_FALLBACK = {"key": "keys", "keysecondary": "secondary_keys", "order": "insertion_order", "disable": "enabled"}
_POSITION_NAMES = {"before_char": 0, "after_char": 1}
_ROLE_NAMES = {"system": 0, "user": 1, "assistant": 2}
_INT_RE = re.compile(r"[+-]?\d+")


# --- coercion ------------------------------------------------------------------------
# One coercer per kind: it takes a non-null value and returns it coerced, or raises `Invalid`
# with the reason; the caller adds the file and the field, so a valid value costs no location.

_BLANK_IS_NULL = frozenset({"int", "number", "position", "logic", "role", "level", "bool"})
_EXACT = 2**53
"""An int within ±this passes `_number` unchanged (float() of it cannot overflow)."""
_MEMBERS: dict[type[IntEnum], dict[int, IntEnum]] = {
    enum: {member.value: member for member in enum} for enum in (Position, SelectiveLogic, Role)
}


class Invalid(Exception):
    """A value a coercer refuses: `reason`, and `suffix`, what to add to the field (".isExclude")."""

    def __init__(self, reason: str, suffix: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.suffix = suffix


def uid_of(value: Any) -> int | str | None:
    """uid/id/dict key: a whole number (numeric strings too), else non-empty text (V3 ids)."""
    if type(value) is int and -_EXACT <= value <= _EXACT:
        return value  # the common case, and what the rest gives for it
    if isinstance(value, str):
        text = value.strip()
        # Past 40 digits it is no number a uid is (and int() refuses 4,300): kept as a text id.
        return int(text) if len(text) <= 40 and _INT_RE.fullmatch(text) else (text or None)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(value).is_integer():
        return int(value)
    raise Invalid(f"uid must be a whole number or text, not {value!r}")


def coerce_value(kind: str, value: Any, file: str, field: str) -> Any:
    """Coerce one value of `kind` (see `_COERCERS`); None passes through (the caller decides what
    null means). Raises FormatError naming `field`."""
    if value is None:
        return None
    try:
        return _COERCERS[kind](value)
    except Invalid as bad:
        raise FormatError(file, bad.reason, field + bad.suffix) from None


def _keys(value: Any) -> list[str]:
    if isinstance(value, str):  # some exporters write "a, b" (RisuAI always does)
        return [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        raise Invalid(f"must be a list of keys or a comma-separated string, not a {type_name(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise Invalid(f"key {i} is a {type_name(item)}, not a string")
    return list(value)


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise Invalid(f"must be a string, not a {type_name(value)}")
    return value


def _bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) or (isinstance(value, str) and value.strip().lower() in ("0", "1")):
        return float(value) != 0
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise Invalid(f"must be true or false, not {value!r}")


def _number(value: Any) -> int | float:
    """A JSON number or a numeric string (ST `Number()`); integral values become int."""
    if type(value) is int and -_EXACT <= value <= _EXACT:
        return value  # the common case, and what the rest gives for it
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            pass
    if number is None or not math.isfinite(number):
        raise Invalid(f"must be a number, not {value!r}")
    return int(number) if float(number).is_integer() else number


def _whole(value: Any) -> int:
    number = _number(value)
    if not isinstance(number, int):
        raise Invalid(f"must be a whole number, not {value!r}")
    return number


def _level(value: Any) -> int:
    if isinstance(value, bool):  # delayUntilRecursion: true = level 1
        return int(value)
    number = _whole(value)
    if number < 0:
        raise Invalid(f"must be 0 or a positive recursion level, not {number}")
    return number


def _member(enum: type[IntEnum], label: str, value: Any) -> Any:
    number = _whole(value)
    if number not in _MEMBERS[enum]:
        raise Invalid(f"must be {label}, not {number}")
    return _MEMBERS[enum][number]


def _logic(value: Any) -> SelectiveLogic:
    return _member(SelectiveLogic, "0-3", value)


def _position(value: Any) -> Position:
    if isinstance(value, str) and value in _POSITION_NAMES:
        return Position(_POSITION_NAMES[value])
    return _member(Position, "0-7", value)


def _role(value: Any) -> Role:
    if isinstance(value, str) and value.strip().lower() in _ROLE_NAMES:
        return Role(_ROLE_NAMES[value.strip().lower()])
    return _member(Role, "0-2", value)


def _triggers(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise Invalid("must be a list of generation types (strings)")
    return list(value)


def _filter(value: Any) -> CharacterFilter:
    if not isinstance(value, dict):
        raise Invalid(f"must be an object, not a {type_name(value)}")
    lists = [value.get(k) or [] for k in ("names", "tags")]
    if not all(isinstance(x, list) for x in lists):
        raise Invalid("names and tags must be lists")
    try:
        is_exclude = None if value.get("isExclude") is None else _bool(value["isExclude"])
    except Invalid as bad:
        raise Invalid(bad.reason, ".isExclude") from None
    return CharacterFilter(bool(is_exclude), [str(x) for x in lists[0]], [str(x) for x in lists[1]])


_COERCERS: dict[str, Callable[[Any], Any]] = {
    "keys": _keys, "text": _text, "bool": _bool, "number": _number, "int": _whole, "level": _level,
    "logic": _logic, "position": _position, "role": _role, "triggers": _triggers, "filter": _filter,
}
_SAME: dict[str, type] = {"text": str, "bool": bool}


class _NoValue:
    """The type no value has: kinds whose values `_build_entry` always coerces."""


FIELD_PLAN: tuple[tuple[str, str, Callable[[Any], Any], type, bool, str], ...] = tuple(
    (camel, attr, _COERCERS[kind], _SAME.get(kind, _NoValue), kind in _BLANK_IS_NULL, V2_FALLBACK.get(camel, ""))
    for camel, attr, kind in ST_FIELDS
)
"""Per ST field, in file order: camelCase name, attribute, coercer, the type whose values the
coercer returns unchanged (`_NoValue` when none), whether a blank string means null, and the V2
fallback field ("" when none)."""
