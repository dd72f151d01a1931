"""Provides `StrategySpec`: an assembly strategy as a stored, versioned object.

Rules: DESIGN.md "Strategies" and seed 000 §2.1: a strategy decides where each source lands;
editing one (a new version) never changes what a playthrough uses until it is explicitly
applied; applying records the snapshot (name, version, base, options and their hash). The four
built-in strategies are version 1 and cannot be edited; an edit starts from a copy. Pure.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.errors import TavernError

COMPAT = "compat"
ROLES_FIRST = "preset-roles-first"
SLOTS_FIRST = "preset-slots-first"
PROJECTION = "projection"
BASES = (COMPAT, ROLES_FIRST, SLOTS_FIRST, PROJECTION)
"""The built-in strategies; every stored strategy is a variant of one of them (its `base`)."""

DEFAULT_FOR_NEW = SLOTS_FIRST
"""What a new playthrough starts with (seed 000 §2.1: new openings default to preset slots first)."""

OPTIONS: dict[str, dict[str, tuple[tuple[Any, ...], Any]]] = {
    COMPAT: {},
    PROJECTION: {},
    ROLES_FIRST: {"examples": (("system", "omit"), "system"), "after_history": (("system", "context"), "system")},
    SLOTS_FIRST: {"examples": (("system", "omit"), "system")},
}
"""Options each base accepts: name → (allowed values, default). `examples`: example dialogue in
the system section, or left out; `after_history` (roles-first): system prompts SillyTavern sends
after the history (post-history instructions, in-chat injections) go to the end of the system
section, or become context messages just before the input."""


def check_options(base: str, options: dict[str, Any] | None, where: str = "strategy") -> dict[str, Any]:
    """The full option set of a strategy of `base`: defaults filled in, every value checked.

    Raises:
        TavernError: unknown base, unknown option, or a value outside the allowed set (named).
    """
    if base not in BASES:
        raise TavernError(f"{where}: unknown base {base!r}; use one of {', '.join(BASES)}")
    allowed = OPTIONS[base]
    given = dict(options or {})
    for name in given:
        if name not in allowed:
            known = ", ".join(allowed) or "none"
            raise TavernError(f"{where}: option {name!r} does not apply to {base} (options: {known})")
    out = {}
    for name, (values, default) in allowed.items():
        value = given.get(name, default)
        if value not in values or type(value) is not type(default):
            raise TavernError(f"{where}: option {name!r} must be one of {', '.join(map(str, values))}, "
                              f"not {value!r}")
        out[name] = value
    return out


@dataclass(frozen=True, slots=True)
class StrategySpec:
    """One version of a strategy.

    Attributes:
        name: unique name ("preset-slots-first", or a person's copy such as "my slots").
        version: 1 for a new strategy; each saved edit adds one.
        base: the placement it is a variant of (one of `BASES`).
        options: the base's options, complete (`check_options`).
        builtin: one of the four shipped strategies (read-only).
    """

    name: str
    version: int
    base: str
    options: dict[str, Any] = field(default_factory=dict)
    builtin: bool = False

    @property
    def sha256(self) -> str:
        """SHA-256 of the canonical JSON of base and options: what the strategy does."""
        text = json.dumps({"base": self.base, "options": self.options}, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def snapshot(self) -> dict[str, Any]:
        """The record an apply stores and every trace names: name, version, base, options, sha256."""
        return {"name": self.name, "version": self.version, "base": self.base, "options": dict(self.options),
                "sha256": self.sha256}

    @classmethod
    def from_snapshot(cls, snap: dict[str, Any]) -> StrategySpec:
        """Read `snapshot()` back (options re-checked against the base)."""
        base = str(snap.get("base") or snap.get("name") or COMPAT)
        return cls(str(snap.get("name") or base), int(snap.get("version") or 1), base,
                   check_options(base, snap.get("options")), str(snap.get("name")) in BASES)


BUILTINS: dict[str, StrategySpec] = {name: StrategySpec(name, 1, name, check_options(name, {}), True)
                                     for name in BASES}
