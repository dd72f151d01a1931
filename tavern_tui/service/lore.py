"""Provides `WorldInfoService`: world books (import, the library, editing, export), bindings, the
books that apply to a chat and the world-info step over them, the `lore test` tool.

Rules: effective books as SillyTavern gathers them (format-digest §b.4: chat, persona, global and
character bindings, then the card's embedded book, de-duplicated, character-first by default),
with the books bound to the playthrough's preset after the persona's; activation in `lore/`.
"""

from __future__ import annotations

import copy
import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tavern_tui.engine.events import canonical_json
from tavern_tui.errors import FormatError, NotFound, TavernError
from tavern_tui.formats.cards import ParsedCard
from tavern_tui.lore.collector import gc_paused
from tavern_tui.lore.model import WorldBook
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.persona import persona_id_in
from tavern_tui.service.secrets import configured_secrets, refuse_configured
from tavern_tui.store.books import WorldBookRecord, WorldBookStamp
from tavern_tui.store.repositories import CharacterRecord
from tavern_tui.views import ImportResult, WorldBookView

if TYPE_CHECKING:
    from tavern_tui.assembly.worldinfo import CardFacts, WorldInfoStep
    from tavern_tui.lore.context import ScanMessage, SourcedBook
    from tavern_tui.lore.matching import IndexCache
    from tavern_tui.lore.result import ActivationResult

logger = logging.getLogger(__name__)

BINDING_SCOPES = ("global", "character", "playthrough", "persona", "preset")
"""Where a world book can be bound (SillyTavern: global, character, chat, persona lore; and a
preset, whose books apply to every playthrough that uses it)."""

FROM_PLAYTHROUGH = object()
"""`effective_books`' default preset: the one the playthrough has bound."""


