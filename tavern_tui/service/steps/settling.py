"""Provides `Settling`: the work that runs after a step's reply settles, MVU's commit of the
reply's commands (issue 18) and belief learning from what the person said, and the MVU commit of
each playthrough's last settled reply (`last_mvu`, what the status line reports).

Separate from `runner` because none of it is the step: it runs once the step's lease is released
(another window is no longer told "busy"), best effort, off the event loop, and a failure is
logged, never fails the step (the reply is already stored). `StepRunner` holds one and decides
when it runs.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from tavern_tui.engine.step import StepSettled
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.mvu import MvuService
from tavern_tui.service.persona import PersonaService

# The runner's logger: these records are the step's, and keep the name they were always logged under.
logger = logging.getLogger("tavern_tui.service.steps.runner")


class Settling:
    """After a reply settles: MVU's commit and belief learning (`StepRunner.settling`).

    Args:
        ctx: the shared settings and provider (which belief extractor runs).
        persona: learns the beliefs.
        mvu: MVU state (None: no MVU state, nothing is committed).
    """

    def __init__(self, ctx: ServiceContext, persona: PersonaService, mvu: MvuService | None) -> None:
        self.ctx = ctx
        self.persona = persona
        self.mvu = mvu
        self.last_mvu: dict[int, Any] = {}  # playthrough → the MVU commit of its last settled reply (MvuView | None)

    async def commit_mvu(self, playthrough_id: int, settled: StepSettled) -> None:
        """Commit the settled reply's MVU commands (issue 18), off the event loop; a failure is logged and
        never fails the step (the reply is stored; the state stays at the record before it)."""
        if self.mvu is None:
            return
        try:
            self.last_mvu[playthrough_id] = await asyncio.to_thread(
                self.mvu.commit_reply, playthrough_id, settled.event.session_id, settled.event)
        except Exception:  # noqa: BLE001 - state is best effort once the reply is kept
            logger.exception("MVU commit failed for playthrough %s", playthrough_id)

    async def consolidate_quietly(self, playthrough_id: int) -> None:
        """Learn from what the person just said, off the event loop (the UI's thread); a failure
        is logged, never fails the step it follows. The model extractor runs only when
        configured and the provider is a real model."""
        try:
            if self.ctx.settings.belief_extractor == "model" and not self.ctx.provider.placeholder:
                await self.persona.consolidate_with_model(playthrough_id)
            else:
                await asyncio.to_thread(self.persona.consolidate, playthrough_id)
        except Exception:  # noqa: BLE001 - learning is best effort; the reply is already stored
            logger.exception("belief consolidation failed for playthrough %s", playthrough_id)
