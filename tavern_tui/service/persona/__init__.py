"""Provides `PersonaService`: the persona document, its rendering into each step, beliefs learned
from the person's own messages, nominations, affirm and decline.

One module per responsibility, each a mixin that builds on the one below it, composed into the
one `PersonaService` (`tavern.persona`): `base` (`PersonaBase`: the shared state, the persona pin
of a playthrough, reading the personas table), `documents` (`DocumentsMixin`: the owner's edits
and imports, the caps, refusing secrets), `registry` (`RegistryMixin`: the personas, the default,
which persona a playthrough plays as; `persona_id_in`), `rendering` (`RenderingMixin`: the persona
section of a step, ceilings and the pin), `consolidation` (`ConsolidationMixin`: learning beliefs,
topping up nominations; `ConsolidationReport`) and `beliefs` (`BeliefsMixin`: beliefs,
nominations, affirm, decline, the memory snapshot; `render_snapshot`).

Rules: seed 002 (ADR-0079) and seed 001, as DESIGN.md "Persona and nominations" maps them:
- only the owner's acts write persona text (edit, import, affirm); every one refuses
  credential-shaped text before anything is stored, and carries `expected_version`;
- consolidation reads customer-origin messages only, after a step settles; it is idempotent
  (a consolidation mark per session, one support row per belief and message);
- a playthrough pins the persona revision it last sent; a step that finds a newer revision
  renders it and records one rotation with reason `persona_changed` in its trace.
"""

from tavern_tui.service.persona.beliefs import SNAPSHOT_LIMIT, BeliefsMixin, render_snapshot
from tavern_tui.service.persona.consolidation import ConsolidationReport
from tavern_tui.service.persona.registry import persona_id_in
from tavern_tui.service.persona.rendering import RenderingMixin

__all__ = ["SNAPSHOT_LIMIT", "ConsolidationReport", "PersonaService", "persona_id_in", "render_snapshot"]


class PersonaService(BeliefsMixin, RenderingMixin):
    """The persona, beliefs and nominations (`tavern.persona`).

    Args:
        ctx: the shared settings, store and provider (the model extractor streams from it).
        library: finds the world book a persona backup names.

    Attributes:
        nomination_rules: the bounds nominations are selected under (`persona.nominate`).
    """
