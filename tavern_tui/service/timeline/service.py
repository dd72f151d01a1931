"""Provides `TimelineService`: swipes, edit, delete, rollback, branches, the variant tree, and
the forks and head moves the generating steps (`service.steps`) build on. It builds the tree's
view with `tree` and carries edits into forks and a branch's selections with `forks`.

Rules: seed 000 §1.1 and DESIGN.md "The session log": every one of these is a fork of a
session or a surface replacement; nothing is rewritten and every variant stays reachable.
SillyTavern behaviour followed (format-digest §d): only the last message swipes; swiping right
past the last reply generates a new one; the greeting swipes among `first_mes` and
`alternate_greetings`; continue extends the last reply; impersonate writes the person's line.
"""

from __future__ import annotations

import json
import threading
from typing import Any, cast

from tavern_tui.engine.events import EventKind, Origin
from tavern_tui.engine.inbox import move_pending
from tavern_tui.engine.log import (
    EDIT_SOURCE,
    SUMMARY_SOURCE,
    SYSTEM_PROMPT_SOURCE,
    SurfaceMessage,
    derive_messages,
    inspect,
    replacement_event,
    tail,
)
from tavern_tui.engine.step import OPENING_SOURCE, admit_opening
from tavern_tui.engine.timeline import SWIPE_DELETED, Ref, Timeline
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.timeline.forks import branch_title, carry_replacements, inherit, inherited_meta
from tavern_tui.service.timeline.tree import branch_links, timeline_view
from tavern_tui.text.names import substitute_names
from tavern_tui.views import PlaythroughView, SwipeView, TimelineView


def _member(body: dict[str, Any]) -> int | None:
    """The group member an opening's body names (`character_id`); None for a one-character chat's."""
    member = body.get("character_id")
    return member if isinstance(member, int) and not isinstance(member, bool) else None


