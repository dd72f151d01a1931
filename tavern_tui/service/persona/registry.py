"""Provides `RegistryMixin`, the personas themselves: each one's document and history, making,
renaming and finding personas, the default persona, and which persona a playthrough plays as (its
lock, else the default; `persona_id_in` answers the same inside a unit of work).

Rules: SillyTavern's chat-locked persona (`public/scripts/personas.js`
`loadPersonaForCurrentChat`: the chat lock first, then the default), as DESIGN.md "Persona and
nominations" maps it; a persona's name is written as the next revision of its document, so it
refuses credential-shaped text like every owner write (seed 002, ADR-0079).
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

from tavern_tui.errors import Ambiguous, NotFound, TavernError
from tavern_tui.persona.model import PersonaDocument, PersonaView
from tavern_tui.service.persona.base import _default_of, _pin_of, _principal, _views
from tavern_tui.service.persona.documents import DocumentsMixin

if TYPE_CHECKING:
    from tavern_tui.store.store import UnitOfWork


def persona_id_in(uow: UnitOfWork, meta: str | None) -> int | None:
    """The id of the persona a playthrough whose meta JSON is `meta` plays as, read in `uow`: its
    lock when that persona exists, else the default persona (marked, else the oldest); None when
    there is no persona. The same choice as `PersonaService.playthrough_persona`, without reading
    every persona's document (a step asks it for its persona lore)."""
    rows = uow.personas.personas()
    lock = _pin_of(meta).get("lock")
    if any(row[0] == lock for row in rows):
        return lock
    return next((row[0] for row in rows if row[2]), rows[0][0] if rows else None)


class RegistryMixin(DocumentsMixin):
    """The personas, the default one, and which persona a playthrough plays as."""

    # -- the document ---------------------------------------------------------------------

    def persona(self, persona: int | None = None) -> PersonaDocument:
        """A persona's current document (`persona`: its id; None: the default persona's;
        version 0 and no entries until the first write; read once per database version,
        `ServiceContext.per_version`). Raises NotFound."""
        return self.ctx.per_version(("persona", persona), lambda: self._read_persona(persona))

    def _read_persona(self, persona: int | None) -> PersonaDocument:
        with self.ctx.store.unit_of_work(write=False) as uow:
            return uow.personas.current(_principal(uow, persona)[1])

    def persona_history(self, persona: int | None = None) -> list[PersonaDocument]:
        """Every revision of a persona's document (None: the default's), newest first."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            return uow.personas.history(_principal(uow, persona)[1])

    # -- several personas (issue 20 item 6) --------------------------------------------------

    def personas(self) -> list[PersonaView]:
        """Every persona, oldest first, each with its document's name and version (read once per
        database version, `ServiceContext.per_version`: a step's preparation asks four times)."""
        return list(self.ctx.per_version(("personas",), self._read_personas))

    def _read_personas(self) -> list[PersonaView]:
        with self.ctx.store.unit_of_work(write=False) as uow:
            return _views(uow)

    def find_persona(self, query: str | int | None = None) -> PersonaView:
        """A persona by id ("3" or 3) or name (case-insensitive); None or "": the default one.

        Raises:
            NotFound: nothing matches (the message lists the personas).
            Ambiguous: several personas have that name (the message lists their ids).
        """
        views = self.personas()
        if query is None or (isinstance(query, str) and not query.strip()):
            return _default_of(views)
        text = str(query).strip()
        if text.isdigit():
            found = next((v for v in views if v.id == int(text)), None)
            if found is not None:
                return found
        matches = [v for v in views if v.name.casefold() == text.casefold()]
        if len(matches) > 1:
            listed = "; ".join(f"#{v.id} (v{v.version}, {v.entries} entries)" for v in matches)
            raise Ambiguous(f"{len(matches)} personas are named {text!r}: {listed}; pick one by its id (--id N)",
                            tuple(v.id for v in matches))
        if not matches:
            raise NotFound(f"no persona named {text!r}; the personas are: "
                           + ", ".join(f"#{v.id} {v.name or '(no name)'}" for v in views))
        return matches[0]

    def new_persona(self, name: str, *, where: str = "persona new") -> PersonaView:
        """Make a persona named `name` (its document's first revision: the name, no entries).

        Raises:
            TavernError: an empty name. SecretRefused: credential-shaped text.
        """
        name = name.strip()
        if not name:
            raise TavernError(f"{where}: a persona needs a name")
        self._refuse(name, where)
        with self.ctx.store.unit_of_work() as uow:
            persona_id, principal = uow.personas.add_persona(name)
            uow.personas.write(replace(PersonaDocument(principal), version=1, name=name, reason="new"), 0)
            return next(v for v in _views(uow) if v.id == persona_id)

    def rename_persona(self, query: str | int | None, name: str, *, where: str = "persona rename") -> PersonaView:
        """Give a persona a new name (`{{user}}`) as the next revision of its document. Lines
        written under the old name keep it (each user message stores its speaker's name).

        Raises:
            NotFound, Ambiguous: as `find_persona`. TavernError: an empty name. SecretRefused.
        """
        if not name.strip():
            raise TavernError(f"{where}: a persona needs a name")
        found = self.find_persona(query)
        self.edit_persona(found.version, name=name, persona=found.id, where=where)
        return self.find_persona(found.id)

    def use_persona(self, query: str | int | None, playthrough_id: int | None = None) -> PersonaView:
        """Play as a persona: without `playthrough_id`, it becomes the default (new chats and chats
        without a lock play as it); with one, that chat is locked to it (SillyTavern's
        chat-locked persona, `chat_metadata.persona`: a locked chat keeps its persona whatever
        the default is; `public/scripts/personas.js` `loadPersonaForCurrentChat`: the chat lock
        first, then the default). Takes effect at the next step.

        Raises:
            NotFound, Ambiguous: as `find_persona`; NotFound: no such playthrough.
        """
        found = self.find_persona(query)
        if playthrough_id is None:
            with self.ctx.store.unit_of_work() as uow:
                uow.personas.set_default(found.id)
        else:
            self._write_pin(playthrough_id, lock=found.id)
        return self.find_persona(found.id)

    def unlock_persona(self, playthrough_id: int) -> None:
        """Remove a chat's persona lock: it plays as the default persona again. Raises NotFound."""
        with self.ctx.store.unit_of_work() as uow:
            meta = json.loads(uow.playthroughs.get(playthrough_id).meta or "{}")
            pin = meta.get("persona") if isinstance(meta.get("persona"), dict) else {}
            if "lock" in pin:
                meta["persona"] = {k: v for k, v in pin.items() if k != "lock"}
                uow.playthroughs.set_meta(playthrough_id, json.dumps(meta, ensure_ascii=False))

    def playthrough_persona(self, playthrough_id: int | None = None, *, meta: str | None = None) -> PersonaView:
        """The persona a playthrough plays as: its lock when set (and the persona exists), else the
        default persona (`use_persona`). `meta`: the playthrough's meta JSON when read already
        (a draft's); None with no playthrough: the default.

        Raises:
            NotFound: no such playthrough.
        """
        pin = _pin_of(meta) if meta is not None else self._persona_pin(playthrough_id) if playthrough_id else {}
        views = self.personas()
        lock = pin.get("lock")
        return next((v for v in views if v.id == lock), None) or _default_of(views)

    def is_locked(self, playthrough_id: int) -> bool:
        """True when the playthrough is locked to a persona. Raises NotFound."""
        return isinstance(self._persona_pin(playthrough_id).get("lock"), int)
