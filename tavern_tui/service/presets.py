"""Provides `PresetService`: chat-completion presets (import, list, find, bind to a playthrough)
and the record of a selection (strategy and preset) in the session log.

Rules: issue 5 §1, §4, §7; DESIGN.md "Strategies" (binding is explicit and recorded in the
session log). A playthrough with no preset bound uses SillyTavern's built-in default preset.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tavern_tui.assembly.strategies import BUILTINS, COMPAT, StrategySpec
from tavern_tui.engine.events import NewEvent, canonical_json
from tavern_tui.errors import FormatError, TavernError
from tavern_tui.formats.preset_model import ParsedPreset
from tavern_tui.formats.presets import export_preset, parse_preset
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.list_views import DEFAULT_PRESET_DATA, DEFAULT_PRESET_NAME, parse_stored_preset, preset_view
from tavern_tui.store.records import PlaythroughRecord
from tavern_tui.views import ImportResult, PresetView

STRATEGY_APPLIED = "strategy/applied"
"""Event kind recording an explicit apply (strategy, preset and its hash) in the session log."""


def omitted_parameters(record: PlaythroughRecord) -> tuple[str, ...]:
    """The call parameters a playthrough leaves out (`PresetService.omit_parameter`), sorted."""
    try:
        meta = json.loads(record.meta or "{}")
    except ValueError:
        return ()
    names = meta.get("omit_params") if isinstance(meta, dict) else None
    return tuple(sorted(n for n in names if isinstance(n, str))) if isinstance(names, list) else ()


def strategy_of(record: PlaythroughRecord) -> StrategySpec:
    """The strategy snapshot pinned on a playthrough record (compat when nothing was applied)."""
    snap = json.loads(record.meta or "{}").get("strategy")
    if isinstance(snap, dict):
        return StrategySpec.from_snapshot(snap)
    return BUILTINS.get(record.strategy or COMPAT, BUILTINS[COMPAT])


class PresetService:
    """Presets (`tavern.presets`).

    Args:
        ctx: the shared settings, store and provider.
        library: the shared import and look-up steps.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService) -> None:
        self.ctx = ctx
        self.library = library
        self._presets: dict[str, ParsedPreset] = {}

    def import_preset_bytes(self, payload: bytes, name: str) -> ImportResult:
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
        return self.library.store_import("preset", "presets", name, payload, tuple(warnings), name=preset.name,
                                  data=canonical_json(export_preset(preset)))

    def _preset_view(self, record: Any) -> PresetView:
        return preset_view(record, self.parsed_preset(record.data, record.name))

    def parsed_preset(self, data: str, name: str) -> ParsedPreset:
        """The preset parsed from stored data (parsed once per content and `Tavern`)."""
        key = hashlib.sha256(data.encode("utf-8")).hexdigest()
        cached = self._presets.get(key)
        if cached is None:
            cached = parse_stored_preset(data, name)
            self._presets[key] = cached
        return cached

    def presets(self) -> list[PresetView]:
        """Every imported preset, by name."""
        with self.ctx.store.unit_of_work() as uow:
            records = uow.presets.all()
        return [self._preset_view(r) for r in records]

    def find_preset(self, query: str) -> PresetView:
        """A preset by id or name (case-insensitive; the newest import). Raises NotFound."""
        return self._preset_view(self.library.find(query, "presets", "preset"))

    def playthrough_preset(self, playthrough_id: int) -> tuple[ParsedPreset, dict[str, Any]]:
        """The preset a playthrough's steps use and its resource facts for the trace
        (`{"id", "name", "sha256"}`; id None for the built-in default)."""
        return self.preset_of(self.ctx.playthrough_record(playthrough_id).preset_id)

    def preset_of(self, preset_id: int | None) -> tuple[ParsedPreset, dict[str, Any]]:
        """The preset with this id (None: the built-in default) and its facts as
        `playthrough_preset` gives them; an opening draft's preview reads it. Raises NotFound."""
        preset_record = self.ctx.per_version(("preset-record", preset_id), lambda: self._preset_record(preset_id))
        if preset_record is None:
            facts = {"id": None, "name": DEFAULT_PRESET_NAME, "sha256": None}
            return self.parsed_preset(DEFAULT_PRESET_DATA, DEFAULT_PRESET_NAME), facts
        return (self.parsed_preset(preset_record.data, preset_record.name),
                {"id": preset_record.id, "name": preset_record.name,
                 "sha256": preset_record.data_sha256})


    def _preset_record(self, preset_id: int | None) -> Any:
        with self.ctx.store.unit_of_work(write=False) as uow:
            return uow.presets.get(preset_id) if preset_id is not None else None
    def bind_preset(self, playthrough_id: int, preset_id: int | None) -> None:
        """Bind a preset to a playthrough (None: the built-in default). Binding is explicit and
        recorded in the session log; the preset itself is never changed by playing.

        Raises:
            NotFound: no such playthrough or preset.
        """
        with self.ctx.store.unit_of_work() as uow:
            record = uow.playthroughs.set_preset(playthrough_id, preset_id)
        self.record_selection(record.head_session_id, strategy_of(record).snapshot(), playthrough_id)

    def omit_parameter(self, playthrough_id: int, name: str, *, keep: bool = False) -> list[str]:
        """Leave the call parameter `name` out of this playthrough's requests (`keep`: send it
        again), the one step past an endpoint that rejects a parameter the preset fallback does
        not drop (seed 000 §3); recorded in the playthrough and named in every trace's
        adjustments. The preset itself is unchanged.

        Returns:
            The parameters left out now, sorted.

        Raises:
            NotFound: no such playthrough. TavernError: `name` is not a call parameter name.
        """
        name = name.strip()
        if not name.replace("_", "").isalnum() or name in ("model", "messages", "stream", "stream_options"):
            raise TavernError(f"{name!r} is not a call parameter that can be left out")
        with self.ctx.store.unit_of_work() as uow:
            record = uow.playthroughs.get(playthrough_id)
            meta = json.loads(record.meta or "{}")
            meta = meta if isinstance(meta, dict) else {}
            omitted = set(omitted_parameters(record))
            omitted = omitted - {name} if keep else omitted | {name}
            meta["omit_params"] = sorted(omitted)
            uow.playthroughs.set_meta(playthrough_id, json.dumps(meta, ensure_ascii=False))
        return sorted(omitted)

    def record_selection(self, session_id: int, snap: dict[str, Any], playthrough_id: int) -> None:
        """Record in the session log the strategy snapshot `snap` and the playthrough's preset
        (name and hash) as one `strategy/applied` event (an explicit apply or bind)."""
        _preset, facts = self.playthrough_preset(playthrough_id)
        self.ctx.store.events.append(session_id, [NewEvent(STRATEGY_APPLIED, None,
                                                        {"strategy": snap["name"], "snapshot": snap,
                                                         "preset": facts})])