class TimelineService:
    """Swipes, edits, deletes, rollback, branches and the variant tree (`tavern.timeline`).

    Args:
        ctx: the shared settings, store and provider.
        library: the characters (a greeting swipes among its card's greetings).
        playthroughs: the playthroughs (and the check an edit's text passes).
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self._timelines: dict[tuple[int, bool], tuple[tuple[int, int], Timeline, list[int]]] = {}
        # Worker threads fill and read the cache (a step's prelude runs in `asyncio.to_thread`,
        # the TUI reads the tree from thread workers) while the loop may read it too: the lock
        # keeps one entry from being filled, evicted or its head moved by two threads at once.
        # A tree handed out is shared: a later call may move its head to the stored one.
        self._cache_lock = threading.Lock()

    # -- reading the tree ---------------------------------------------------------------

    def variant_tree(self, playthrough_id: int, *, bodies: bool = False) -> tuple[Timeline, list[int]]:
        """The playthrough's variant tree and the ids of its own sessions (those a head may be);
        `bodies`: with every row's body (the tree view, export). Cached until the log changes."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.playthroughs.get(playthrough_id)
        log = self.ctx.store.events
        # Building the tree reads every message row; between appends and forks only the head
        # moves, so a swipe or jump reuses the tree and recomputes the active path.
        key = (playthrough_id, bodies)
        version = log.version()
        with self._cache_lock:
            cached = self._timelines.get(key)
            if cached is not None and cached[0] == version:
                timeline, members = cached[1], cached[2]
                if timeline.head_session != record.head_session_id:
                    timeline.move_head(record.head_session_id)
                return timeline, members
        # Built outside the lock (it reads every message row): two threads missing at once
        # both build, and the later one's tree is kept; both are of this version.
        links = log.playthrough_sessions(playthrough_id, record.root_session_id)
        members = [link.id for link in links if link.playthrough_id == playthrough_id]
        # Ancestors outside the playthrough count only through the fork point into it.
        bounds: dict[int, int | None] = {sid: None for sid in members}
        for sid, upto in log.ancestry(record.root_session_id)[:-1]:
            bounds[sid] = upto
        rows = log.variant_rows(bounds, bodies=bodies)
        timeline = Timeline(links, rows, record.head_session_id)
        with self._cache_lock:
            if len(self._timelines) >= 4:
                self._timelines.pop(next(iter(self._timelines)))
            self._timelines[key] = (version, timeline, members)
        return timeline, members

    def last_visible(self, timeline: Timeline) -> Ref | None:
        """The last variant of the active path that the chat shows (deleted ones skipped)."""
        for ref in reversed(timeline.path):
            replacement = timeline.replacements.get(ref)
            if replacement is None or replacement.message is not None:
                return ref
        return None

    def timeline(self, playthrough_id: int) -> TimelineView:
        """The playthrough's tree of message variants with the active path and previews.

        Raises:
            NotFound: no such playthrough.
        """
        timeline, _members = self.variant_tree(playthrough_id, bodies=True)
        with self.ctx.store.unit_of_work(write=False) as uow:
            branches = uow.playthroughs.children_of(list(timeline.sessions))
        links = branch_links(self.ctx.store.events, timeline, branches, playthrough_id)
        return timeline_view(playthrough_id, timeline, links)

    def swipe_state(self, playthrough_id: int) -> SwipeView:
        """The swipe counter of the chat's last message (`n/m`)."""
        timeline, _members = self.variant_tree(playthrough_id)
        return self._swipe_view(playthrough_id, timeline)

    def _swipe_view(self, playthrough_id: int, timeline: Timeline) -> SwipeView:
        last = self.last_visible(timeline)
        if last is None:
            return SwipeView(None, (0, 0))
        row = timeline.variants[last].row
        if row.source == OPENING_SOURCE:
            index, count = self._greeting_position(playthrough_id, last)
            return SwipeView(last, (index + 1, count), greeting=True)
        can_generate = (row.role == "assistant"
                        and row.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.ASSISTANT_ATTEMPT))
        return SwipeView(last, timeline.position(last), can_generate=can_generate)

    def greetings(self, playthrough_id: int, character_id: int | None = None) -> tuple[list[str], str, str]:
        """(the card's greetings, the character's name, the user's name) of a playthrough; of
        the member `character_id` when given (a group chat's greeting is its member's)."""
        view = self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work(write=False) as uow:
            card = self.library.card(uow.characters.get(character_id or view.character_id))
        return card.greetings, card.name, view.user_name

    def _greeting_position(self, playthrough_id: int, ref: Ref) -> tuple[int, int]:
        body = self.ctx.store.events.bodies([ref]).get(ref, {})
        greetings, _char, _user = self.greetings(playthrough_id, _member(body))
        index = body.get("greeting_index", 0)
        return (index if isinstance(index, int) else 0), max(1, len(greetings))

    # -- moving the head ----------------------------------------------------------------

    def _touch(self, playthrough_id: int) -> None:
        with self.ctx.store.unit_of_work() as uow:
            uow.playthroughs.touch(playthrough_id)

    def set_head(self, playthrough_id: int, session_id: int) -> PlaythroughView:
        """Move the playthrough's head to `session_id` (one of its sessions) and return it.
        What waits in the inbox moves along (`engine.inbox.move_pending`): it is the
        playthrough's, not the branch's."""
        with self.ctx.store.unit_of_work() as uow:
            old = uow.playthroughs.get(playthrough_id).head_session_id
            uow.playthroughs.set_head(playthrough_id, session_id)
        move_pending(self.ctx.store.events, old, session_id)
        return self.playthroughs.playthrough(playthrough_id)

    def fork(self, playthrough_id: int, at: Ref | None, timeline: Timeline | None = None,
              root_session: int | None = None) -> int:
        """A new session of the playthrough whose surface ends at `at` (None: empty, from the
        root session at seq 0). Edits and deletes the head shows of messages up to `at` are
        carried into the fork, so a swipe after an edit answers the edited text."""
        log = self.ctx.store.events
        if at is None:
            assert root_session is not None
            session_id = log.create_session(root_session, 0, playthrough_id)
        else:
            session_id = log.create_session(at[0], at[1], playthrough_id)
        if timeline is not None and at is not None:
            carry_replacements(self.ctx.store.events, session_id, at, timeline)
        return session_id

    def select_variant(self, playthrough_id: int, ref: Ref) -> PlaythroughView:
        """Show a variant: the head moves to the session that ends at its newest continuation
        (or stays, when it is already on the active path). The choice is stored, so it survives
        a restart.

        Raises:
            NotFound: no such playthrough or variant.
        """
        timeline, members = self.variant_tree(playthrough_id)
        if ref not in timeline.variants:
            raise NotFound(f"no message {ref[0]}:{ref[1]} in playthrough {playthrough_id}")
        return self.set_head(playthrough_id, timeline.session_for(ref, members))

    def swipe(self, playthrough_id: int, direction: int) -> SwipeView | None:
        """Move the last message to its previous (-1) or next (+1) sibling variant.

        On the greeting, moves among the card's greetings (a greeting not shown before is
        admitted as a new opening reference in a fork; no reply is fabricated).

        Returns:
            The new counter, or None when swiping right past the last reply: the caller then
            generates a new variant with `regenerate` (SillyTavern's swipe-right-to-generate).
            Swiping left of the first, or past the last greeting, returns the counter unchanged.
        """
        timeline, members = self.variant_tree(playthrough_id)
        state = self._swipe_view(playthrough_id, timeline)
        if state.ref is None or direction == 0:
            return state
        step = 1 if direction > 0 else -1
        if state.greeting:
            return self._swipe_greeting(playthrough_id, timeline, members, state, step)
        siblings = timeline.siblings(state.ref)
        target = siblings.index(state.ref) + step
        if target < 0:
            return state
        if target >= len(siblings):
            return None if state.can_generate else state
        head = timeline.session_for(siblings[target], members)
        self.set_head(playthrough_id, head)
        with self._cache_lock:  # the cached tree: another thread may be moving its head too
            timeline.move_head(head)
        return self._swipe_view(playthrough_id, timeline)

    def delete_swipe(self, playthrough_id: int) -> SwipeView:
        """Delete the shown swipe of the last message and show another (SillyTavern's "delete
        swipe": the one before it, or the next when it was the first), leaving the other swipes.
        The variant stays in the log and the tree; it leaves the swipes, the counter and exports
        (a `surface/replaced` with `swipe_deleted`, in the variant's own session).

        Returns:
            The new counter.

        Raises:
            TavernError: the chat is empty, its last message is the greeting (swipes there are
                the card's greetings), or the shown swipe is the only one (delete the message).
        """
        timeline, members = self.variant_tree(playthrough_id)
        state = self._swipe_view(playthrough_id, timeline)
        if state.ref is None:
            raise TavernError("the chat is empty: there is no swipe to delete")
        if state.greeting:
            raise TavernError("the greeting's swipes are the card's greetings; they cannot be deleted")
        siblings = timeline.siblings(state.ref)
        if len(siblings) < 2:
            raise TavernError("this is the message's only swipe; delete the message instead")
        index = siblings.index(state.ref)
        keep = siblings[index - 1] if index > 0 else siblings[index + 1]
        head = timeline.session_for(keep, members)
        event = replacement_event([state.ref], None)
        event.body[SWIPE_DELETED] = True
        self.ctx.store.events.append(state.ref[0], [event])
        self.set_head(playthrough_id, head)
        return self.swipe_state(playthrough_id)

    def _swipe_greeting(self, playthrough_id: int, timeline: Timeline, members: list[int], state: SwipeView,
                        step: int) -> SwipeView:
        assert state.ref is not None
        index = state.position[0] - 1 + step
        member = _member(self.ctx.store.events.bodies([state.ref]).get(state.ref, {}))
        greetings, char, user = self.greetings(playthrough_id, member)
        if index < 0 or index >= len(greetings):
            return state
        roots = timeline.siblings(state.ref)
        bodies = self.ctx.store.events.bodies(roots)
        for root in roots:
            row = timeline.variants[root].row
            if row.source == OPENING_SOURCE and bodies.get(root, {}).get("greeting_index", 0) == index:
                self.set_head(playthrough_id, timeline.session_for(root, members))
                return self.swipe_state(playthrough_id)
        parent = timeline.variants[state.ref].parent  # a group's later greeting: after the earlier ones
        if parent is None:
            with self.ctx.store.unit_of_work() as uow:
                root_session = uow.playthroughs.get(playthrough_id).root_session_id
            origin_session = self.ctx.store.events.ancestry(root_session)[0][0]
            session_id = self.fork(playthrough_id, None, root_session=origin_session)
        else:
            session_id = self.fork(playthrough_id, parent, timeline)
        meta: dict[str, Any] = {"greeting_index": index, "greetings": len(greetings)}
        if member is not None:  # a group member's greeting keeps its speaker
            meta.update(name=char, character_id=member)
        admit_opening(self.ctx.store.events, session_id, substitute_names(greetings[index], char, user), meta)
        self.set_head(playthrough_id, session_id)
        return self.swipe_state(playthrough_id)

    def rollback(self, playthrough_id: int, ref: Ref) -> PlaythroughView:
        """Continue the playthrough from an earlier message: the head becomes a fork ending at
        `ref`; the later messages stay reachable as a sibling branch.

        Raises:
            NotFound: no such playthrough or message.
        """
        timeline, _members = self.variant_tree(playthrough_id)
        if ref not in timeline.variants:
            raise NotFound(f"no message {ref[0]}:{ref[1]} in playthrough {playthrough_id}")
        return self.set_head(playthrough_id, self.fork(playthrough_id, ref, timeline))

    def branch_playthrough(self, playthrough_id: int, ref: Ref) -> PlaythroughView:
        """Start a new playthrough from a message ("new playthrough from here"): its root is a
        fork of this one ending at `ref`; the tree of this playthrough links to it.

        The child inherits the parent's selections (seed 000 §3 `agent/created`: a child
        inherits its parent's strategy selection; issue 20 item 2): see `forks.inherit`. Variables
        come with the fork (its surface is the parent's up to `ref`). Each is a copy: the
        child's later changes never touch the parent.

        Raises:
            NotFound: no such playthrough or message.
        """
        timeline, _members = self.variant_tree(playthrough_id)
        if ref not in timeline.variants:
            raise NotFound(f"no message {ref[0]}:{ref[1]} in playthrough {playthrough_id}")
        with self.ctx.store.unit_of_work(write=False) as uow:
            parent = uow.playthroughs.get(playthrough_id)
        title = branch_title(self.playthroughs.chat_title(parent))  # before the fork: the parent's own first line
        session_id = self.fork(playthrough_id, ref, timeline)
        with self.ctx.store.unit_of_work() as uow:  # one transaction: the child and all it inherits
            created = uow.playthroughs.add(character_id=parent.character_id, title=title,
                                           user_name=parent.user_name, session_id=session_id,
                                           meta=json.dumps(inherited_meta(parent.meta, playthrough_id, ref),
                                                           ensure_ascii=False))
            inherit(uow, parent, created.id)
        return self.playthroughs.playthrough(created.id)

    # -- edits --------------------------------------------------------------------------

    def _surface_message(self, playthrough_id: int, ref: Ref) -> tuple[PlaythroughView, list[SurfaceMessage], int]:
        """(view, chat surface without the system section, index of the message shown for
        `ref`). Raises NotFound when the head does not show it."""
        view = self.playthroughs.playthrough(playthrough_id)
        # A variant the head shows edited is on the surface as its (newest) replacement.
        timeline, _members = self.variant_tree(playthrough_id)
        key = cast(Ref, tuple(ref))  # a caller may pass the ref as a JSON list
        newest = timeline.newest_replacement(key)
        shown = newest.ref if newest is not None else key
        surface = [m for m in derive_messages(self.ctx.store.events, view.session_id, include_failed=True)
                   if m.source != SYSTEM_PROMPT_SOURCE]
        for index, message in enumerate(surface):
            if message.ref == shown:
                return view, surface, index
        raise NotFound(f"message {ref[0]}:{ref[1]} is not shown in playthrough {playthrough_id}")

    def shown_ref(self, playthrough_id: int, ref: Ref) -> Ref:
        """The ref under which the chat shows a variant: itself, or its newest edit."""
        _view, surface, index = self._surface_message(playthrough_id, ref)
        return surface[index].ref

    def edit_message(self, playthrough_id: int, ref: Ref, text: str, *, allow_secrets: bool = False) -> None:
        """Replace a shown message's text (a surface replacement; the original stays in the log).
        `ref` is the message as the chat shows it, or the variant the tree lists (an earlier
        edit of it is edited again).

        An assistant message the person rewrote carries origin operator (seed 001); the person's
        own message stays theirs. Later swipes and branches are untouched.

        Args:
            allow_secrets: the person confirmed a secret-looking text (`PlaythroughService.check_message`;
                one the message already held is not refused again).

        Raises:
            NotFound: the message is not on the playthrough's surface.
            TavernError: empty text (delete the message instead).
            SecretRefused: the text holds the configured API key, or a new secret without
                `allow_secrets`; nothing is stored.
        """
        if not text.strip():
            raise TavernError("an edit needs text; to remove the message, delete it")
        view, surface, index = self._surface_message(playthrough_id, ref)
        message = surface[index]
        self.playthroughs.check_message(text, allow_secrets=allow_secrets, where="edit", already=message.content)
        replacement: dict[str, Any] = {"role": message.role, "content": text}
        for key in ("name", "speaker", "persona", "hidden", "summary"):
            if key in message.body:
                replacement[key] = message.body[key]
        origin = Origin.OPERATOR if message.role != "user" else None
        # An edited summary stays a summary node (never dropped to fit; issue 16).
        source = SUMMARY_SOURCE if message.source == SUMMARY_SOURCE else EDIT_SOURCE
        self.ctx.store.events.append(view.session_id, [replacement_event([message.ref], replacement, origin, source)])
        self._touch(playthrough_id)

    def delete_message(self, playthrough_id: int, ref: Ref, *, to_end: bool = False) -> int:
        """Hide a shown message (and, with `to_end`, every message after it, as SillyTavern's
        delete mode does) from the surface; the originals stay in the log and in the tree.

        Returns:
            How many messages were hidden.

        Raises:
            NotFound: the message is not on the playthrough's surface.
        """
        view, surface, start = self._surface_message(playthrough_id, ref)
        targets = [m.ref for m in (surface[start:] if to_end else surface[start:start + 1])]
        self.ctx.store.events.append(view.session_id, [replacement_event(targets, None)])
        self._touch(playthrough_id)
        return len(targets)

    def last_message(self, playthrough_id: int) -> tuple[PlaythroughView, SurfaceMessage | None]:
        """(the playthrough's view, the last message its chat shows or None), one bounded read.

        A reply that failed before its first token counts, as the chat shows it (`playthroughs.messages`:
        "Shodan error · network"): a swipe or continue of it asks the member who failed, whose
        `character_id` and `name` its `assistant/attempt` body keeps, not the one who spoke before it."""
        view = self.playthroughs.playthrough(playthrough_id)
        log = self.ctx.store.events
        shown = tail(log, inspect(log, view.session_id), 1, include_failed=True)  # one bounded read
        return view, (shown[-1] if shown else None)
