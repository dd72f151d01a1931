"""`PersonaSnapshot`: what the persona pane shows, read by `read_snapshot` in one worker run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tavern_tui.errors import TavernError
from tavern_tui.persona.model import Belief, PersonaDocument, PersonaView, RenderedPersona
from tavern_tui.tui.screens.persona.labels import Supports

if TYPE_CHECKING:
    from tavern_tui.service import Tavern


@dataclass(frozen=True)
class PersonaSnapshot:
    """What the pane shows, read in one worker run.

    Attributes:
        document: the current revision (its version is what every write here expects).
        rendered: the section as the playthrough's next step would send it; None when the
            persona is over a cap (`render_error` says which).
        nominations: the outstanding nominations, oldest first.
        supports: each nomination's supporting messages by belief id: ((session, seq), text).
        personas: every persona (issue 20 item 6); shown: the one shown here; playing: the one
            the playthrough plays as (the default without one); locked: the chat is locked to it.
    """

    document: PersonaDocument
    rendered: RenderedPersona | None
    render_error: str = ""
    nominations: tuple[Belief, ...] = ()
    supports: Mapping[int, Supports] = field(default_factory=dict)
    personas: tuple[PersonaView, ...] = ()
    shown: PersonaView | None = None
    playing: PersonaView | None = None
    locked: bool = False


def read_snapshot(tavern: Tavern, playthrough_id: int | None, persona_id: int | None = None) -> PersonaSnapshot:
    """Read a persona (`persona_id`; None: the one the playthrough plays as, else the default),
    its rendering for `playthrough_id`, its nominations and the persona list (call it in a worker).

    Raises:
        TavernError: the service could not read them (a cap overrun is not an error here).
    """
    personas = tuple(tavern.persona.personas())
    playing = tavern.persona.playthrough_persona(playthrough_id)
    shown = next((p for p in personas if p.id == persona_id), playing)
    document = tavern.persona.persona(shown.id)
    rendered: RenderedPersona | None = None
    render_error = ""
    try:
        rendered = tavern.persona.rendered_persona(playthrough_id, document=document)
    except TavernError as exc:  # PersonaCapExceeded: still show (and let the owner shorten) the entries
        render_error = str(exc)
    nominations = tuple(tavern.persona.nominations(shown.id))
    supports = {b.id: tuple(tavern.persona.supporting_messages(b)) for b in nominations}
    locked = tavern.persona.is_locked(playthrough_id) if playthrough_id else False
    return PersonaSnapshot(document, rendered, render_error, nominations, supports, personas, shown, playing, locked)