class WorldInfoService:
    """World books and the world info they give a step (`tavern.lore`).

    Args:
        ctx: the shared settings, store and provider.
        library: the characters (a card's embedded book) and the shared import steps.

    Attributes:
        index_cache: the key indexes of the books (`lore.matching.IndexCache`), shared by every
            step, preview and `test_world_info` of this `Tavern`.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService) -> None:
        self.ctx = ctx
        self.library = library
        self._index_cache: IndexCache | None = None
        self._index_lock = threading.Lock()
        self._parse_lock = threading.Lock()
        self._books: dict[tuple[int, str, str], WorldBook] = {}
        self._card_books: dict[tuple[int, int], WorldBook] = {}
        self._book_hashes: dict[int, str] = {}

    @property
    def index_cache(self) -> IndexCache:
        """The shared key-index cache, made on first use: the lore engine (the Aho-Corasick
        index) is imported only when world info is first scanned (issue 22)."""
        with self._index_lock:
            if self._index_cache is None:
                from tavern_tui.lore.fastindex import FastIndex
                from tavern_tui.lore.matching import IndexCache

                self._index_cache = IndexCache(FastIndex)
            return self._index_cache

    def import_world_book_bytes(self, payload: bytes, name: str) -> ImportResult:
        """Import one world book from bytes (any shape `formats.worldinfo` reads).

        The book is stored as SillyTavern World Info JSON plus the original bytes; the same
        bytes imported again store nothing new. A broken file stores nothing. The book takes
        its file's name without the extension, whatever `name` the JSON holds, as SillyTavern
        names an imported book (`src/endpoints/worldinfo.js` `/import`: the book is the file
        `path.parse(originalname).name + ".json"`; issue 20 item 7).
        """
        from tavern_tui.formats.worldinfo import parse_world_book, to_st_json
        from tavern_tui.formats.worldinfo_foreign import dropped_agnai_constants
        from tavern_tui.lore.matching import invalid_regex_keys
        try:
            book = parse_world_book(payload, name)
        except FormatError as exc:
            return ImportResult(name, "world_book", error=str(exc))
        stem = Path(name).stem
        if stem and stem != book.name:
            book.name = stem
        warnings = tuple(invalid_regex_keys(book)) + tuple(dropped_agnai_constants(book))
        for warning in warnings:
            logger.info("%s: %s", name, warning)  # (the result carries it: each front end shows it)
        return self.library.store_import("world_book", "world_books", name, payload, warnings, name=book.name,
                                         data=canonical_json(to_st_json(book)))

    def _book(self, record: WorldBookRecord | WorldBookStamp) -> WorldBook:
        """The parsed book of a stored record or stamp, parsed once per (id, name, content hash):
        a stamp's `data` is read only when no parsed copy is current."""
        from tavern_tui.formats.worldinfo import parse_world_book

        key = (record.id, record.name, record.data_sha256)
        book = self._books.get(key)
        if book is None:
            # One parse at a time: the chat's world-info warm-up and its token gauge ask for the
            # same 5,000-entry book at once in two workers; the second waits, then reads the cache.
            with self._parse_lock:
                book = self._books.get(key)
                if book is None:
                    if isinstance(record, WorldBookRecord):
                        data = record.data
                    else:
                        with self.ctx.store.unit_of_work(write=False) as uow:
                            data = uow.world_books.data_of(record.id)
                    with gc_paused():
                        book = parse_world_book(data.encode("utf-8"), record.name)
                    book.name = record.name
                    self._books[key] = book
                    self._book_hashes[id(book)] = record.data_sha256
        return book

    def book_hash(self, book: WorldBook, character: CharacterRecord) -> str:
        """SHA-256 of the stored content a step's book came from (a card's embedded book: the card's)."""
        return self._book_hashes.get(id(book), character.original_sha256)

    def _book_view(self, record: WorldBookRecord, bindings: tuple[str, ...] = ()) -> WorldBookView:
        return WorldBookView(record.id, record.name, len(self._book(record).entries), record.source_name,
                             record.created_at, bindings)

    def world_books(self) -> list[WorldBookView]:
        """Every imported world book, by name, with where it is bound."""
        with self.ctx.store.unit_of_work() as uow:
            records = uow.world_books.all()
            bound = uow.bindings.all()
        where: dict[int, list[str]] = {}
        for book_id, scope, target in bound:
            where.setdefault(book_id, []).append(scope if target is None else f"{scope}:{target}")
        return [self._book_view(r, tuple(where.get(r.id, ()))) for r in records]

    def find_world_book(self, query: str) -> WorldBookView:
        """A world book by id ("3") or name (case-insensitive; the newest import of that name).

        Raises:
            NotFound: nothing matches.
        """
        return self._book_view(self.library.find(query, "world_books", "world book"))

    def world_book(self, book_id: int, *, editable: bool = True) -> WorldBook:
        """The parsed book (entries and book-level settings). Raises NotFound.

        Args:
            editable: True (default) returns a copy the caller may change and hand to
                `save_world_book`; False returns the service's cached book, which must not be
                changed (cheap: browsing a 3,000-entry book should not copy it each time).
        """
        with self.ctx.store.unit_of_work(write=False) as uow:
            stamp = uow.world_books.stamps([book_id]).get(book_id)
        if stamp is None:
            raise NotFound(f"no world book with id {book_id}")
        book = self._book(stamp)
        return copy.deepcopy(book) if editable else book

    def save_world_book(self, book_id: int, book: WorldBook) -> WorldBookView:
        """Store an edited book (entries and book fields). Editing never binds or unbinds it;
        steps after the save read the new version.

        Raises:
            NotFound: no such book.
            FormatError: the edited book does not survive a SillyTavern round trip (e.g. duplicate uids).
            SecretRefused: it holds the configured API key or a base-URL credential (any form).
        """
        from tavern_tui.formats.worldinfo import parse_world_book, to_st_json
        try:
            data = to_st_json(book)
        except ValueError as exc:
            raise FormatError(book.name, str(exc)) from exc
        parse_world_book(json.dumps(data).encode("utf-8"), book.name)  # refuse what we could not read back
        # Issue 23 item 3: an edit is a write surface too; the configured key never goes in.
        secrets = configured_secrets(self.ctx.settings, self.ctx.provider)
        refuse_configured(json.dumps(data, ensure_ascii=False), secrets, f"world book {book.name!r}")
        with self.ctx.store.unit_of_work() as uow:
            record = uow.world_books.replace_data(book_id, name=book.name, data=canonical_json(data))
        return self._book_view(record)

    def export_world_book(self, book_id: int) -> dict[str, Any]:
        """The book as SillyTavern World Info JSON (`{"entries": {...}}`), ready to write to a file."""
        from tavern_tui.formats.worldinfo import to_st_json
        return to_st_json(self.world_book(book_id))

    def bind_world_book(self, book_id: int, scope: str, target_id: int | None = None) -> bool:
        """Bind a book globally, to a character, to a playthrough (chat lore), to a persona or to a
        preset (it then applies to every playthrough that uses the preset).

        Returns:
            False when it was already bound there.

        Raises:
            TavernError: unknown scope, or a target given/missing for the scope.
            NotFound: no such book or target.
        """
        self._check_scope(scope, target_id)
        with self.ctx.store.unit_of_work() as uow:
            uow.world_books.get(book_id)
            if scope == "character":
                uow.characters.get(target_id or 0)
            elif scope == "playthrough":
                uow.playthroughs.get(target_id or 0)
            elif scope == "preset":
                uow.presets.get(target_id or 0)
            return uow.bindings.bind(book_id, scope, target_id)

    def unbind_world_book(self, book_id: int, scope: str, target_id: int | None = None) -> bool:
        """Remove a binding; returns False when there was none. Unbinding never deletes the book."""
        self._check_scope(scope, target_id)
        with self.ctx.store.unit_of_work() as uow:
            return uow.bindings.unbind(book_id, scope, target_id)

    @staticmethod
    def _check_scope(scope: str, target_id: int | None) -> None:
        if scope not in BINDING_SCOPES:
            raise TavernError(f"unknown binding scope {scope!r}; use one of {', '.join(BINDING_SCOPES)}")
        if (scope == "global") != (target_id is None):
            raise TavernError("a global binding takes no target; the other scopes need one")

    def world_info_step(self, books: Sequence[SourcedBook], rng: Callable[[], float] | None = None, *,
                        settings: WorldInfoSettings | None = None) -> WorldInfoStep:
        """The world-info step over `books` with the configured settings (or `settings`: a
        step passes them with its request's max context, issue 16) and the shared key indexes."""
        from tavern_tui.assembly.worldinfo import WorldInfoStep
        return WorldInfoStep(books, settings or self.ctx.settings.world_info, rng, self.index_cache)

    @staticmethod
    def facts(record: CharacterRecord, card: ParsedCard, user_name: str) -> CardFacts:
        from tavern_tui.assembly.worldinfo import CardFacts
        return CardFacts.from_card(card.data, card.name, user_name, Path(record.source_name).stem)

    def _card_book(self, record: CharacterRecord, card: ParsedCard) -> WorldBook | None:
        """The card's embedded `character_book` as a world book (converted once per character)."""
        from tavern_tui.formats.worldinfo import from_character_book
        if card.character_book is None:
            return None
        book = self._card_books.get((record.id, record.revision))
        if book is None:
            book = from_character_book(card.character_book, record.source_name, card.name)
            self._card_books[(record.id, record.revision)] = book
        return book

    def card_books(self) -> list[WorldBookView]:
        """The embedded books of the characters in the lists (not archived), by character name:
        `id` is the character's id, `bindings` is ("card",) (a card's book always applies with
        its character and cannot be bound)."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            records = [r for r in uow.characters.all() if r.archived_at is None]
        views = []
        for record in records:
            book = self._card_book(record, self.library.card(record))
            if book is not None:
                views.append(WorldBookView(record.id, book.name, len(book.entries), record.name, record.created_at,
                                           ("card",)))
        return views

    def card_book(self, character_id: int, *, editable: bool = True) -> tuple[WorldBook, int] | None:
        """A character's embedded book as a world book, with the card revision it is from; None
        when the card has none. `editable` as `world_book`. Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.characters.get(character_id)
        book = self._card_book(record, self.library.card(record))
        if book is None:
            return None
        return (copy.deepcopy(book) if editable else book), record.revision

    def save_card_book(self, character_id: int, book: WorldBook, *, expected_revision: int | None = None
                       ) -> WorldBookView:
        """Store an edited embedded book as a new revision of its card (`LibraryService.edit_card`,
        ST `convertWorldInfoToCharacterBook` shape via `formats.worldinfo.to_character_book`).

        Raises:
            NotFound, FormatError, SecretRefused, Conflict: as `edit_card` (duplicate uids are a FormatError).
        """
        from tavern_tui.formats.worldinfo import to_character_book

        if len({str(e.uid) for e in book.entries}) != len(book.entries):
            raise FormatError(f"card {character_id}", f"two entries of {book.name!r} share a uid", "character_book")
        view = self.library.edit_card(character_id, {"character_book": to_character_book(book)},
                                      expected_revision=expected_revision, reason="lorebook edited")
        return WorldBookView(view.id, book.name, len(book.entries), view.name, view.created_at, ("card",))

    def effective_books(self, playthrough_id: int, character: CharacterRecord, card: ParsedCard,
                        chat: Sequence[int] | None = None, *,
                        preset_id: int | None | object = FROM_PLAYTHROUGH,
                        also: Sequence[tuple[CharacterRecord, ParsedCard]] = ()) -> list[SourcedBook]:
        """The books that apply to a playthrough's steps: chat (playthrough) lore, persona lore (the
        books bound to the persona it plays as: its lock, else the default),
        the books bound to its preset, global lore and character lore (its bindings, then the
        card's embedded book), each book once, in SillyTavern's source order (`getSortedEntries`:
        chat, persona, global, character; the activation orders entries by the character
        strategy), with the preset's books after the persona's (a preset is not a SillyTavern
        lore source: its books travel with it, as the seed's preset-bound books do).

        Args:
            chat: the chat-lore book ids to use instead of the playthrough's bindings (an
                opening draft's selection, or a preview's `--lore` added to them).
            preset_id: the preset whose books apply (None: no preset); by default the
                playthrough's bound preset (a preview passes the one it previews).
            also: the other characters whose lore applies (a group chat's other members, as
                SillyTavern's `getCharacterLore` reads every member's): their bound books and
                embedded books join the character lore, after `character`'s.

        Returns:
            `SourcedBook`s in the order playthrough ("chat"), "persona", "preset", "global",
            "character" (each scope's books in binding order), a book bound in several scopes
            kept once where it first appears; then the card's embedded book ("character").

        Read once per database version (`ServiceContext.per_version`): a step's preparation asks
        for them for MVU's material and again for its assembler, and every build between two
        commits for them again.

        Raises:
            NotFound: no such playthrough (when its preset is read from it).
        """
        key = ("effective-books", playthrough_id, character.id, character.revision,
               None if chat is None else tuple(chat), "playthrough's" if preset_id is FROM_PLAYTHROUGH else preset_id,
               tuple((other.id, other.revision) for other, _card in also))
        return list(self.ctx.per_version(key, lambda: self._effective_books(playthrough_id, character, card, chat,
                                                                     preset_id, also)))

    def _effective_books(self, playthrough_id: int, character: CharacterRecord, card: ParsedCard,
                         chat: Sequence[int] | None, preset_id: int | None | object,
                         also: Sequence[tuple[CharacterRecord, ParsedCard]]) -> list[SourcedBook]:
        from tavern_tui.lore.context import SourcedBook

        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.playthroughs.get(playthrough_id) if playthrough_id > 0 else None
            if preset_id is FROM_PLAYTHROUGH:
                preset_id = record.preset_id if record is not None else None
            persona = persona_id_in(uow, record.meta if record is not None else None)
            bound = uow.bindings.books_for_many([("playthrough", playthrough_id), ("persona", persona or -1),
                                                 ("preset", preset_id if isinstance(preset_id, int) else -1),
                                                 ("global", None), ("character", character.id),
                                                 *(("character", other.id) for other, _card in also)])
            ids = [("chat", list(chat) if chat is not None else bound[0]), ("persona", bound[1]),
                   ("preset", bound[2]), ("global", bound[3]),
                   ("character", [book for books in bound[4:] for book in books])]
            # Only the bound books' stamps: every step reads this, and a book can be megabytes.
            records = uow.world_books.stamps([book_id for _, book_ids in ids for book_id in book_ids])
        seen: set[int] = set()
        books: list[SourcedBook] = []
        for source, book_ids in ids:
            for book_id in book_ids:
                if book_id not in seen and book_id in records:
                    seen.add(book_id)
                    books.append(SourcedBook(self._book(records[book_id]), source))
        for member, parsed in ((character, card), *also):
            embedded = self._card_book(member, parsed)
            if embedded is not None:
                books.append(SourcedBook(embedded, "character"))
        return books

    def test_world_info(self, books: Sequence[WorldBook], messages: Sequence[ScanMessage], text: str | None, *,
                        settings: WorldInfoSettings | None = None, rng: Callable[[], float] | None = None,
                        char_name: str = "Character", user_name: str = "User",
                        batch: Sequence[str] = ()) -> ActivationResult:
        """Activate `books` (as global lore) against a given history and input (the `lore test`
        tool): no playthrough, nothing stored. `batch`: lines pending in the inbox, claimed
        before `text` in one batch; the batch is the current input a step scans (seed 000 §5),
        joined one line each as `assembly.worldinfo.scan_context` joins a claimed batch."""
        from tavern_tui.assembly.worldinfo import WorldInfoStep
        from tavern_tui.lore.context import ActivationContext, SourcedBook
        lines = [*batch, text] if text else list(batch)
        ctx = ActivationContext(messages=tuple(messages), input="\n".join(lines) or None, char_name=char_name,
                                user_name=user_name)
        step = WorldInfoStep([SourcedBook(b, "global") for b in books], settings or self.ctx.settings.world_info, rng,
                             self.index_cache)
        return step.run(ctx)
