"""Provides the assemble stage of a step's opening: the caller's `Assembler` on the history plus
the claimed batch; and `put_back`, which returns the claimed batch to the inbox when a stage
before admission fails.

Rules: DESIGN.md "One step" (world info scans durable history plus the claimed batch; the
engine knows nothing of SillyTavern formats).
"""

from __future__ import annotations

from tavern_tui.engine.inbox import change_async, restore_splices
from tavern_tui.engine.log import AsyncSessionLog
from tavern_tui.engine.step.claim import Claimed
from tavern_tui.engine.step.types import Assembler, Assembly


async def assemble_claimed(log: AsyncSessionLog, session_id: int, assemble: Assembler, claimed: Claimed) -> Assembly:
    """`assemble(history, claimed texts)`, called on the event loop. An assembler that raises
    puts the claimed batch back in the inbox (nothing of it was admitted), then the error goes on.

    Raises:
        whatever `assemble` raises.
    """
    try:
        return assemble(claimed.history, [item.content for item in claimed.batch])
    except BaseException:
        await put_back(log, session_id, claimed)
        raise


async def put_back(log: AsyncSessionLog, session_id: int, claimed: Claimed) -> bool:
    """Put the claimed batch back in the inbox (a `restored` splice) when a stage before admission
    fails: nothing of it was admitted, so the next step claims it again (seed 000 §1: a failed
    `prepareCall()` admits nothing). Returns whether there was a claim to put back."""
    if claimed.event is None:
        return False
    await change_async(log, session_id, restore_splices)
    return True
