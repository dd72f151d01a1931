"""Provides `StrategyService`: the assembly strategies (built in and saved versions), and applying
one to a playthrough explicitly.

Rules: issue 5 §4, §7; DESIGN.md "Strategies" (editing never applies; an explicit apply sets
what later steps use and is recorded in the session log).
"""

from __future__ import annotations

import json
from typing import Any

from tavern_tui.assembly.strategies import BASES, BUILTINS, StrategySpec, check_options
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.presets import PresetService, strategy_of
from tavern_tui.store.persona import StrategyRecord

__all__ = ["STRATEGIES", "StrategyService", "strategy_of"]

STRATEGIES = BASES
"""The built-in strategies: `compat` renders the card (and world info) into one system section;
`preset-roles-first` keeps each preset prompt's authored role in the native regions (system
prompts in the system section, user prompts as context messages that enter the history);
`preset-slots-first` places the preset's prompts in `prompt_order` in the native regions (one
system section, then the stored history, then the input) and names every move; `projection`
sends the request SillyTavern would build from the preset, as a request-only array recorded in
`request/assembly` (never written into chat history). Saved strategies are variants of these."""


class StrategyService:
    """Assembly strategies (`tavern.strategies`).

    Args:
        ctx: the shared settings, store and provider.
        presets: the preset a recorded apply names.
    """

    def __init__(self, ctx: ServiceContext, presets: PresetService) -> None:
        self.ctx = ctx
        self.presets = presets

    def strategies(self) -> list[StrategySpec]:
        """The built-in strategies, then the newest version of every saved one."""
        with self.ctx.store.unit_of_work() as uow:
            saved = uow.strategies.latest()
        return [*BUILTINS.values(), *(_spec(r) for r in saved)]

    def strategy_spec(self, name: str, version: int | None = None) -> StrategySpec:
        """A strategy by name (a given version, else the newest).

        Raises:
            NotFound: no such strategy or version (the message lists the names).
        """
        if name in BUILTINS and version in (None, 1):
            return BUILTINS[name]
        with self.ctx.store.unit_of_work() as uow:
            found = uow.strategies.get(name, version)
        spec = _spec(found) if found is not None else None
        if spec is None:
            names = ", ".join(s.name for s in self.strategies())
            which = f"{name!r} version {version}" if version is not None else repr(name)
            raise NotFound(f"unknown strategy {which}; strategies: {names}")
        return spec

    def save_strategy(self, name: str, base: str, options: dict[str, Any] | None = None, *,
                      expected_version: int = 0) -> StrategySpec:
        """Save a strategy version (a new name at version 1, or the next version of a saved one).
        Saving never applies it: playthroughs keep the snapshot they applied.

        Raises:
            TavernError: a built-in name, an empty name, or bad options (named).
            Conflict: `expected_version` is not the newest saved version (0 for a new name).
        """
        name = name.strip()
        if not name:
            raise TavernError("a strategy needs a name")
        if name in BUILTINS:
            raise TavernError(f"{name!r} is built in and read-only; save a copy under another name")
        spec = StrategySpec(name, expected_version + 1, base, check_options(base, options, f"strategy {name!r}"))
        with self.ctx.store.unit_of_work() as uow:
            return _spec(uow.strategies.add(StrategyRecord(spec.name, spec.version, spec.base, spec.options),
                                            expected_version))

    def apply_strategy(self, playthrough_id: int, strategy: str, version: int | None = None) -> StrategySpec:
        """Apply a strategy to a playthrough: later steps use this exact version (its snapshot is
        stored on the playthrough) until another apply; the apply (snapshot, preset and its
        hash) is recorded in the session log.

        Raises:
            NotFound: unknown strategy or version (the message lists the known ones), or no
                such playthrough.
        """
        spec = self.strategy_spec(strategy, version)
        with self.ctx.store.unit_of_work() as uow:
            record = uow.playthroughs.set_strategy(playthrough_id, spec.name)
            meta = json.loads(record.meta or "{}")
            meta["strategy"] = spec.snapshot()
            uow.playthroughs.set_meta(playthrough_id, json.dumps(meta, ensure_ascii=False))
        self.presets.record_selection(record.head_session_id, spec.snapshot(), playthrough_id)
        return spec

    def applied_strategy(self, playthrough_id: int) -> StrategySpec:
        """The strategy snapshot a playthrough's steps use (compat when nothing was applied)."""
        with self.ctx.store.unit_of_work() as uow:
            record = uow.playthroughs.get(playthrough_id)
        return strategy_of(record)


def _spec(record: StrategyRecord) -> StrategySpec:
    """A stored strategy version as the assembly reads it."""
    return StrategySpec(record.name, record.version, record.base, record.options)
