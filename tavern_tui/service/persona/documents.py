"""Provides `DocumentsMixin`, the owner's writes of a persona document: `edit_persona` (add,
remove, rewrite entries, rename) and `import_persona_bytes` (a SillyTavern persona file or
backup), with the caps every revision is checked against and the refusal of secrets.

Rules: seed 002 (ADR-0079), as DESIGN.md "Persona and nominations" maps them:
- only the owner's acts write persona text (edit, import, affirm); every one refuses
  credential-shaped text before anything is stored, and carries `expected_version`;
- a revision over a cap (ADR-0079 decision 9) is refused before it is written;
- removing an affirmed entry clears its belief's promoted mark (decision 7).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tavern_tui.errors import Ambiguous, Conflict, FormatError, NotFound, TavernError
from tavern_tui.formats.personas import ParsedPersonas, STPersona, parse_personas
from tavern_tui.persona.model import (
    SENSITIVITIES,
    PersonaCapExceeded,
    PersonaDocument,
    PersonaEntry,
    PersonaView,
    check_sensitivity,
    render_persona,
)
from tavern_tui.service.persona.base import PersonaBase, _now, _principal, _views
from tavern_tui.service.secrets import configured_secrets, refuse_configured
from tavern_tui.views import ImportResult

if TYPE_CHECKING:
    from tavern_tui.store.store import UnitOfWork


def _within_caps(document: PersonaDocument, where: str) -> None:
    """Refuse a persona revision that would be over a cap (ADR-0079 decision 9) before it is
    written (issue 23 item 7: a 1,000-entry persona was accepted and then blocked every chat).
    Counted with every entry included (the highest sensitivity ceiling a playthrough may set).

    Raises:
        TavernError: over a cap; names `where`, the cap and the figure; nothing is written.
    """
    try:
        render_persona(document, ceiling=SENSITIVITIES[-1])
    except PersonaCapExceeded as exc:
        unit = "entries" if exc.cap == "entries" else "tokens"
        raise TavernError(f"{where}: refused: the persona would have {exc.actual} {unit}, over its cap of "
                          f"{exc.limit} {unit}; nothing was written (remove or shorten entries)") from None


class DocumentsMixin(PersonaBase):
    """The owner's writes of a persona document: edits and imports."""

    def edit_persona(self, expected_version: int, *, add: str | None = None, sensitivity: str | None = None,
                     remove: int | None = None, entries: Sequence[dict[str, Any]] | None = None,
                     name: str | None = None, where: str = "persona edit",
                     persona: int | None = None) -> PersonaDocument:
        """Write the next persona revision (the owner's act).

        Args:
            expected_version: the version the caller read; anything else is a conflict.
            add: a new owner entry's text (with `sensitivity`, default normal).
            remove: the id of an entry to remove (an affirmed entry's belief loses its promoted mark).
            entries: the whole entry list (`[{"id"?, "text", "sensitivity"?, "stale"?}]`): an
                entry keeping its id and text keeps its provenance; changed text becomes the
                owner's (the belief link is cleared); unknown or missing ids are new owner entries.
            name: a new persona name (`{{user}}`).
            where: the write surface, for error messages.
            persona: which persona (its id; None: the default one).

        Raises:
            Conflict: `expected_version` is not current (nothing written).
            SecretRefused: credential-shaped text (names the kind, never the text).
            TavernError: nothing to change, an unknown sensitivity, or no such entry.
        """
        with self.ctx.store.unit_of_work() as uow:
            doc = uow.personas.current(_principal(uow, persona)[1])
            if doc.version != expected_version:
                raise Conflict("the persona", expected_version, doc.version)
            now = _now()
            new_entries = list(doc.entries)
            if entries is not None:
                new_entries = self._entries_from(doc, entries, now, where)
            if add is not None:
                if not add.strip():
                    raise TavernError(f"{where}: the new entry is empty")
                self._refuse(add, where)
                level = check_sensitivity(sensitivity or "normal", f"{where}: sensitivity")
                new_entries.append(PersonaEntry(max([e.id for e in new_entries] + [doc.next_entry_id() - 1]) + 1,
                                                add.strip(), "owner", level, None, now, now))
            if remove is not None:
                if doc.entry(remove) is None or all(e.id != remove for e in new_entries):
                    raise TavernError(f"{where}: the persona has no entry {remove}")
                new_entries = [e for e in new_entries if e.id != remove]
            if name is not None:
                self._refuse(name, where)
            if add is None and remove is None and entries is None and name is None:
                raise TavernError(f"{where}: nothing to change (give an entry to add, remove, a file or a name)")
            new = replace(doc.with_entries(new_entries, "edit"), name=doc.name if name is None else name.strip())
            if new.entries == doc.entries and new.name == doc.name:
                return doc  # nothing changed: no new revision, no rotation
            _within_caps(new, where)
            written = uow.personas.write(new, expected_version)
            self._unlink_beliefs(uow, doc, written)
            return written

    def _refuse(self, text: str, where: str) -> None:
        """Refuse credential-shaped text (`refuse_secrets`) and the configured credentials by value
        in any encoding (`service.secrets`; issue 23 item 3). Raises SecretRefused."""
        from tavern_tui.persona.safety import refuse_secrets
        refuse_configured(text, configured_secrets(self.ctx.settings, self.ctx.provider), where)
        refuse_secrets(text, where)

    def _entries_from(self, doc: PersonaDocument, given: Sequence[dict[str, Any]], now: datetime,
                      where: str) -> list[PersonaEntry]:
        out: list[PersonaEntry] = []
        next_id = doc.next_entry_id()
        used: set[int] = set()
        for index, item in enumerate(given):
            field = f"{where}: entries[{index}]"
            if not isinstance(item, dict) or not isinstance(item.get("text"), str) or not item["text"].strip():
                raise TavernError(f"{field}: each entry is an object with a non-empty \"text\"")
            self._refuse(item["text"], field)
            level = check_sensitivity(item.get("sensitivity", "normal"), f"{field}.sensitivity")
            old = doc.entry(item["id"]) if isinstance(item.get("id"), int) and item["id"] not in used else None
            text = item["text"].strip()
            if old is not None and old.text == text:
                entry = replace(old, sensitivity=level, stale=bool(item.get("stale", old.stale)),
                                updated_at=now if (level, bool(item.get("stale", old.stale))) != (old.sensitivity,
                                                                                                  old.stale)
                                else old.updated_at)
            elif old is not None:  # the owner rewrote it: their text now, no longer a copied belief
                entry = PersonaEntry(old.id, text, "owner", level, None, old.created_at, now)
            else:
                entry = PersonaEntry(next_id, text, "owner", level, None, now, now)
                next_id += 1
            used.add(entry.id)
            out.append(entry)
        return out

    @staticmethod
    def _unlink_beliefs(uow: UnitOfWork, before: PersonaDocument, after: PersonaDocument) -> None:
        """Clear the promoted mark of beliefs whose affirmed entry is gone or no longer theirs
        (ADR-0079 decision 7: removing the entry clears the mark)."""
        kept = {e.id for e in after.entries if e.provenance == "affirmed"}
        gone = [e.id for e in before.entries if e.provenance == "affirmed" and e.id not in kept]
        for belief in uow.beliefs.by_entry(before.principal, gone):
            uow.beliefs.set(belief.id, promoted=False, entry_id=None)

    def import_persona_bytes(self, payload: bytes, file: str, *, persona: str | None = None) -> ImportResult:
        """Import a SillyTavern persona file: every persona of a backup (issue 20 item 6), or only
        the one named `persona`. Each becomes a persona here: its name the document's name, its
        description one owner entry, its world book (when imported here) bound as that persona's
        lore; the backup's `default_persona` becomes the default. A persona whose SillyTavern key
        was imported before is skipped, as SillyTavern's restore skips a key it has
        (`onPersonasRestoreInput`: "already exists, skipping"). The first persona of a fresh
        profile (nothing written yet) is filled instead of left empty beside the new ones.
        Nothing is stored when the file is broken or any persona in it holds a secret.

        Returns:
            An `ImportResult` of kind "persona": id = the first imported persona's id, name = the
            imported names joined with ", "; `duplicate` when every one was imported before.
        """
        try:
            parsed = parse_personas(payload, file)
            chosen = [parsed.chosen(persona)] if persona is not None else list(parsed.personas)
        except (FormatError, LookupError) as exc:
            return ImportResult(file, "persona", error=str(exc) if isinstance(exc, FormatError) else f"{file}: {exc}")
        try:
            for one in chosen:
                where = f"{file}: persona_descriptions.{one.key}" if one.key else file
                self._refuse(one.name, f"{where} name")
                self._refuse(one.description, f"{where} description")
        except TavernError as exc:
            return ImportResult(file, "persona", error=str(exc))
        warnings: list[str] = []
        books = self._persona_books(chosen, warnings)
        imported, known = self._store_personas(parsed, chosen, books, file, persona, warnings)
        if not imported:
            return ImportResult(file, "persona", known.get(chosen[0].key), ", ".join(p.name for p in chosen),
                                warnings=tuple(warnings), duplicate=True)
        return ImportResult(file, "persona", imported[0].id, ", ".join(v.name for v in imported),
                            warnings=tuple(warnings))

    def _persona_books(self, chosen: Sequence[STPersona], warnings: list[str]) -> dict[str, Any]:
        """The world book each imported persona's lore names, found among those imported here
        ({lorebook: book, or None when it is not here or ambiguous}); each one not bound adds a
        warning saying how to bind it."""
        books: dict[str, Any] = {}
        for one in chosen:
            if one.lorebook and one.lorebook not in books:
                try:
                    books[one.lorebook] = self.library.find(one.lorebook, "world_books", "world book")
                except NotFound:
                    books[one.lorebook] = None
                    shown = one.lorebook if len(one.lorebook) <= 80 else one.lorebook[:79] + "…"
                    warnings.append(f"persona lore {shown!r} of {one.name!r} is not imported here; import the world "
                                    "book (`tavern import FILE`), then bind it with `tavern lore bind BOOK --persona "
                                    "NAME`")
                except Ambiguous as exc:
                    books[one.lorebook] = None
                    warnings.append(f"persona lore of {one.name!r} was not bound ({exc}); bind it with "
                                    "`tavern lore bind --id N --persona NAME`")
        return books

    def _store_personas(self, parsed: ParsedPersonas, chosen: Sequence[STPersona], books: dict[str, Any],
                        file: str, persona: str | None,
                        warnings: list[str]) -> tuple[list[PersonaView], dict[Any, int]]:
        """Write the chosen personas of an import in one transaction, skipping (with a warning)
        each whose SillyTavern key was imported before; the backup's default (or the one persona
        asked for) becomes the default. Returns (the imported personas, {SillyTavern key: id})."""
        imported: list[PersonaView] = []
        with self.ctx.store.unit_of_work() as uow:
            rows = uow.personas.personas()
            known = {data.get("st_key"): pid for pid, _principal_, _d, data in rows if data.get("st_key")}
            now = _now()
            for one in chosen:
                if one.key and one.key in known:
                    warnings.append(f"persona {one.name!r} ({one.key}) was imported before; skipped")
                    continue
                persona_id = self._store_persona(uow, rows, one, books, file, now, first=not imported)
                if one.key and one.key == parsed.default or (persona is not None):
                    uow.personas.set_default(persona_id)
                known[one.key] = persona_id
                imported.append(next(v for v in _views(uow) if v.id == persona_id))
        return imported, known

    @staticmethod
    def _store_persona(uow: UnitOfWork, rows: Sequence[tuple[int, str, bool, dict[str, Any]]], one: STPersona,
                       books: dict[str, Any], file: str, now: datetime, *, first: bool) -> int:
        """Write one imported persona (the pristine first persona of a fresh profile when `first`,
        else a new one): its name, its description as an owner entry, its world book bound as its
        lore. Returns its id.

        Raises:
            TavernError: over a cap; nothing is written.
        """
        pristine = [(pid, pr) for pid, pr, _d, data in rows
                    if not data.get("st_key") and uow.personas.current(pr).version == 0]
        if pristine and first:
            persona_id, principal = pristine[0]
            if one.key:
                uow.personas.set_data(persona_id, {"st_key": one.key})
        else:
            persona_id, principal = uow.personas.add_persona(one.name, {"st_key": one.key} if one.key else {})
        doc = uow.personas.current(principal)
        text = one.description.strip()
        entries = list(doc.entries)
        if text and all(e.text != text for e in entries):
            entries.append(PersonaEntry(doc.next_entry_id(), text, "owner", "normal", None, now, now))
        book = books.get(one.lorebook) if one.lorebook else None
        new = replace(doc.with_entries(entries, "import"), name=one.name.strip() or doc.name,
                      lorebook=book.name if book is not None else doc.lorebook)
        _within_caps(new, f"{file}: {one.name}")
        uow.personas.write(new, doc.version)
        if book is not None:  # the persona's lore is this book now (SillyTavern: one book a persona)
            for other in uow.bindings.books_for("persona", persona_id):
                if other != book.id:
                    uow.bindings.unbind(other, "persona", persona_id)
            uow.bindings.bind(book.id, "persona", persona_id)
        return persona_id
