"""Provides `InboxService`: a playthrough's durable inbox (`tavern.inbox`): queue, steer, edit,
cancel and list what waits to be claimed, whether a step is under way, and the wait for it.

Rules: seed 000 §1 and §5 via `engine.inbox` (every change is one `inbox/spliced` event; the
queue is the projection of those events, so it survives restarts and is shared by every window
and command on the same database). DESIGN.md "The inbox". The person's text passes the same
secret check as a send before it is queued (DESIGN.md "Persona": every write surface refuses
credential-shaped text).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from tavern_tui.engine.events import Event
from tavern_tui.engine.inbox import (
    NEXT_STEP,
    NEXT_TURN,
    PendingInputProjection,
    PendingItem,
    cancel_splice,
    change,
    claim_batch,
    insert_splice,
    new_message,
    projection,
    replace_splice,
)
from tavern_tui.errors import TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.views import InboxItemView


class ClaimedElsewhere(TavernError):
    """A queued item was claimed by another window or command (its reply is in the log there)."""


def _view(position: int, item: PendingItem) -> InboxItemView:
    return InboxItemView(item.id, position, item.target, item.content, item.queued_at,
                         item.origin.value if item.origin else "customer")


class InboxService:
    """The inbox of a playthrough's head session (`tavern.inbox`).

    Args:
        ctx: the shared store (the session log) and settings (how long a quiet step stays live).
        playthroughs: resolves a playthrough to its head session and checks text for secrets.
    """

    def __init__(self, ctx: ServiceContext, playthroughs: PlaythroughService) -> None:
        self.ctx = ctx
        self.playthroughs = playthroughs
        # session → (log version, its pending views): a preview asks on every keystroke, and the queue is a
        # fold over the whole surface (5,000 events in `benchmarks/prompt_build`) that changes only with the log
        self._pending: dict[int, tuple[tuple[int, int], tuple[InboxItemView, ...]]] = {}

    def _session(self, playthrough_id: int) -> int:
        """The playthrough's head session (one read: the chat opens with a few of these)."""
        return self.ctx.playthrough_record(playthrough_id).head_session_id

    def _queue(self, playthrough_id: int) -> tuple[int, PendingInputProjection]:
        session_id = self._session(playthrough_id)
        return session_id, projection(self.ctx.store.events, session_id)

    def pending(self, playthrough_id: int) -> list[InboxItemView]:
        """What waits to be claimed, in claim order (steers first), numbered from 1.

        Raises:
            NotFound: no such playthrough.
        """
        session_id = self._session(playthrough_id)
        log = self.ctx.store.events
        version = log.version() if hasattr(log, "version") else None
        cached = self._pending.get(session_id)
        if version is not None and cached is not None and cached[0] == version:
            return list(cached[1])
        views = [_view(n, item) for n, item in enumerate(projection(log, session_id).items, start=1)]
        if version is not None:
            if len(self._pending) >= 16:
                self._pending.clear()
            self._pending[session_id] = (version, tuple(views))
        return views

    def add(self, playthrough_id: int, text: str, *, steer: bool = False,
            allow_secrets: bool = False) -> InboxItemView:
        """Queue `text` (one `inbox/spliced` insert): next-turn at the end, or a steer
        (next-step) after the steers already queued. The next step that runs claims it.

        Raises:
            TavernError: empty text. SecretRefused: as `PlaythroughService.check_message`.
            NotFound: no such playthrough. InboxConflict: the queue kept changing.
        """
        self._check(text, allow_secrets)
        target = NEXT_STEP if steer else NEXT_TURN
        session_id = self._session(playthrough_id)
        message = new_message(text)
        change(self.ctx.store.events, session_id, lambda q: [insert_splice(q, [message], target)])
        return self._find(playthrough_id, message["id"])

    def edit(self, playthrough_id: int, item_id: str, text: str, *, allow_secrets: bool = False) -> InboxItemView:
        """Replace a pending item's text (one `replaced` splice; same id, place and target).

        Raises:
            NotFound: no pending item `item_id` (already claimed or canceled). TavernError /
            SecretRefused: as `add`.
        """
        self._check(text, allow_secrets)
        change(self.ctx.store.events, self._session(playthrough_id), lambda q: [replace_splice(q, item_id, text)])
        return self._find(playthrough_id, item_id)

    def cancel(self, playthrough_id: int, item_id: str) -> InboxItemView:
        """Take a pending item out for good (one `canceled` splice); it never reaches the model.

        Returns:
            The item as it was.

        Raises:
            NotFound: no pending item `item_id`.
        """
        before = self._find(playthrough_id, item_id)
        change(self.ctx.store.events, self._session(playthrough_id), lambda q: [cancel_splice(q, item_id)])
        return before

    def claim_at_step_boundary(self, playthrough_id: int) -> tuple[Event | None, list[PendingItem]]:
        """The hook a turn with several steps calls at each boundary (after its tool results,
        seed 000 §1; `StepRunner._turn_tools` hands it to the engine's `step.tools.tool_turn`): claim only
        the steers (next-step items); the next step admits them before its assembly. A turn
        without tools is one step: the next turn claims steers and next-turn items together.

        Raises:
            ClaimPending: another process's claim is not admitted yet.
        """
        return claim_batch(self.ctx.store.events, self._session(playthrough_id), NEXT_STEP,
                           stale_after=self.ctx.stale_after, now=lambda: datetime.now(UTC))

    def step_in_progress(self, playthrough_id: int) -> bool:
        """Is a step under way in this playthrough (here or in another process)? The busy
        detection, in this one function: a live owner holds the step's lease (`store.StepLeases`;
        issue 23: a dead owner's lease counts for nothing, the next step recovers its reply at
        once). A send while this holds queues instead of failing (the CLI and the chat screen).

        Raises:
            NotFound: no such playthrough.
        """
        return self.ctx.store.claims.held(self._session(playthrough_id), self.ctx.stale_after)

    async def wait_settled(self, playthrough_id: int, *, poll: float = 0.1) -> None:
        """Return once no step is under way in this playthrough (`step_in_progress`), checking
        every `poll` seconds off the event loop. A crashed step stops counting after
        `stale_after` seconds, so this ends."""
        while await asyncio.to_thread(self.step_in_progress, playthrough_id):
            await asyncio.sleep(poll)

    def draft(self, playthrough_id: int) -> str:
        """The composer's unsent text for this playthrough ("" when none)."""
        with self.ctx.store.unit_of_work() as uow:
            return uow.drafts.get(playthrough_id)

    def save_draft(self, playthrough_id: int, text: str) -> bool:
        """Keep the composer's unsent text (replacing the last one; "" removes it). A text that
        holds a secret or the configured API key is never written (DESIGN.md: keys never reach
        the database): the stored draft is removed instead and False returned.

        Raises:
            NotFound: no such playthrough.
        """
        self._session(playthrough_id)  # NotFound for no such playthrough
        text, saved = self.playthroughs.keepable(text)
        with self.ctx.store.unit_of_work() as uow:
            uow.drafts.put(playthrough_id, text)
        return saved

    def _find(self, playthrough_id: int, item_id: str) -> InboxItemView:
        _sid, queue = self._queue(playthrough_id)
        index = queue.find(item_id)
        return _view(index + 1, queue.items[index])

    def _check(self, text: str, allow_secrets: bool) -> None:
        if not text.strip():
            raise TavernError("nothing to queue: the message is empty")
        self.playthroughs.check_message(text, allow_secrets=allow_secrets)
