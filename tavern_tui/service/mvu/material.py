"""Provides `MvuMaterial`: what a playthrough's MVU state is initialised and updated from (its card's
greetings, the [InitVar] books in MVU's order, the macros replies are expanded with) and the initial record
planned for its surface; `expander`, the macro expansion MVU's commands are read through.

Rules: `tavern_tui.mvu` (initialisation); MVU's book order (variable_init.ts:222-237)
and where the first record goes (initCheck, :192-195).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tavern_tui.assembly.macros import MacroContext, substitute_readonly
from tavern_tui.assembly.memo import per_list
from tavern_tui.engine.events import Event
from tavern_tui.engine.state import STATE_KIND
from tavern_tui.engine.step import OPENING_SOURCE
from tavern_tui.mvu import MVU_PART, InitBook, has_mvu_material, initial_record
from tavern_tui.mvu.init import initvar_entries
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.variables import VariableService


def expander(macros: MacroContext) -> Any:
    """`text → text` with `macros` substituted (read-only: a macro that sets a variable sets nothing)."""
    return lambda text: substitute_readonly(text, macros)


class MvuMaterial:
    """A playthrough's MVU material, read from its card, books and variables.

    Args:
        ctx: the store. library, lore: the card and its books. playthroughs: heads. variables: the macro
            variables macros in [InitVar] contents and replies are expanded with.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 lore: WorldInfoService, variables: VariableService) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self.lore = lore
        self.variables = variables

    def material(self, playthrough_id: int) -> tuple[Any, list[InitBook], str | None, list[str], MacroContext]:
        """(the playthrough's view, its [InitVar] books in MVU's order, the primary book's name, the card's
        greetings, the macros: read-only, as `expander` uses them). Within one pinned build
        (`EventLog.pin_scope`) it is read once: a step's preparation asks for it to initialise and
        again for the head."""
        return self.ctx.per_build(("mvu-material", playthrough_id), lambda: self._material(playthrough_id))

    def _material(self, playthrough_id: int) -> tuple[Any, list[InitBook], str | None, list[str], MacroContext]:
        view = self.playthroughs.playthrough(playthrough_id)
        character = self.ctx.character_record(view.character_id)
        card = self.library.card(character)
        books = self.lore.effective_books(view.id, character, card, preset_id=view.preset_id)  # (the assembler's key)
        # MVU's order (variable_init.ts:222-237): global books, the character's primary, its additional ones.
        embedded = [b for b in books if b.source == "character"][-1:] if card.data.get("character_book") else []
        ordered = ([b for b in books if b.source == "global"] + embedded
                   + [b for b in books if b.source == "character" and b not in embedded])
        init_books = [_init_book(b.book) for b in ordered]
        primary = embedded[0].book.name if embedded else None
        macros = replace(self.variables.macro_context(view.session_id, f"playthrough-{playthrough_id}"),
                         user=view.user_name, char=view.character_name)
        return view, init_books, primary, list(card.greetings), macros

    def planned_init(self, playthrough_id: int, surface: list[Any],
                     material: tuple[Any, list[InitBook], str | None, list[str], MacroContext] | None = None,
                     ) -> tuple[tuple[int, int], Any] | None:
        """(the message the initial record belongs to, `initial_record`'s result) for a surface with no record
        yet; None without MVU material or a message to hold it. `material`: `material(playthrough_id)`
        when the caller has just read it."""
        _view, books, primary, greetings, macros = material if material is not None else self.material(playthrough_id)
        if not has_material(books, greetings):
            return None
        shown = [m for m in surface if m.role in ("user", "assistant")]
        if not shown:
            return None  # MVU needs a message to hold the record (initCheck: "需要有开场白")
        expand = expander(macros)
        if len(shown) == 1 and shown[0].source == OPENING_SOURCE:
            result = initial_record(books, shown[0].content, primary_book=primary, substitute=expand)
        else:  # more than the greeting: loaded onto the last message, no greeting commands (:192-195)
            result = initial_record(books, "", primary_book=primary, substitute=expand, check_material=False)
        return (shown[-1].ref, result) if result is not None else None


class MvuPart:
    """What each half of `MvuService` (reading, committing) works from: the card's MVU `material`
    (which also holds the store and the playthroughs' heads) and `surface`, `session id →
    surface_events`, resolved on each use (`MvuService.surface_events`)."""

    def __init__(self, material: MvuMaterial, surface: Callable[[int], list[Event]]) -> None:
        self.material = material
        self.ctx = material.ctx
        self.playthroughs = material.playthroughs
        self.surface_events = surface

    def has_commits(self, session_id: int) -> bool:
        """Whether the session or any of its ancestors (past their fork points too: a fork inherits
        the commit made just after its reply) holds an MVU commit. Every record starts as a commit
        (the initial record), so without one there is no record to read or update. One read of the
        rare `state/commit` events on the (session, kind) index, where reading the whole surface to
        find out costs ~200 ms on a 5,000-message chat, MVU or not."""
        log = self.ctx.store.events
        sessions = [sid for sid, _upto in log.ancestry(session_id)]
        return any(MVU_PART in event.body for event in log.events_of_kind([STATE_KIND], sessions))


def has_material(books: list[InitBook], greetings: list[str]) -> bool:
    """`mvu.has_mvu_material`, each book's answer kept while its `_init_book` comes back (every
    step asks, and a 5,000-entry book's comments took ~2 ms to look through each time)."""
    def has_initvar(book: InitBook) -> bool:
        return per_list(book.entries, f"mvu.has_initvar:{book.name}", lambda: bool(initvar_entries(book)))
    return any(has_initvar(book) for book in books) or has_mvu_material([], greetings)


def _init_book(book: Any) -> InitBook:
    """A parsed world book as MVU's initialisation reads it, kept while the same parsed book comes back
    (the lore service parses a book once): every step checks for MVU material, and building this
    for a 5,000-entry book each time cost ~50 ms of the step's preparation."""
    return per_list(book.entries, f"mvu.init_book:{book.name}",
                    lambda: InitBook(book.name, tuple((e.comment, e.content) for e in book.entries)))
