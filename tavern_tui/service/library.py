"""Provides `LibraryService`: the imported characters (list, find, one card's facts), importing
a card, and the pieces every importer shares (finding a record by id or name, storing a parsed
resource with its original bytes). Parsed cards are cached for the life of one `Tavern`.
"""

from __future__ import annotations

import copy
import difflib
import hashlib
import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tavern_tui.engine.events import canonical_json
from tavern_tui.errors import AlreadyStored, Ambiguous, FormatError, NotFound, SecretRefused, TavernError
from tavern_tui.formats.cards import ParsedCard, parse_card
from tavern_tui.formats.charx import charx_member
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.secrets import configured_secrets, refuse_configured
from tavern_tui.store.repositories import CharacterRecord
from tavern_tui.views import CARD_LIST_FIELDS, CARD_TEXT_FIELDS, CardView, CharacterView, ImportResult

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
        self._cards: dict[tuple[int, int], ParsedCard] = {}

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
        imported again return the earlier record (`duplicate`) and store nothing (nor repeat
        the first import's warnings: they were said then, and nothing is stored now)."""
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
                    return ImportResult(file, kind, existing.id, existing.name, duplicate=True)
                record = repo.add(source_name=Path(file).name, original=original, original_sha256=digest, **fields)
        except AlreadyStored:
            # Insert-or-get: another process stored these bytes between our check and insert
            # (the unique by-hash index refused ours); theirs is the record (issue 23 item 5).
            with self.ctx.store.unit_of_work(write=False) as uow:
                existing = getattr(uow, repository).by_sha256(digest)
            if existing is None:
                raise
            return ImportResult(file, kind, existing.id, existing.name, duplicate=True)
        return ImportResult(file, kind, record.id, record.name, warnings=warnings)

    # -- characters -----------------------------------------------------------------------

    def card(self, record: CharacterRecord) -> ParsedCard:
        """The parsed card of a stored character at the record's revision (parsed once per
        revision per `Tavern`: an edit is read from the next step on)."""
        key = (record.id, record.revision)
        card = self._cards.get(key)
        if card is None:
            card = ParsedCard.from_dict(json.loads(record.data))
            self._cards[key] = card
        return card

    def _character_view(self, record: CharacterRecord) -> CharacterView:
        card = self.card(record)
        book = card.character_book
        tags = card.data.get("tags") or []
        return CharacterView(record.id, record.name, record.spec, str(card.data.get("creator") or ""),
                             tuple(str(t) for t in tags), len(card.greetings),
                             len(book.get("entries", [])) if book else None, record.source_name, record.created_at,
                             str(card.data.get("description") or ""), record.archived_at is not None,
                             record.revision)

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

    def characters(self, *, include_archived: bool = False) -> list[CharacterView]:
        """Every imported character, by name (archived ones only with `include_archived`)."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            records = uow.characters.all()
        return [self._character_view(r) for r in records if include_archived or r.archived_at is None]

    def last_played_character(self) -> int | None:
        """The id of the character whose playthrough was played most recently (a group chat's
        first member for a group's), or None before any playthrough: one short query, so the home
        screen can start on it without reading any playthrough's messages."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            recent = uow.playthroughs.list(None, 1)
        return recent[0].character_id if recent else None

    def archive_character(self, character_id: int, archived: bool = True) -> CharacterView:
        """Archive a character (hidden from the character lists; nothing is deleted: its card,
        original file, playthroughs and drafts stay) or bring it back. Raises NotFound."""
        with self.ctx.store.unit_of_work() as uow:
            record = uow.characters.set_archived(character_id, archived)
        return self._character_view(record)

    def card_view(self, character_id: int) -> CardView:
        """The whole card of a character at its current revision: every text field (creator
        notes among them: shown, never sent), greetings, tags, the embedded book, extensions
        by name, other `data` keys, and the stored revisions. Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.characters.get(character_id)
            revisions = uow.characters.revisions(character_id)
        card = self.card(record)
        data = card.data
        book = card.character_book
        known = {*CARD_TEXT_FIELDS, *CARD_LIST_FIELDS, "extensions", "character_book"}
        extensions = found if isinstance(found := data.get("extensions"), dict) else {}
        return CardView(self._character_view(record), card.spec_version, card.container,
                        {f: str(data.get(f) or "") for f in CARD_TEXT_FIELDS},
                        tuple(str(g) for g in data.get("alternate_greetings") or []),
                        tuple(str(t) for t in data.get("tags") or []),
                        None if book is None else (str(book.get("name") or f"{card.name}'s Lorebook"),
                                                   len(book.get("entries") or [])),
                        tuple(extensions), {k: v for k, v in data.items() if k not in known},
                        tuple((r.revision, r.reason, r.created_at) for r in revisions))

    def edit_card(self, character_id: int, changes: dict[str, Any], *, expected_revision: int | None = None,
                  reason: str = "edited") -> CharacterView:
        """Store the card with `changes` (field → new value; text fields of `CARD_TEXT_FIELDS`
        take a string, `alternate_greetings` and `tags` a list of strings, `character_book` a
        V2 `character_book` object or None to remove it) as a new revision. The imported file's
        bytes stay; playthroughs read the new revision from their next step on.

        Raises:
            NotFound: no such character.
            FormatError(file "card <name>", field): an unknown field, a wrong type, an empty name,
                or a card that would not read back (nothing is stored).
            SecretRefused: the edit holds the configured API key or a credential of the base URL.
            Conflict: `expected_revision` is no longer the current revision.
        """
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.characters.get(character_id)
        card = self.card(record)
        where = f"card {record.name!r}"
        data = copy.deepcopy(card.data)
        for field, value in changes.items():
            if field in CARD_TEXT_FIELDS:
                if not isinstance(value, str):
                    raise FormatError(where, f"{field} takes text, not {type(value).__name__}", f"data.{field}")
            elif field in CARD_LIST_FIELDS:
                if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
                    raise FormatError(where, f"{field} takes a list of texts", f"data.{field}")
                value = list(value)
            elif field == "character_book":
                if value is not None and not isinstance(value, dict):
                    raise FormatError(where, "character_book takes an object (or None to remove it)",
                                      "data.character_book")
            else:
                known = ", ".join((*CARD_TEXT_FIELDS, *CARD_LIST_FIELDS))
                raise FormatError(where, f"unknown card field {field!r}; editable: {known}", f"data.{field}")
            if value is None:
                data.pop(field, None)
            else:
                data[field] = value
        if not str(data.get("name") or "").strip():
            raise FormatError(where, "the card's name cannot be empty", "data.name")
        # Read back through the importer: what is stored is a card any reader of ours takes.
        checked = parse_card(json.dumps({"spec": "chara_card_v2", "spec_version": "2.0", "data": data},
                                        ensure_ascii=False).encode("utf-8"), where)
        secrets = configured_secrets(self.ctx.settings, self.ctx.provider)
        refuse_configured(json.dumps(checked.data, ensure_ascii=False), secrets, where)
        revised = ParsedCard(checked.name, card.spec, card.spec_version, checked.data, card.raw, card.container,
                             card.chunk, card.warnings, card.image)
        with self.ctx.store.unit_of_work() as uow:
            stored = uow.characters.revise(character_id, name=revised.name, data=canonical_json(revised.to_dict()),
                                           reason=reason, expected_revision=expected_revision)
        return self._character_view(stored)

    def export_card(self, character_id: int, kind: str, *, now: float | None = None) -> bytes:
        """The character's card at its current revision as a file SillyTavern imports.

        Args:
            kind: "json" (the V2 card ST writes, `formats.cards.export_card_st_json`) or "png"
                (the card's own picture, or a plain one for a JSON card, with `chara` and `ccv3`
                tEXt chunks, `formats.cards.card_png`). The embedded `character_book` goes with it.
            now: Unix seconds for the V3 `modification_date` (default: the clock).

        Raises:
            NotFound: no such character. TavernError: an unknown kind.
        """
        import time

        from tavern_tui.formats.cards import card_png, export_card_st_json
        from tavern_tui.formats.png import is_png, solid_png

        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.characters.get(character_id)
        card = self.card(record)
        at = record.created_at  # ST's humanized date: "2026-12-3 @17h 56m 4s 504ms"
        created = f"{at.year}-{at.month}-{at.day} @{at.hour}h {at.minute}m {at.second}s {at.microsecond // 1000}ms"
        if kind == "json":
            text = json.dumps(export_card_st_json(card, create_date=created), ensure_ascii=False, indent=2)
            return text.encode("utf-8")
        if kind != "png":
            raise TavernError(f"unknown card export kind {kind!r}; use png or json")
        found = self.character_image(character_id)
        image = found[0] if found and found[1] == "png" and is_png(found[0]) else solid_png(400, 600, (64, 64, 72))
        return card_png(card, image, modified=int(time.time() if now is None else now))

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

