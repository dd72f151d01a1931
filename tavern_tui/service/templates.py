"""Provides configuration templates (`tavern.templates`): a playthrough's selection intent (its
strategy snapshot, preset, chat-lore books and persona) saved under a name, then used when a new
playthrough is made (`OpeningService.new_draft(template=…)`). A template copies intent only: never
messages, trace, inbox, variables or bodies (seed 000: configuration templates)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_tui.errors import TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.persona import PersonaService
from tavern_tui.service.presets import strategy_of
from tavern_tui.store.templates import TemplateRecord


@dataclass(frozen=True, slots=True)
class TemplateView:
    """A configuration template as shown: `strategy` the snapshot's name, `preset_id` None for
    the built-in default preset, `lore` chat-lore book ids in order, `persona_id` the persona."""

    name: str
    strategy: str
    preset_id: int | None
    lore: tuple[int, ...]
    persona_id: int | None
    updated_at: datetime

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern template list --json`."""
        return {"name": self.name, "strategy": self.strategy, "preset_id": self.preset_id, "lore": list(self.lore),
                "persona_id": self.persona_id, "updated_at": self.updated_at.isoformat()}


def template_view(record: TemplateRecord) -> TemplateView:
    """`record` as a view (unknown or malformed fields read as absent)."""
    data = record.data
    strategy = data.get("strategy") if isinstance(data.get("strategy"), dict) else {}
    preset = data.get("preset_id")
    persona = data.get("persona_id")
    lore = data.get("lore") if isinstance(data.get("lore"), list) else []
    return TemplateView(record.name, str(strategy.get("name") or ""), preset if isinstance(preset, int) else None,
                        tuple(b for b in lore if isinstance(b, int)), persona if isinstance(persona, int) else None,
                        record.updated_at)


class TemplateService:
    """Save, list and read configuration templates.

    Args:
        ctx: the shared settings and store.
        persona: tells which persona a playthrough plays as.
    """

    def __init__(self, ctx: ServiceContext, persona: PersonaService) -> None:
        self.ctx = ctx
        self.persona = persona

    def save(self, name: str, playthrough_id: int, *, replace: bool = False) -> TemplateView:
        """Save `playthrough_id`'s selections (strategy snapshot, preset, chat-lore books in
        binding order, the persona it plays as) as template `name`.

        Raises:
            TavernError: an empty name, or `name` taken and not `replace`. NotFound: no such playthrough.
        """
        name = name.strip()
        if not name:
            raise TavernError("a template needs a name")
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.playthroughs.get(playthrough_id)
            lore = uow.bindings.books_for("playthrough", playthrough_id)
        persona = self.persona.playthrough_persona(playthrough_id)
        data = {"strategy": strategy_of(record).snapshot(), "preset_id": record.preset_id, "lore": list(lore),
                "persona_id": persona.id}
        with self.ctx.store.unit_of_work() as uow:
            return template_view(uow.templates.save(name, data, replace=replace))

    def templates(self) -> list[TemplateView]:
        """Every template, by name."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            return [template_view(r) for r in uow.templates.list()]

    def template(self, name: str) -> tuple[TemplateView, dict[str, Any]]:
        """The template `name` and its stored strategy snapshot. Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.templates.get(name.strip())
        strategy = record.data.get("strategy")
        return template_view(record), strategy if isinstance(strategy, dict) else {}
