"""Provides `PersonaBase`, what every part of `PersonaService` stands on: the shared settings and
library, the persona pin in a playthrough's meta (the registry writes its lock, rendering its
version and ceiling), and the helpers that read the personas table (`_principal`, `_views`,
`_default_of`).

Rules: seed 002 (ADR-0079), as DESIGN.md "Persona and nominations" maps them: a playthrough pins
the persona revision it last sent, in its meta JSON under "persona".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from tavern_tui.errors import NotFound
from tavern_tui.persona.model import PersonaDocument, PersonaView
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService

if TYPE_CHECKING:
    from tavern_tui.store.store import UnitOfWork


def _now() -> datetime:
    return datetime.now(UTC)


def _pin_of(meta: str | None) -> dict[str, Any]:
    """The persona pin (`{"version", "ceiling"}`) in a playthrough's meta JSON ({} when none)."""
    pin = json.loads(meta or "{}").get("persona")
    return pin if isinstance(pin, dict) else {}


def _principal(uow: UnitOfWork, persona: int | None) -> tuple[int, str]:
    """(id, principal) of a persona (None: the default one; the oldest when none is marked).

    Raises:
        NotFound: no such persona.
    """
    rows = uow.personas.personas()
    if persona is None:
        row = next((r for r in rows if r[2]), rows[0] if rows else None)
    else:
        row = next((r for r in rows if r[0] == persona), None)
    if row is None:
        raise NotFound(f"no persona {persona}" if persona is not None else "no persona (the database predates 0013)")
    return row[0], row[1]


def _views(uow: UnitOfWork) -> list[PersonaView]:
    """Every persona as a view, oldest first (the first is the default when none is marked)."""
    rows = uow.personas.personas()
    marked = any(r[2] for r in rows)
    out = []
    for index, (persona_id, principal, is_default, data) in enumerate(rows):
        doc = uow.personas.current(principal)
        out.append(PersonaView(persona_id, principal, doc.name, doc.version, len(doc.entries),
                               is_default or (not marked and index == 0), str(data.get("st_key") or ""),
                               doc.lorebook))
    return out


def _default_of(views: Sequence[PersonaView]) -> PersonaView:
    """The default persona among `views`. Raises NotFound when there is none."""
    found = next((v for v in views if v.default), views[0] if views else None)
    if found is None:
        raise NotFound("no persona")
    return found


class PersonaBase:
    """The state every part of `PersonaService` shares, and the persona pin of a playthrough.

    Args:
        ctx: the shared settings, store and provider (the model extractor streams from it).
        library: finds the world book a persona backup names.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService) -> None:
        self.ctx = ctx
        self.library = library
        self._renders: dict[tuple[PersonaDocument, str], Any] = {}  # `_render`

    def _persona_pin(self, playthrough_id: int) -> dict[str, Any]:
        return _pin_of(self.ctx.playthrough_record(playthrough_id).meta)

    def _write_pin(self, playthrough_id: int, **values: Any) -> None:
        with self.ctx.store.unit_of_work() as uow:
            meta = json.loads(uow.playthroughs.get(playthrough_id).meta or "{}")
            meta["persona"] = {**(meta.get("persona") if isinstance(meta.get("persona"), dict) else {}), **values}
            uow.playthroughs.set_meta(playthrough_id, json.dumps(meta, ensure_ascii=False))
