"""Provides `WorldInfoSettings`: SillyTavern's global world-info settings, with the shipped defaults.

Rule: SillyTavern 1.18 `world_info_settings` (public/scripts/world-info.js module variables,
`setWorldInfoSettings`) with the values of the shipped `default/content/settings.json`
(format-digest §b.4). Two of those differ from the code defaults: `recursive` (code false,
settings.json true) and `match_whole_words` (code false, settings.json true); we use the
shipped values because that is what a fresh SillyTavern install runs with.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: `world_info_character_strategy` values (SillyTavern `world_info_insertion_strategy`).
STRATEGY_EVENLY = 0
STRATEGY_CHARACTER_FIRST = 1
STRATEGY_GLOBAL_FIRST = 2

# SillyTavern key -> (our field, kind). Kinds: "int" (count, >= 0), "pct", "bool".
_ST_KEYS: dict[str, tuple[str, str]] = {
    "world_info_depth": ("depth", "int"),
    "world_info_budget": ("budget", "pct"),
    "world_info_budget_cap": ("budget_cap", "int"),
    "world_info_include_names": ("include_names", "bool"),
    "world_info_recursive": ("recursive", "bool"),
    "world_info_max_recursion_steps": ("max_recursion_steps", "int"),
    "world_info_min_activations": ("min_activations", "int"),
    "world_info_min_activations_depth_max": ("min_activations_depth_max", "int"),
    "world_info_case_sensitive": ("case_sensitive", "bool"),
    "world_info_match_whole_words": ("match_whole_words", "bool"),
    "world_info_use_group_scoring": ("use_group_scoring", "bool"),
    "world_info_character_strategy": ("character_strategy", "int"),
    "world_info_overflow_alert": ("overflow_alert", "bool"),
    "max_context": ("max_context", "int"),
}


@dataclass(frozen=True)
class WorldInfoSettings:
    """Global world-info activation settings (SillyTavern `getWorldInfoSettings`).

    Attributes:
        depth: scan depth in messages (`world_info_depth`); entry `scan_depth` overrides it.
            With 0 no key can match at all (SillyTavern `WorldInfoBuffer.get` returns "").
        budget: token budget in percent of `max_context` (`world_info_budget`).
        budget_cap: absolute token cap, 0 = none (`world_info_budget_cap`).
        include_names: prefix each scanned message with `Name: ` (`world_info_include_names`).
        recursive: scan activated entries' content again (`world_info_recursive`).
        max_recursion_steps: at most this many scan loops, 0 = unlimited.
        min_activations: widen the scan depth until this many entries are active, 0 = off.
        min_activations_depth_max: widen up to this depth, 0 = up to the chat length.
        case_sensitive, match_whole_words, use_group_scoring: defaults for the entries'
            tri-state fields.
        character_strategy: 0 evenly, 1 character lore first, 2 global lore first.
        overflow_alert: SillyTavern shows a toast on overflow; kept for round trips only.
        max_context: context size in tokens the budget percentage applies to (SillyTavern's
            default preset: 4095).
    """

    depth: int = 2
    budget: float = 25
    budget_cap: int = 0
    include_names: bool = True
    recursive: bool = True
    max_recursion_steps: int = 0
    min_activations: int = 0
    min_activations_depth_max: int = 0
    case_sensitive: bool = False
    match_whole_words: bool = True
    use_group_scoring: bool = False
    character_strategy: int = STRATEGY_CHARACTER_FIRST
    overflow_alert: bool = False
    max_context: int = 4095

    def __post_init__(self) -> None:
        if self.character_strategy not in (STRATEGY_EVENLY, STRATEGY_CHARACTER_FIRST, STRATEGY_GLOBAL_FIRST):
            raise ValueError(f"world_info_character_strategy must be 0, 1 or 2, got {self.character_strategy!r}")

    @property
    def token_budget(self) -> int:
        """The budget in tokens: `round(budget × max_context / 100) || 1`, then `min(·, budget_cap)`
        when the cap is > 0 (SillyTavern `checkWorldInfo`; JS `Math.round` rounds .5 up)."""
        budget = math.floor(self.budget * self.max_context / 100 + 0.5) or 1
        if self.budget_cap > 0 and budget > self.budget_cap:
            budget = self.budget_cap
        return budget

    @classmethod
    def from_st(cls, data: Mapping[str, Any]) -> WorldInfoSettings:
        """Read SillyTavern's own key names (`world_info_depth`, …, `max_context`).

        `data` may be the flat `world_info_settings` object or a whole settings.json, whose
        `world_info_settings` object is then read (its keys win over top-level ones). Missing
        keys keep our defaults. Like `setWorldInfoSettings`, a budget above 100 % resets to 25.

        Raises:
            ValueError: a value of the wrong type (e.g. a string depth that is not a number, a
                non-boolean flag) or out of range; the message names the SillyTavern key.
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"world info settings must be an object, got {type(data).__name__}")  # noqa: TRY004
        merged: dict[str, Any] = dict(data)
        nested = data.get("world_info_settings")
        if isinstance(nested, Mapping):
            merged.update(nested)
        values: dict[str, Any] = {}
        for st_key, (name, kind) in _ST_KEYS.items():
            if st_key not in merged or merged[st_key] is None:
                continue
            raw = merged[st_key]
            values[name] = _bool(st_key, raw) if kind == "bool" else _number(st_key, raw, kind)
        if values.get("budget", 0) > 100:
            values["budget"] = 25
        try:
            return cls(**values)
        except ValueError as error:
            raise ValueError(str(error)) from None

    def to_st(self) -> dict[str, Any]:
        """The settings under SillyTavern's key names (inverse of `from_st`)."""
        return {st_key: getattr(self, name) for st_key, (name, _) in _ST_KEYS.items()}


def _bool(key: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    raise ValueError(f"{key} must be true or false, got {raw!r}")


def _number(key: str, raw: Any, kind: str) -> int | float:
    if isinstance(raw, bool):
        raise ValueError(f"{key} must be a number, got {raw!r}")  # noqa: TRY004
    value: int | float
    if isinstance(raw, (int, float)):
        value = raw
    elif isinstance(raw, str):
        # SillyTavern coerces with Number(); accept numeric strings, reject the rest.
        try:
            value = float(raw.strip())
        except ValueError:
            raise ValueError(f"{key} must be a number, got {raw!r}") from None
    else:
        raise ValueError(f"{key} must be a number, got {type(raw).__name__}")  # noqa: TRY004
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{key} must be a finite number >= 0, got {raw!r}")
    if kind == "pct":
        return value
    if value != int(value):
        raise ValueError(f"{key} must be a whole number, got {raw!r}")
    return int(value)
