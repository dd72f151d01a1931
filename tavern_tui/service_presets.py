"""Provides presets and assembly strategies for the `Tavern` facade: import, list, bind to a
playthrough, apply a strategy explicitly.

Rules: issue 5 §1, §4, §7; DESIGN.md "Strategies" (editing never applies; an explicit apply
sets what later steps use and is recorded in the session log). A playthrough with no preset
bound uses SillyTavern's built-in default preset.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tavern_tui.engine.events import NewEvent, canonical_json
from tavern_tui.errors import FormatError, TavernError
from tavern_tui.formats.presets import ParsedPreset, export_preset, parse_preset
from tavern_tui.views import ImportResult, PresetView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

STRATEGIES = ("compat", "preset-slots-first", "projection")
"""Strategies this version can apply: `compat` renders the card (and world info) into one
system section; `preset-slots-first` places the preset's prompts in `prompt_order` in the native
regions (one system section, then the stored history, then the input) and names every move;
`projection` sends the request SillyTavern would build from the preset, as a request-only
array recorded in `request/assembly` (never written into chat history)."""

STRATEGY_APPLIED = "strategy/applied"
"""Event kind recording an explicit apply (strategy, preset and its hash) in the session log."""

_DEFAULT_PRESET_BYTES = b"{}"


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
        self._record_selection(record.head_session_id, record.strategy, playthrough_id)

    def apply_strategy(self: Tavern, playthrough_id: int, strategy: str) -> None:
        """Apply an assembly strategy to a playthrough: later steps use it; the apply (with the
        preset and its hash) is recorded in the session log.

        Raises:
            TavernError: unknown strategy (the message lists the known ones).
            NotFound: no such playthrough.
        """
        if strategy not in STRATEGIES:
            raise TavernError(f"unknown strategy {strategy!r}; use one of {', '.join(STRATEGIES)}")
        with self._store.unit_of_work() as uow:
            record = uow.playthroughs.set_strategy(playthrough_id, strategy)
        self._record_selection(record.head_session_id, strategy, playthrough_id)

    def _record_selection(self: Tavern, session_id: int, strategy: str | None, playthrough_id: int) -> None:
        _preset, facts = self.playthrough_preset(playthrough_id)
        self._store.events.append(session_id, [NewEvent(STRATEGY_APPLIED, None,
                                                        {"strategy": strategy or "compat", "preset": facts})])
