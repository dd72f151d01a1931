"""Provides the assemble stage of a step's opening: the caller's `Assembler` on the history plus
the claimed batch; `Prebuilt`, an assembler whose build was made ahead (in a worker, to check the
fit) and is sent as it is; and `put_back`, which returns the claimed batch to the inbox when a
stage before admission fails.

Rules: DESIGN.md "One step" (world info scans durable history plus the claimed batch; the
engine knows nothing of SillyTavern formats).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from tavern_tui.engine.inbox import change_async, restore_splices
from tavern_tui.engine.log import AsyncSessionLog, SurfaceMessage
from tavern_tui.engine.step.claim import Claimed
from tavern_tui.engine.step.types import Assembler, Assembly


class Prebuilt:
    """An `Assembler` holding one build made ahead: called with the same history (every message
    equal, field by field) and the same claimed texts, it returns that `Assembly` instead of building again,
    so the request fitted in the worker is the one sent and the build runs once per step (DESIGN.md
    "One step": assemble once, off the loop). Other inputs (a line queued meanwhile, another
    process's message, a tool turn's later step) are built by the wrapped assembler. Every other
    attribute is the wrapped assembler's.

    Args:
        assembler: the assembler that made `assembly`.
        history: the surface it was built on.
        claimed: the claimed texts it was built with.
        assembly: what it built.
    """

    def __init__(self, assembler: Assembler, history: Sequence[SurfaceMessage], claimed: Sequence[str],
                 assembly: Assembly, build_ms: float = 0.0) -> None:
        self.assembler = assembler
        self.key = (_history_key(history), tuple(claimed))
        self.assembly: Assembly | None = assembly
        self.build_ms = build_ms
        """Milliseconds the build ahead took (the step's `assemble` stage when it is sent as it is)."""
        self.gather_ms = 0.0
        """Milliseconds of reading what the build needed, before it (the caller's to set; the
        step's `gather` stage when the build is sent as it is)."""
        self.ahead_ms = 0.0
        """Milliseconds the whole build took when it was made before the step began, while the
        person looked at what they typed (the caller's to set; the step's `ahead` stage)."""
        self.used = False
        """Whether the last call returned the build made ahead."""
        self.builds = 0
        """How many times a build was needed after all (the inputs had changed)."""

    @classmethod
    def build(cls, assembler: Assembler, history: list[SurfaceMessage], claimed: list[str]) -> Prebuilt:
        """Build now (timed) and keep the build for the step."""
        started = time.perf_counter()
        assembly = assembler(history, claimed)
        return cls(assembler, history, claimed, assembly, round((time.perf_counter() - started) * 1000, 1))

    def __call__(self, history: list[SurfaceMessage], claimed: list[str]) -> Assembly:
        made, self.assembly = self.assembly, None  # used once: a later call (a tool step) builds
        self.used = made is not None and (_history_key(history), tuple(claimed)) == self.key
        if made is not None and self.used:
            return made
        self.builds += 1
        return self.assembler(history, claimed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.assembler, name)


def _history_key(history: Sequence[SurfaceMessage]) -> tuple[SurfaceMessage, ...]:
    return tuple(history)  # compared field by field: ref, text, body, origin, time


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
