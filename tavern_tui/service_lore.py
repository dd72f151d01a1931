"""Provides world books and world info for the `Tavern` facade: the library of books, bindings,
the books that apply to a chat, previews and the warm-up when a chat opens, the `lore test` tool.

Rules: effective books as SillyTavern gathers them (format-digest §b.4: chat, persona, global and
character bindings, then the card's embedded book, de-duplicated, character-first by default);
activation in `lore/`.
"""

from __future__ import annotations

import copy
import gc
import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tavern_tui.assembly.worldinfo import CardFacts, WorldInfoStep, scan_context, timed_state_of
from tavern_tui.engine.events import canonical_json
from tavern_tui.engine.log import derive_messages
from tavern_tui.errors import FormatError, TavernError
from tavern_tui.formats.cards import ParsedCard
from tavern_tui.formats.worldinfo import from_character_book, parse_world_book, to_st_json
from tavern_tui.lore.context import ActivationContext, ScanMessage, SourcedBook
from tavern_tui.lore.model import WorldBook
from tavern_tui.lore.result import ActivationResult
from tavern_tui.lore.settings import WorldInfoSettings
from tavern_tui.service_persona import PERSONA_TARGET
from tavern_tui.store.repositories import CharacterRecord, WorldBookRecord
from tavern_tui.views import WorldBookView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

BINDING_SCOPES = ("global", "character", "playthrough", "persona")
"""Where a world book can be bound (SillyTavern: global, character, chat, persona lore)."""


