"""`PersonaSnapshot`: what the persona pane shows, read by `read_snapshot` in one worker run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tavern_tui.errors import TavernError
from tavern_tui.persona.model import Belief, PersonaDocument, RenderedPersona
from tavern_tui.service import Tavern
from tavern_tui.tui.screens.persona.labels import Supports


@dataclass(frozen=True)
class PersonaSnapshot:
    """What the pane shows, read in one worker run.

    Attributes:
        document: the current revision (its version is what every write here expects).
        rendered: the section as the playthrough's next step would send it; None when the
            persona is over a cap (`render_error` says which).
        nominations: the outstanding nominations, oldest first.
        supports: each nomination's supporting messages by belief id: ((session, seq), text).
    """

    document: PersonaDocument
    rendered: RenderedPersona | None
    render_error: str = ""
    nominations: tuple[Belief, ...] = ()
    supports: Mapping[int, Supports] = field(default_factory=dict)


def read_snapshot(tavern: Tavern, playthrough_id: int | None) -> PersonaSnapshot:
    """Read the persona, its rendering for `playthrough_id` and the nominations (call it in a worker).

    Raises:
        TavernError: the service could not read them (a cap overrun is not an error here).
    """
    document = tavern.persona.persona()
    rendered: RenderedPersona | None = None
    render_error = ""
    try:
        rendered = tavern.persona.rendered_persona(playthrough_id)
    except TavernError as exc:  # PersonaCapExceeded: still show (and let the owner shorten) the entries
        render_error = str(exc)
    nominations = tuple(tavern.persona.nominations())
    supports = {b.id: tuple(tavern.persona.supporting_messages(b)) for b in nominations}
    return PersonaSnapshot(document, rendered, render_error, nominations, supports)
