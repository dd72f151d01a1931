"""Provides `LibraryService`: the imported characters (list, find, one card's facts), importing
a card, and the pieces every importer shares (finding a record by id or name, storing a parsed
resource with its original bytes). Parsed cards are cached for the life of one `Tavern`.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tavern_tui.engine.events import canonical_json
from tavern_tui.errors import AlreadyStored, Ambiguous, FormatError, NotFound, SecretRefused
from tavern_tui.formats.cards import ParsedCard, parse_card
from tavern_tui.formats.charx import charx_member
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.secrets import configured_secrets, refuse_configured
from tavern_tui.store.repositories import CharacterRecord
from tavern_tui.views import CharacterView, ImportResult

logger = logging.getLogger(__name__)


def _did_you_mean(query: str, names: Sequence[str]) -> str:
    """The hint after "no X named Q": the closest stored names (case-insensitive, also names
    that contain Q, e.g. "Eldoria" for a book imported from eldoria_st_staging.json), or how to
    import one."""
    by_folded = {name.casefold(): name for name in names}
    wanted = query.casefold()
    close = [by_folded[n] for n in difflib.get_close_matches(wanted, list(by_folded), n=3, cutoff=0.6)]
    close += [name for folded, name in by_folded.items() if wanted and wanted in folded and name not in close]
    if close:
        return "did you mean " + " or ".join(repr(name) for name in close[:3]) + "?"
    return "import one with `tavern import FILE`"



class LibraryService:
    """Characters and the shared import and look-up steps (`tavern.library`).

    Args:
        ctx: the shared settings, store and provider.
    """

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self._cards: dict[int, ParsedCard] = {}

    def import_card_bytes(self, payload: bytes, name: str) -> ImportResult:
        """Import one card from bytes; `name` is used in messages and kept as the source name."""
        try:
            card = parse_card(payload, name)
        except FormatError as exc:
            return ImportResult(name, "character", error=str(exc))
        for warning in card.warnings:
            logger.info("%s: %s", name, warning)  # (the result carries it: each front end shows it)
        return self.store_import("character", "characters", name, payload, card.warnings, name=card.name,
                                 spec=card.spec, spec_version=card.spec_version, data=canonical_json(card.to_dict()))

    def store_import(self, kind: str, repository: str, file: str, original: bytes, warnings: tuple[str, ...],
                     **fields: Any) -> ImportResult:
        """Store a parsed resource with its original bytes in one transaction; the same bytes
        imported again return the earlier record (`duplicate`) and store nothing."""
        digest = hashlib.sha256(original).hexdigest()
        try:
            # The configured credentials, by value in any encoding, in the file or what was read
            # from it (a card's text is sent in every system prompt; issue 23 item 3).
            secrets = configured_secrets(self.ctx.settings, self.ctx.provider)
            refuse_configured(original.decode("utf-8", "replace"), secrets, file)
            refuse_configured(str(fields.get("data", "")), secrets, file)
        except SecretRefused as exc:
            return ImportResult(file, kind, error=str(exc), warnings=warnings)
        try:
            with self.ctx.store.unit_of_work() as uow:
                repo = getattr(uow, repository)
                existing = repo.by_sha256(digest)
                if existing is not None:
                    return ImportResult(file, kind, existing.id, existing.name, warnings=warnings, duplicate=True)
                record = repo.add(source_name=Path(file).name, original=original, original_sha256=digest, **fields)
        except AlreadyStored:
            # Insert-or-get: another process stored these bytes between our check and insert
            # (the unique by-hash index refused ours); theirs is the record (issue 23 item 5).
            with self.ctx.store.unit_of_work(write=False) as uow:
                existing = getattr(uow, repository).by_sha256(digest)
            if existing is None:
                raise
            return ImportResult(file, kind, existing.id, existing.name, warnings=warnings, duplicate=True)
        return ImportResult(file, kind, record.id, record.name, warnings=warnings)

    # -- characters -----------------------------------------------------------------------

    def card(self, record: CharacterRecord) -> ParsedCard:
        """The parsed card of a stored character (parsed once per `Tavern`)."""
        card = self._cards.get(record.id)
        if card is None:
            card = ParsedCard.from_dict(json.loads(record.data))
            self._cards[record.id] = card
        return card

    def _character_view(self, record: CharacterRecord) -> CharacterView:
        card = self.card(record)
        book = card.character_book
        tags = card.data.get("tags") or []
        return CharacterView(record.id, record.name, record.spec, str(card.data.get("creator") or ""),
                             tuple(str(t) for t in tags), len(card.greetings),
                             len(book.get("entries", [])) if book else None, record.source_name, record.created_at,
                             str(card.data.get("description") or ""))

    def character_image(self, character_id: int) -> tuple[bytes, str] | None:
        """The character's picture and its type ("png", "jpeg", …): a PNG card is its own image;
        a CHARX card's main image is read from the archive imported (`formats.charx`); None for a
        JSON card or a CHARX without one.

        Raises:
            NotFound: no such character.
        """
        with self.ctx.store.unit_of_work() as uow:
            record = uow.characters.get(character_id)
            original = uow.characters.original(character_id)
        card = self.card(record)
        if card.container == "png":
            return original, "png"
        if card.container == "charx" and card.image:
            return charx_member(original, str(card.image["path"]), record.source_name), str(card.image["ext"])
        return None

    def characters(self) -> list[CharacterView]:
        """Every imported character, by name."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            records = uow.characters.all()
        return [self._character_view(r) for r in records]

    def character(self, character_id: int) -> CharacterView:
        """One character. Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            return self._character_view(uow.characters.get(character_id))

    def find_character(self, query: str) -> CharacterView:
        """A character by id ("3") or by name (case-insensitive; the newest import of that name).

        Raises:
            NotFound: nothing matches.
        """
        return self._character_view(self.find(query, "characters", "character"))

    def find(self, query: str, repository: str, what: str) -> Any:
        """The record with id `query`, else the one with that name (case-insensitive), from the
        unit-of-work repository named `repository` ("characters", "world_books", "presets").

        Raises:
            NotFound: nothing matches; the message names `what` and suggests close names.
            Ambiguous: several have that name (issue 20 item 7: never picked silently); the
                message lists each with its id and source file.
        """
        with self.ctx.store.unit_of_work(write=False) as uow:
            repo = getattr(uow, repository)
            if query.strip().isdigit() and len(query.strip()) <= 18:  # a longer "id" is a name (int() caps)
                try:
                    return repo.get(int(query))
                except NotFound:
                    pass
            matches = repo.by_name(query.strip())
            names = [] if matches else repo.names()
        if not matches:
            raise NotFound(f"no {what} named {query!r}; " + _did_you_mean(query.strip(), names))
        if len(matches) > 1:
            listed = "; ".join(f"#{m.id} from {m.source_name or '(no file)'}" for m in matches)
            raise Ambiguous(f"{len(matches)} {what}s are named {query.strip()!r}: {listed}; pick one by its id "
                            f"(--id N, or the id in place of the name)", tuple(m.id for m in matches))
        return matches[0]