class LoreOps:
    """World books and world info of `Tavern` (mixed into it)."""

    def _book(self: Tavern, record: WorldBookRecord) -> WorldBook:
        key = (record.id, hashlib.sha256(record.data.encode("utf-8")).hexdigest())
        book = self._books.get(key)
        if book is None:
            book = parse_world_book(record.data.encode("utf-8"), record.name)
            book.name = record.name
            self._books[key] = book
            self._book_hashes[id(book)] = key[1]
        return book

    def _book_hash(self: Tavern, book: WorldBook, character: CharacterRecord) -> str:
        """SHA-256 of the stored content a step's book came from (a card's embedded book: the card's)."""
        return self._book_hashes.get(id(book), character.original_sha256)

    def _book_view(self: Tavern, record: WorldBookRecord, bindings: tuple[str, ...] = ()) -> WorldBookView:
        return WorldBookView(record.id, record.name, len(self._book(record).entries), record.source_name,
                             record.created_at, bindings)

    def world_books(self: Tavern) -> list[WorldBookView]:
        """Every imported world book, by name, with where it is bound."""
        with self._store.unit_of_work() as uow:
            records = uow.world_books.all()
            bound = uow.bindings.all()
        where: dict[int, list[str]] = {}
        for book_id, scope, target in bound:
            where.setdefault(book_id, []).append(scope if target is None else f"{scope}:{target}")
        return [self._book_view(r, tuple(where.get(r.id, ()))) for r in records]

    def find_world_book(self: Tavern, query: str) -> WorldBookView:
        """A world book by id ("3") or name (case-insensitive; the newest import of that name).

        Raises:
            NotFound: nothing matches.
        """
        return self._book_view(self._find(query, "world_books", "world book"))

    def world_book(self: Tavern, book_id: int, *, editable: bool = True) -> WorldBook:
        """The parsed book (entries and book-level settings). Raises NotFound.

        Args:
            editable: True (default) returns a copy the caller may change and hand to
                `save_world_book`; False returns the service's cached book, which must not be
                changed (cheap: browsing a 3,000-entry book should not copy it each time).
        """
        with self._store.unit_of_work() as uow:
            book = self._book(uow.world_books.get(book_id))
        return copy.deepcopy(book) if editable else book

    def save_world_book(self: Tavern, book_id: int, book: WorldBook) -> WorldBookView:
        """Store an edited book (entries and book fields). Editing never binds or unbinds it;
        steps after the save read the new version.

        Raises:
            NotFound: no such book.
            FormatError: the edited book does not survive a SillyTavern round trip (e.g. duplicate uids).
        """
        try:
            data = to_st_json(book)
        except ValueError as exc:
            raise FormatError(book.name, str(exc)) from exc
        parse_world_book(json.dumps(data).encode("utf-8"), book.name)  # refuse what we could not read back
        with self._store.unit_of_work() as uow:
            record = uow.world_books.replace_data(book_id, name=book.name, data=canonical_json(data))
        return self._book_view(record)

    def export_world_book(self: Tavern, book_id: int) -> dict[str, Any]:
        """The book as SillyTavern World Info JSON (`{"entries": {...}}`), ready to write to a file."""
        return to_st_json(self.world_book(book_id))

    def bind_world_book(self: Tavern, book_id: int, scope: str, target_id: int | None = None) -> bool:
        """Bind a book globally, to a character, to a playthrough (chat lore) or to a persona.

        Returns:
            False when it was already bound there.

        Raises:
            TavernError: unknown scope, or a target given/missing for the scope.
            NotFound: no such book or target.
        """
        self._check_scope(scope, target_id)
        with self._store.unit_of_work() as uow:
            uow.world_books.get(book_id)
            if scope == "character":
                uow.characters.get(target_id or 0)
            elif scope == "playthrough":
                uow.playthroughs.get(target_id or 0)
            return uow.bindings.bind(book_id, scope, target_id)

    def unbind_world_book(self: Tavern, book_id: int, scope: str, target_id: int | None = None) -> bool:
        """Remove a binding; returns False when there was none. Unbinding never deletes the book."""
        self._check_scope(scope, target_id)
        with self._store.unit_of_work() as uow:
            return uow.bindings.unbind(book_id, scope, target_id)

    @staticmethod
    def _check_scope(scope: str, target_id: int | None) -> None:
        if scope not in BINDING_SCOPES:
            raise TavernError(f"unknown binding scope {scope!r}; use one of {', '.join(BINDING_SCOPES)}")
        if (scope == "global") != (target_id is None):
            raise TavernError("a global binding takes no target; the other scopes need one")

    def _world_info(self: Tavern, books: Sequence[SourcedBook], rng: Callable[[], float] | None = None) -> WorldInfoStep:
        return WorldInfoStep(books, self.settings.world_info, rng, self._index_cache)

    @staticmethod
    def _facts(record: CharacterRecord, card: ParsedCard, user_name: str) -> CardFacts:
        return CardFacts.from_card(card.data, card.name, user_name, Path(record.source_name).stem)

    def _card_book(self: Tavern, record: CharacterRecord, card: ParsedCard) -> WorldBook | None:
        """The card's embedded `character_book` as a world book (converted once per character)."""
        if card.character_book is None:
            return None
        book = self._card_books.get(record.id)
        if book is None:
            book = from_character_book(card.character_book, record.source_name, card.name)
            self._card_books[record.id] = book
        return book

    def _effective_books(self: Tavern, playthrough_id: int, character: CharacterRecord, card: ParsedCard) -> list[SourcedBook]:
        """The books that apply to a playthrough's steps: chat (playthrough) lore, global lore and
        character lore (its bindings, then the card's embedded book), each book once, in
        SillyTavern's source order (`getSortedEntries`: chat, persona, global, character; the
        activation orders entries by the character strategy)."""
        with self._store.unit_of_work() as uow:
            ids = [("chat", uow.bindings.books_for("playthrough", playthrough_id)),
                   ("persona", uow.bindings.books_for("persona", PERSONA_TARGET)),
                   ("global", uow.bindings.books_for("global", None)),
                   ("character", uow.bindings.books_for("character", character.id))]
            # Only the bound books: every step reads this, and a library can hold many large books.
            records = uow.world_books.get_many([book_id for _, book_ids in ids for book_id in book_ids])
        seen: set[int] = set()
        books: list[SourcedBook] = []
        for source, book_ids in ids:
            for book_id in book_ids:
                if book_id not in seen and book_id in records:
                    seen.add(book_id)
                    books.append(SourcedBook(self._book(records[book_id]), source))
        embedded = self._card_book(character, card)
        if embedded is not None:
            books.append(SourcedBook(embedded, "character"))
        return books

    def world_info_preview(self: Tavern, playthrough_id: int, text: str = "", *,
                           rng: Callable[[], float] | None = None) -> ActivationResult:
        """Which entries would fire if `text` were sent now in this playthrough, and why.

        A dry run (seed 000: preview runs the same code and never calls a provider): the same
        books, settings, history and timed effects as a real step; nothing is stored.
        """
        step, ctx = self._preview_step(playthrough_id, text, rng)
        return step.run(ctx)

    def _preview_step(self: Tavern, playthrough_id: int, text: str,
                      rng: Callable[[], float] | None) -> tuple[WorldInfoStep, ActivationContext]:
        """The world-info step and scan context a send of `text` would use now."""
        view = self.playthrough(playthrough_id)
        with self._store.unit_of_work() as uow:
            record = uow.characters.get(view.character_id)
        card = self._card(record)
        events = self._store.events.surface_events(view.session_id)
        history = derive_messages(self._store.events, view.session_id)
        ctx = scan_context(history, [text] if text else [], self._facts(record, card, view.user_name),
                           timed_state_of(events))
        return self._world_info(self._effective_books(view.id, record, card), rng), ctx

    def warm_world_info(self: Tavern, playthrough_id: int) -> int:
        """Get this playthrough's world info ready before the first send (the chat screen calls
        it from a worker thread when it opens): builds or reuses the books' key indexes, compiles
        their regex keys and caches the current history's matches, through the same dry run as
        `world_info_preview` (nothing is stored), then primes the indexes with every entry
        content recursion may scan (`WorldInfoStep.prime`).

        Then the heap is collected once and frozen (`gc.freeze`): the books, indexes and caches
        alive now move to the permanent generation, so later full collections do not walk them
        (a 5,000-entry book is hundreds of thousands of objects: 60-90 ms per full collection,
        which would land inside a step). The caller calls `release_heap` when the chat closes:
        frozen objects are never collected as cyclic garbage, so a screen left frozen would
        stay in memory. performance-anchors B1/B7: the automaton is built in a worker, after
        first paint.

        Returns:
            How many entries the dry run activated (0 without world info).

        Raises:
            TavernError: no such playthrough.
        """
        step, ctx = self._preview_step(playthrough_id, "", None)
        result = step.run(ctx)
        step.prime(ctx)
        gc.collect()
        gc.freeze()
        return len(result.activated)

    @staticmethod
    def release_heap() -> None:
        """Undo `warm_world_info`'s freeze (when its chat closes): what was frozen goes back to
        the collector, so whatever has become garbage since (the closed screen) can be freed."""
        gc.unfreeze()

    def test_world_info(self: Tavern, books: Sequence[WorldBook], messages: Sequence[ScanMessage], text: str | None, *,
                        settings: WorldInfoSettings | None = None, rng: Callable[[], float] | None = None,
                        char_name: str = "Character", user_name: str = "User") -> ActivationResult:
        """Activate `books` (as global lore) against a given history and input (the `lore test`
        tool): no playthrough, nothing stored."""
        ctx = ActivationContext(messages=tuple(messages), input=text or None, char_name=char_name, user_name=user_name)
        step = WorldInfoStep([SourcedBook(b, "global") for b in books], settings or self.settings.world_info, rng,
                             self._index_cache)
        return step.run(ctx)
