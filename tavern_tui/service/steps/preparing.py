"""Provides `Preparing`: a step's preparation in its worker thread (the busy check, the
playthrough marked played, MVU's initial record, the batch, the assembler and the build fitted
once, `Prebuilt`), and the same build made ahead of the step while the person looks at what they
typed (`build_ahead`, kept in `ahead.BuildsAhead` and sent as it is while nothing it read has
changed).

Rules: DESIGN.md "One step" (assemble once, off the loop; a request that cannot fit is refused
before anything is stored); the rules of a build made ahead are `ahead`'s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from tavern_tui.assembly.strategies import PROJECTION
from tavern_tui.engine.step import Generation, Prebuilt
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.mvu import MvuService
from tavern_tui.service.persona import PersonaService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.steps.ahead import Ahead, BuildsAhead
from tavern_tui.service.steps.assembling import Assembling
from tavern_tui.views import PlaythroughView

logger = logging.getLogger(__name__)

Prepared = tuple[PlaythroughView, Any, dict[str, Any] | None, int | None]
"""A prepared step: the playthrough, the assembler (a `Prebuilt` or the projection's), its fit's
context record, the id of the persona the person writes as."""


class Preparing:
    """A step's preparation and the builds made ahead of it (`StepRunner.preparing`).

    Args:
        ctx: the shared settings and store.
        playthroughs, persona, lore, assembling, mvu: what a preparation reads (MVU: None for none).
        assembler: gives a step's assembler (`StepRunner._assembler`, looked up at each call:
            tests replace it).
    """

    def __init__(self, ctx: ServiceContext, playthroughs: PlaythroughService, persona: PersonaService,
                 lore: WorldInfoService, assembling: Assembling, mvu: MvuService | None, *,
                 assembler: Callable[..., Any]) -> None:
        self.ctx = ctx
        self.playthroughs = playthroughs
        self.persona = persona
        self.lore = lore
        self.assembling = assembling
        self.mvu = mvu
        self._assembler = assembler
        self.ahead = BuildsAhead()
        """The requests built while the person looks at what they typed (`build_ahead`)."""

    def prepare(self, playthrough_id: int, generation: Generation, text: str | None = None,
                claim: bool = False) -> Prepared:
        """(the playthrough, the assembler) of a step about to run; marks the playthrough played.
        Called in a worker thread: it runs SQL, reads (and on first use parses) the books, and
        waits for the key indexes, which the chat's warm-up (another worker thread) may hold for
        a while on a big book.

        The request is fitted once here, before anything of the step is stored: one that cannot
        fit is refused now (refused before sending, nothing half-stored). Returns (the
        playthrough, the assembler, that fit's `context` record, the id of the persona the person
        writes as: read here too, so the step waits on one worker, not two).

        Raises:
            NotFound: no such playthrough. PersonaCapExceeded: as `StepRunner._assembler`.
            StepBusy: another window or command is replying in this playthrough.
            ContextOverflow / PromptTooLarge: the request cannot fit the context.
        """
        with self.ctx.store.unit_of_work(write=False) as uow:
            session_id = uow.playthroughs.get(playthrough_id).head_session_id
        # Another window or command is replying here: refused before anything is built or touched
        # (`send_or_queue` queues the text then), as the step's lease would refuse it later.
        self.ctx.store.claims.refuse_if_held(session_id, self.ctx.stale_after)
        ahead = self._taken_ahead(playthrough_id, text, generation, claim)
        prepared: Prepared | None
        if ahead is not None:  # built on these very inputs while the person looked at the text
            if playthrough_id > 0:  # the persona pin a real step moves; the build ahead wrote nothing
                self.persona.persona_step(playthrough_id, pin=True)
            prepared = ahead
        else:
            with self.ctx.one_version():  # one version read for the build's caches (an MVU init append re-reads it)
                prepared = self._prepare_pinned(playthrough_id, generation, text, claim)
        assert prepared is not None
        # Marked played once built: a write before the build would make every read the builds
        # between two commits share (`ServiceContext.per_version`) be read again.
        with self.ctx.store.unit_of_work() as uow:
            uow.playthroughs.touch(playthrough_id)
        return prepared

    def build_ahead(self, playthrough_id: int, text: str) -> bool:
        """Build the request a send of `text` would make now and keep it for the step that sends
        that text (`ahead.BuildsAhead`: taken only while nothing it read has changed). Call it in
        a worker thread while the person looks at what they typed; it writes nothing. Returns
        whether a build was kept: not for an empty text, a database that cannot say it changed,
        a step that would write first or a build that fails (the step itself then says why)."""
        before = self.ahead.inputs_now(self.ctx, playthrough_id, text) if text.strip() else None
        if before is None:
            return False
        started = time.perf_counter()
        try:
            with self.ctx.one_version():
                prepared = self._prepare_pinned(playthrough_id, Generation(), text, False, ahead=True)
        except Exception:  # noqa: BLE001 - the step builds again and reports it
            logger.debug("no build ahead for playthrough %s", playthrough_id, exc_info=True)
            return False
        after = self.ahead.inputs_now(self.ctx, playthrough_id, text)
        if prepared is None or after is None or not after.same(before):
            return False  # something was written meanwhile (or the minute turned): the step builds
        prebuilt = prepared[1]
        prebuilt.ahead_ms, prebuilt.build_ms = round((time.perf_counter() - started) * 1000, 1), 0.0
        self.ahead.keep(Ahead(before, prepared))
        return True

    def _taken_ahead(self, playthrough_id: int, text: str | None, generation: Generation,
                     claim: bool) -> Prepared | None:
        """What `build_ahead` kept for this step, when it was built on the inputs of now."""
        if text is None or claim or not self.ahead.has(playthrough_id, text):
            return None
        now = self.ahead.inputs_now(self.ctx, playthrough_id, text)
        taken = self.ahead.take(now, generation, claim) if now is not None else None
        return taken.prepared if taken is not None else None

    def _prepare_pinned(self, playthrough_id: int, generation: Generation, text: str | None, claim: bool,
                        *, ahead: bool = False) -> Prepared | None:
        """`prepare` after the playthrough was touched, with the log's version pinned.
        `ahead`: a build ahead of the step (`build_ahead`), which writes nothing: None when the
        step would write first (MVU's initial record) or would not send a `Prebuilt`."""
        view = self.playthroughs.playthrough(playthrough_id)
        if generation.author_id is not None:  # a group member speaks: its card, book and scripts
            view = replace(view, character_id=generation.author_id, character_name=generation.author_name)
        if self.mvu is not None and ahead and self.mvu.needs_initialising(playthrough_id):
            return None
        if self.mvu is not None and not ahead:  # MVU initialises before the first generation (initCheck)
            self.mvu.ensure_initialised(playthrough_id)
        # The batch the step will claim (engine `step.claim.claim_inbox`: the pending items, steers first,
        # then `text`), read now; an item queued between here and the claim is fitted again by
        # the assembler in the step's own build, which refuses the same way.
        claimed = self.assembling.batch(playthrough_id, text or "") if text is not None or claim else []
        assembler = self._assembler(playthrough_id, generation, view=view, pin_persona=not ahead, pending=claimed)
        self.lore.index_cache.wait_free()
        history = self.assembling.surface(view.session_id)
        playing = self.persona.playthrough_persona(playthrough_id).id  # the persona the person writes as
        if getattr(assembler, "strategy", None) == PROJECTION:
            if ahead:
                return None
            return view, assembler, assembler.build(history, claimed)[1].get("context"), playing
        # The build fitted here is the one the step sends (`Prebuilt`): the opening's assemble
        # stage gets it back when nothing changed in between, instead of building again on the loop.
        prebuilt = Prebuilt.build(assembler, history, claimed)
        assert prebuilt.assembly is not None
        return view, prebuilt, prebuilt.assembly.meta.get("context"), playing
