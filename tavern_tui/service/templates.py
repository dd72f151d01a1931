"""Provides configuration templates (`tavern.templates`): a playthrough's selection intent (its
strategy snapshot, preset, chat-lore books and persona) saved under a name, then used when a new
playthrough is made (`OpeningService.new_draft(template=…)`, `TemplateService.apply`). A template
copies intent only: never messages, trace, inbox, variables or bodies (seed 000: configuration
templates). Tools are configured for the whole profile (`[tools]`), so a template holds none."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tavern_tui.errors import TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.persona import PersonaService
from tavern_tui.service.presets import strategy_of
from tavern_tui.store.templates import TemplateRecord

if TYPE_CHECKING:
    from tavern_tui.service.playthroughs import PlaythroughService


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
    strategy = found if isinstance(found := data.get("strategy"), dict) else {}
    preset = data.get("preset_id")
    persona = data.get("persona_id")
    lore = found_lore if isinstance(found_lore := data.get("lore"), list) else []
    return TemplateView(record.name, str(strategy.get("name") or ""), preset if isinstance(preset, int) else None,
                        tuple(b for b in lore if isinstance(b, int)), persona if isinstance(persona, int) else None,
                        record.updated_at)


class TemplateService:
    """Save, list and read configuration templates.

    Args:
        ctx: the shared settings and store.
        persona: tells which persona a playthrough plays as.
        playthroughs: binds a template's selections to a new playthrough (`apply`); None: no `apply`.
    """

    def __init__(self, ctx: ServiceContext, persona: PersonaService,
                 playthroughs: PlaythroughService | None = None) -> None:
        self.ctx = ctx
        self.persona = persona
        self.playthroughs = playthroughs

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

    def delete(self, name: str) -> None:
        """Remove the template `name`; playthroughs made from it keep their selections. Raises NotFound."""
        with self.ctx.store.unit_of_work() as uow:
            uow.templates.delete(name.strip())

    def show(self, name: str) -> dict[str, Any]:
        """Template `name` with what its ids name now (`tavern template show`): the view's JSON plus
        `strategy_snapshot`, `preset_name` ("" for the default preset), `lore_names` and
        `persona_name`; a resource removed since reads as None. Raises NotFound."""
        view, snapshot = self.template(name)
        with self.ctx.store.unit_of_work(write=False) as uow:
            books = uow.world_books.get_many(list(view.lore))
            presets = uow.presets.get_many([view.preset_id] if view.preset_id is not None else [])
        preset = "" if view.preset_id is None else presets[view.preset_id].name if view.preset_id in presets else None
        personas = {p.id: p.name for p in self.persona.personas()}
        return {**view.to_json(), "strategy_snapshot": snapshot, "preset_name": preset,
                "lore_names": [books[b].name if b in books else None for b in view.lore],
                "persona_name": personas.get(view.persona_id) if view.persona_id is not None else None}

    def check(self, name: str) -> TemplateView:
        """Template `name` when every resource it names still exists (checked before a playthrough
        is made from it, so a bad one makes nothing).

        Raises:
            NotFound: no such template, or a preset, book, strategy version or persona it names is gone.
        """
        assert self.playthroughs is not None, "checking a template needs the playthrough service"
        view, snapshot = self.template(name)
        service = self.playthroughs
        if view.preset_id is not None:
            service.presets.find_preset(str(view.preset_id))
        for book in view.lore:
            service.lore.find_world_book(str(book))
        if snapshot.get("name"):
            service.strategies.strategy_spec(str(snapshot["name"]), _version(snapshot))
        if view.persona_id is not None:
            self.persona.find_persona(view.persona_id)
        return view

    def apply(self, name: str, playthrough_id: int) -> list[str]:
        """Give playthrough `playthrough_id` template `name`'s selections: its preset, chat-lore
        books, the strategy version it saved and its persona (locked). No message is copied.

        Returns:
            One note per change, as `PlaythroughService.apply_selection` gives them.

        Raises:
            NotFound: as `check` (nothing is changed), or no such playthrough.
        """
        view = self.check(name)
        _view, snapshot = self.template(name)
        assert self.playthroughs is not None
        service = self.playthroughs
        notes = service.apply_selection(playthrough_id, preset=str(view.preset_id) if view.preset_id else None,
                                        lore=[str(b) for b in view.lore])
        if snapshot.get("name"):
            spec = service.strategies.apply_strategy(playthrough_id, str(snapshot["name"]), _version(snapshot))
            notes.append(f"applied strategy {spec.name} v{spec.version} to playthrough {playthrough_id}")
        if view.persona_id is not None:
            persona = self.persona.use_persona(view.persona_id, playthrough_id)
            notes.append(f"playthrough {playthrough_id} plays as persona {persona.name}")
        return notes


def _version(snapshot: dict[str, Any]) -> int | None:
    """The strategy version a snapshot names (None: the newest)."""
    version = snapshot.get("version")
    return version if isinstance(version, int) and not isinstance(version, bool) else None
