"""Provides `RenderingMixin`: the persona section each step sends (`persona_step`, and
`rendered_persona` for a preview), a playthrough's sensitivity ceiling, and the pin of the
revision it last sent.

Rules: seed 002 (ADR-0079), as DESIGN.md "Persona and nominations" maps them: a playthrough pins
the persona revision it last sent; a step that finds a newer revision renders it and records one
rotation with reason `persona_changed` in its trace. Only entries at or under the ceiling are
rendered, and injection-shaped entries are blocked (`persona.safety.block_injections`).
"""

from __future__ import annotations

import json
from typing import Any

from tavern_tui.persona.model import (
    DEFAULT_CEILING,
    LOCAL_PRINCIPAL,
    PERSONA_CHANGED,
    PersonaDocument,
    RenderedPersona,
    check_sensitivity,
    render_persona,
)
from tavern_tui.service.persona.base import _pin_of
from tavern_tui.service.persona.registry import RegistryMixin


class RenderingMixin(RegistryMixin):
    """The persona section of a step and the pin of the revision a playthrough last sent."""

    def rendered_persona(self, playthrough_id: int | None = None,
                         document: PersonaDocument | None = None) -> RenderedPersona:
        """The persona section as a playthrough's next step would send it (the persona it plays
        as, its sensitivity ceiling; the default persona and ceiling without a playthrough).

        Raises:
            PersonaCapExceeded: the persona is over a cap.
        """
        from tavern_tui.persona.safety import block_injections
        pin = self._persona_pin(playthrough_id) if playthrough_id else {}
        ceiling = pin.get("ceiling", DEFAULT_CEILING)
        if document is None:
            document = self.persona(self.playthrough_persona(playthrough_id).id if playthrough_id else None)
        return render_persona(document, ceiling=ceiling, scan=block_injections)

    def persona_ceiling(self, playthrough_id: int) -> str:
        """The sensitivity ceiling of a playthrough's persona section (default "normal")."""
        return str(self._persona_pin(playthrough_id).get("ceiling", DEFAULT_CEILING))

    def set_persona_ceiling(self, playthrough_id: int, ceiling: str) -> None:
        """Set the sensitivity ceiling of a playthrough's persona section (takes effect at the next step).

        Raises:
            TavernError: unknown level. NotFound: no such playthrough.
        """
        self._write_pin(playthrough_id, ceiling=check_sensitivity(ceiling, "ceiling"))

    def pin_persona(self, playthrough_id: int) -> None:
        """Pin the current revision of the playthrough's persona on a playthrough being opened
        (caps checked first).

        Raises:
            PersonaCapExceeded: over a cap; the session does not open.
        """
        rendered = self.rendered_persona(playthrough_id)
        self._write_pin(playthrough_id, version=rendered.version, id=self.playthrough_persona(playthrough_id).id)

    def _render(self, document: PersonaDocument, ceiling: str, scan: Any) -> Any:
        """`render_persona(document, ceiling=…, scan=…)`, kept per (revision, ceiling): every preview
        renders and injection-scans the same revision otherwise. A render over a cap is not kept."""
        key = (document, ceiling)
        try:
            cached = self._renders.get(key)
        except TypeError:  # a document that cannot be a key (not expected: it is frozen)
            return render_persona(document, ceiling=ceiling, scan=scan)
        if cached is None:
            cached = render_persona(document, ceiling=ceiling, scan=scan)
            if len(self._renders) >= 8:
                self._renders.clear()
            self._renders[key] = cached
        return cached

    def persona_step(self, playthrough_id: int, *, pin: bool,
                      meta: str | None = None) -> tuple[str, dict[str, Any]]:
        """The persona section for a step and its trace facts (`{"version", "entries", "left_out",
        "blocked", "tokens", "persona", "name", "rotation"?}`), from the persona the playthrough
        plays as (`playthrough_persona`). A revision other than the pinned one (newer, or another
        persona's after a switch) is one rotation with reason `persona_changed`; `pin` (a real
        step, not a preview) moves the pin to it;
        `meta`: the playthrough's meta JSON when the caller has read it already.

        Raises:
            PersonaCapExceeded: over a cap.
        """
        from tavern_tui.persona.safety import block_injections
        # Read once: the ceiling, the lock and the pinned version.
        pinned = _pin_of(meta) if meta is not None else self._persona_pin(playthrough_id)
        playing = self.playthrough_persona(meta=json.dumps({"persona": pinned}))
        document = self.persona(playing.id)
        rendered = self._render(document, pinned.get("ceiling", DEFAULT_CEILING), block_injections)
        facts = {**rendered.to_json(), "persona": playing.id, "name": document.name}
        # A pin without an id was written before there were several personas: the first one's.
        pinned_id = pinned.get("id", playing.id if playing.principal == LOCAL_PRINCIPAL else None)
        moved = (pinned.get("version"), pinned_id) != (document.version, playing.id)
        if pinned.get("version") is not None and moved:
            facts["rotation"] = {"from": pinned["version"], "to": document.version, "reason": PERSONA_CHANGED}
            if pinned_id != playing.id:  # switched to another persona (a lock, a new default)
                facts["rotation"].update(from_persona=pinned_id, to_persona=playing.id)
        if pin and moved:
            self._write_pin(playthrough_id, version=document.version, id=playing.id)
        return rendered.text, facts
