"""Provides the refresh stage of a step's opening: the runtime context is read again after the
call config is prepared, and admission uses that snapshot instead of the assembler's proposal.

Rules: seed 000 §1 ("systemPrompt.refreshContext() rereads runtime facts before admission …
admission replaces the proposed context snapshot"; "Trace verifies refreshed content, including
context clearing, against the durable snapshot") and DESIGN.md "One step".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tavern_tui.engine.log import AsyncSessionLog
from tavern_tui.engine.step.admit import admitted_context
from tavern_tui.engine.step.assemble import put_back
from tavern_tui.engine.step.claim import Claimed
from tavern_tui.engine.step.types import Assembly, ContextRefresh, ContextSnapshot


@dataclass(frozen=True, slots=True)
class Refreshed:
    """What the refresh stage decided.

    Attributes:
        context: the snapshot admission uses.
        changed: identifiers whose refreshed text differs from the proposed one (or that are new).
        cleared: identifiers that applied at the last step and no longer do.
    """

    context: ContextSnapshot
    changed: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The `request/context` body's `context` field: `{"applied", "changed", "cleared"}`."""
        return {"applied": [ident for ident, _ in self.context], "changed": list(self.changed),
                "cleared": list(self.cleared)}


async def refresh_context(log: AsyncSessionLog, session_id: int, assembly: Assembly, claimed: Claimed,
                          refresh: ContextRefresh | None) -> Refreshed:
    """Re-read the runtime context (`refresh`; None keeps the proposed snapshot) and compare it
    with the last step's: a context that applied then (`Claimed.applied`; for a chat without that
    record, the context messages on its surface) and not now is cleared. A projected request
    (`Assembly.request`) admits no context: nothing is re-read. A refresh that raises puts the
    claimed batch back in the inbox (nothing was admitted), then the error goes on.
    """
    proposed = assembly.context
    try:
        context = await refresh(proposed) if refresh is not None and assembly.request is None else proposed
    except BaseException:
        await put_back(log, session_id, claimed)
        raise
    before = dict(proposed)
    changed = tuple(ident for ident, text in context if before.get(ident) != text)
    previous = claimed.applied if claimed.applied is not None else tuple(admitted_context(claimed.history))
    applying = {ident for ident, _ in context}
    cleared = tuple(ident for ident in dict.fromkeys(previous) if ident not in applying)
    return Refreshed(tuple(context), changed, cleared)
