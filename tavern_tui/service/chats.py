"""Provides `ChatService`: finding a line in any chat (issue 20 item 4). The index is the
database's own, kept in step with the event log (`store.search`); a hit is shown with its chat,
speaker and the words around it, and opening it moves that chat's head onto the branch that
holds the message (`TimelineService.select_variant`), so it is seen where it was said.
"""

from __future__ import annotations

from dataclasses import replace

from tavern_tui.engine.timeline import Ref
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.message_views import written_name
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.timeline import TimelineService
from tavern_tui.store.search import words
from tavern_tui.views import PlaythroughView, SearchResultView

SNIPPET_CHARS = 120
"""About how many characters of a matched message a result shows."""


def snippet(text: str, query: str, width: int = SNIPPET_CHARS) -> str:
    """The part of `text` around the first word of `query` it holds (case folded), whitespace
    folded, "…" where it was cut; the start of `text` when no word is found literally."""
    flat = " ".join(text.split())
    folded = flat.casefold()
    at = min((i for i in (folded.find(w.casefold()) for w in words(query)) if i >= 0), default=0)
    start = max(0, at - width // 3)
    if start:  # begin at a word, not inside one
        space = flat.find(" ", start, at)
        start = space + 1 if space >= 0 else at
    end = min(len(flat), start + width)
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")


def on_surface(ref: Ref, chain: list[tuple[int, int | None]]) -> bool:
    """`ref` is on the surface whose ancestry chain is `chain` (`EventLog.ancestry`)."""
    return any(ref[0] == session and (upto is None or ref[1] <= upto) for session, upto in chain)


class ChatService:
    """Search across every chat (`tavern.chats`).

    Args:
        ctx: the store (its `search` index and event log).
        library: character names for `--character`; playthroughs: the chats; timeline: the branches.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 timeline: TimelineService) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self.timeline = timeline

    def search(self, query: str, *, character: str | None = None, include_archived: bool = False,
               limit: int = 50) -> list[SearchResultView]:
        """Messages (and edits) on any branch of any chat holding every word of `query`, newest
        first, at most `limit`; archived chats only with `include_archived`.

        Args:
            character: only this character's chats (an id or a name as `find_character` takes it).

        Raises:
            NotFound: an unknown character.
        """
        character_id = self.library.find_character(character).id if character else None
        chats = {p.id: p for p in self.playthroughs.playthroughs(character_id, include_archived=include_archived)}
        chains: dict[int, list[tuple[int, int | None]]] = {}
        with self.ctx.store.unit_of_work(write=False) as uow:
            # A group chat's hit is named by its group, as the chat's header and `sessions` name it.
            groups = uow.groups.names_by_playthrough()
        results: list[SearchResultView] = []
        seen: set[tuple[int, Ref]] = set()
        for hit in self.ctx.store.search.search(query, limit=limit * 4):
            chat = chats.get(hit.playthrough_id or 0)
            if chat is None:
                continue
            ref: Ref = hit.targets[0] if hit.kind == "surface/replaced" and hit.targets else (hit.session_id, hit.seq)
            if (chat.id, ref) in seen:
                continue
            seen.add((chat.id, ref))
            if chat.session_id not in chains:
                chains[chat.session_id] = self.ctx.store.events.ancestry(chat.session_id)
            role = hit.role or "assistant"
            results.append(SearchResultView(chat.id, chat.character_id, groups.get(chat.id, chat.character_name),
                                            chat.chat_title, ref,
                                            role, chat.user_name if role == "user" else chat.character_name,
                                            snippet(hit.text, query), chat.archived,
                                            on_surface(ref, chains[chat.session_id]), (hit.session_id, hit.seq)))
            if len(results) >= limit:
                break
        return self._members_named(results)

    def _members_named(self, results: list[SearchResultView]) -> list[SearchResultView]:
        """`results` each under the name its line was written under (`written_name`: a person's
        line under the persona's name then, a group member's reply under that member's), not
        the playthrough's names now, as the chat names them."""
        lines = [r.shown_ref for r in results if r.role in ("user", "assistant") and r.shown_ref is not None]
        if not lines:
            return results
        bodies = self.ctx.store.events.bodies(lines)
        named = []
        for result in results:
            body = bodies.get(result.shown_ref) if result.shown_ref is not None else None
            message = body.get("message") if isinstance(body, dict) and isinstance(body.get("message"), dict) else body
            name = written_name(result.role, message)  # an edit's body holds the message it shows
            named.append(replace(result, speaker=name) if name else result)
        return named

    def open_result(self, result: SearchResultView) -> PlaythroughView:
        """Move the result's chat onto the branch that shows its message and return the chat.

        Raises:
            NotFound: the chat or message is gone from its tree.
        """
        if result.on_head:
            return self.playthroughs.playthrough(result.playthrough_id)
        return self.timeline.select_variant(result.playthrough_id, result.ref)
