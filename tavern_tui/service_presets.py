"""Provides presets and assembly strategies for the `Tavern` facade: import, list, bind to a
playthrough, apply a strategy explicitly.

Rules: issue 5 §1, §4, §7; DESIGN.md "Strategies" (editing never applies; an explicit apply
sets what later steps use and is recorded in the session log). A playthrough with no preset
bound uses SillyTavern's built-in default preset.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tavern_tui.assembly.strategies import BASES, BUILTINS, COMPAT, StrategySpec, check_options
from tavern_tui.engine.events import NewEvent, canonical_json
from tavern_tui.errors import FormatError, NotFound, TavernError
from tavern_tui.formats.presets import ParsedPreset, export_preset, parse_preset
from tavern_tui.views import ImportResult, PresetView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern
    from tavern_tui.store.repositories import PlaythroughRecord

STRATEGIES = BASES
"""The built-in strategies: `compat` renders the card (and world info) into one system section;
`preset-roles-first` keeps each preset prompt's authored role in the native regions (system
prompts in the system section, user prompts as context messages that enter the history);
`preset-slots-first` places the preset's prompts in `prompt_order` in the native regions (one
system section, then the stored history, then the input) and names every move; `projection`
sends the request SillyTavern would build from the preset, as a request-only array recorded in
`request/assembly` (never written into chat history). Saved strategies are variants of these."""

STRATEGY_APPLIED = "strategy/applied"
"""Event kind recording an explicit apply (strategy, preset and its hash) in the session log."""

_DEFAULT_PRESET_BYTES = b"{}"


def strategy_of(record: PlaythroughRecord) -> StrategySpec:
    """The strategy snapshot pinned on a playthrough record (compat when nothing was applied)."""
    snap = json.loads(record.meta or "{}").get("strategy")
    if isinstance(snap, dict):
        return StrategySpec.from_snapshot(snap)
    return BUILTINS.get(record.strategy or COMPAT, BUILTINS[COMPAT])


class PresetOps:
    """Preset and strategy operations of `Tavern` (mixed into it)."""

    def import_preset_bytes(self: Tavern, payload: bytes, name: str) -> ImportResult:
        """Import a SillyTavern chat-completion preset. Connection fields (URLs, proxies,
        passwords, model names) are left out and named in a warning; the same bytes imported
        again store nothing new; a broken file stores nothing (the error has line and column)."""
        stem = Path(name).stem
        try:
            preset = parse_preset(payload, name, name=stem)
        except FormatError as exc:
            return ImportResult(name, "preset", error=str(exc))
        warnings = list(preset.warnings)
        if preset.ignored_connection_fields:
            warnings.append("connection fields ignored (not stored): " + ", ".join(preset.ignored_connection_fields))
        return self._store_import("preset", "presets", name, payload, tuple(warnings), name=preset.name,
                                  data=canonical_json(export_preset(preset)))

    def _preset_view(self: Tavern, record: Any) -> PresetView:
        preset = self._parsed_preset(record.data, record.name)
        return PresetView(record.id, record.name, len(preset.prompts), preset.order_source,
                          sum(1 for item in preset.order if item.enabled), record.source_name, record.created_at)

    def _parsed_preset(self: Tavern, data: str, name: str) -> ParsedPreset:
        key = hashlib.sha256(data.encode("utf-8")).hexdigest()
        cached = self._presets.get(key)
        if cached is None:
            cached = parse_preset(data.encode("utf-8"), name, name=name)
            self._presets[key] = cached
        return cached

    def presets(self: Tavern) -> list[PresetView]:
        """Every imported preset, by name."""
        with self._store.unit_of_work() as uow:
            records = uow.presets.all()
        return [self._preset_view(r) for r in records]

    def find_preset(self: Tavern, query: str) -> PresetView:
        """A preset by id or name (case-insensitive; the newest import). Raises NotFound."""
        return self._preset_view(self._find(query, "presets", "preset"))

    def playthrough_preset(self: Tavern, playthrough_id: int) -> tuple[ParsedPreset, dict[str, Any]]:
        """The preset a playthrough's steps use and its resource facts for the trace
        (`{"id", "name", "sha256"}`; id None for the built-in default)."""
        with self._store.unit_of_work() as uow:
            record = uow.playthroughs.get(playthrough_id)
            preset_record = uow.presets.get(record.preset_id) if record.preset_id is not None else None
        if preset_record is None:
            data = _DEFAULT_PRESET_BYTES.decode()
            return self._parsed_preset(data, "SillyTavern default"), {"id": None, "name": "SillyTavern default",
                                                                      "sha256": None}
        return (self._parsed_preset(preset_record.data, preset_record.name),
                {"id": preset_record.id, "name": preset_record.name,
                 "sha256": hashlib.sha256(preset_record.data.encode("utf-8")).hexdigest()})

    def bind_preset(self: Tavern, playthrough_id: int, preset_id: int | None) -> None:
        """Bind a preset to a playthrough (None: the built-in default). Binding is explicit and
        recorded in the session log; the preset itself is never changed by playing.

        Raises:
            NotFound: no such playthrough or preset.
        """
        with self._store.unit_of_work() as uow:
            record = uow.playthroughs.set_preset(playthrough_id, preset_id)
        self._record_selection(record.head_session_id, None, playthrough_id)

    # -- strategies -----------------------------------------------------------------------

    def strategies(self: Tavern) -> list[StrategySpec]:
        """The built-in strategies, then the newest version of every saved one."""
        with self._store.unit_of_work() as uow:
            saved = uow.strategies.latest()
        return [*BUILTINS.values(), *saved]

    def strategy_spec(self: Tavern, name: str, version: int | None = None) -> StrategySpec:
        """A strategy by name (a given version, else the newest).

        Raises:
            NotFound: no such strategy or version (the message lists the names).
        """
        if name in BUILTINS and version in (None, 1):
            return BUILTINS[name]
        with self._store.unit_of_work() as uow:
            spec = uow.strategies.get(name, version)
        if spec is None:
            names = ", ".join(s.name for s in self.strategies())
            which = f"{name!r} version {version}" if version is not None else repr(name)
            raise NotFound(f"unknown strategy {which}; strategies: {names}")
        return spec

    def save_strategy(self: Tavern, name: str, base: str, options: dict[str, Any] | None = None, *,
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
        with self._store.unit_of_work() as uow:
            return uow.strategies.add(spec, expected_version)

    def apply_strategy(self: Tavern, playthrough_id: int, strategy: str, version: int | None = None) -> StrategySpec:
        """Apply a strategy to a playthrough: later steps use this exact version (its snapshot is
        stored on the playthrough) until another apply; the apply (snapshot, preset and its
        hash) is recorded in the session log.

        Raises:
            NotFound: unknown strategy or version (the message lists the known ones), or no
                such playthrough.
        """
        spec = self.strategy_spec(strategy, version)
        with self._store.unit_of_work() as uow:
            record = uow.playthroughs.set_strategy(playthrough_id, spec.name)
            meta = json.loads(record.meta or "{}")
            meta["strategy"] = spec.snapshot()
            uow.playthroughs.set_meta(playthrough_id, json.dumps(meta, ensure_ascii=False))
        self._record_selection(record.head_session_id, spec.snapshot(), playthrough_id)
        return spec

    def applied_strategy(self: Tavern, playthrough_id: int) -> StrategySpec:
        """The strategy snapshot a playthrough's steps use (compat when nothing was applied)."""
        with self._store.unit_of_work() as uow:
            record = uow.playthroughs.get(playthrough_id)
        return strategy_of(record)

    def _record_selection(self: Tavern, session_id: int, strategy: dict[str, Any] | None, playthrough_id: int) -> None:
        _preset, facts = self.playthrough_preset(playthrough_id)
        snap = strategy or self.applied_strategy(playthrough_id).snapshot()
        self._store.events.append(session_id, [NewEvent(STRATEGY_APPLIED, None,
                                                        {"strategy": snap["name"], "snapshot": snap,
                                                         "preset": facts})])
