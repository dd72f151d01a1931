"""Provides step ownership: `Claim`, the `StepClaims` protocol the store implements, and `Lease`,
the claim a running step holds with its heartbeat.

Rules: DESIGN.md "One step" (one step at a time per playthrough; a dead owner loses it at once).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Protocol

from tavern_tui.engine.log import until_done
from tavern_tui.errors import StoreError


@dataclass(frozen=True, slots=True)
class Claim:
    """A step taken in the database (`StepClaims.claim`).

    Attributes:
        token: identifies this claim (release and heartbeat touch only it).
        displaced: why a previous owner lost the step ("its process ended", …), None when
            nobody held it.
    """

    token: str
    displaced: str | None = None


class StepClaims(Protocol):
    """Step ownership as a lease: one atomic claim per playthrough, owner pid + host + heartbeat,
    lost at once by a dead owner. `store.StepLeases` implements it."""

    def claim(self, session_id: int, stale_after: float) -> Claim:
        """Take the step of the session's playthrough; raises `StepBusy` when a live owner has it."""
        ...

    def heartbeat(self, token: str) -> None:
        """Mark the claim alive now."""
        ...

    def release(self, token: str) -> None:
        """Give the claim back."""
        ...


def heartbeat_every(stale_after: float) -> float:
    """Seconds between a lease's heartbeats: a third of `stale_after`, between 1 and 10, so a live
    owner beats several times before it would count as stale."""
    return max(1.0, min(10.0, stale_after / 3))


class Lease:
    """The claim a step holds while it runs, with its heartbeat task (beats every `every` s).
    Without `claims` it takes and releases nothing."""

    def __init__(self, claims: StepClaims | None, every: float) -> None:
        self.claims = claims
        self.every = every
        self.token: str | None = None
        self._beat: asyncio.Task[None] | None = None

    async def take(self, session_id: int, stale_after: float) -> Claim | None:
        """Claim the step (in a worker thread) and start beating; None without `claims`.

        Raises:
            StepBusy: a live owner holds the step.
        """
        if self.claims is None:
            return None
        claim = await asyncio.to_thread(self.claims.claim, session_id, stale_after)
        self.token = claim.token
        self._beat = asyncio.ensure_future(self._beating(claim.token))
        return claim

    async def _beating(self, token: str) -> None:
        assert self.claims is not None
        while True:
            await asyncio.sleep(self.every)
            try:
                await asyncio.to_thread(self.claims.heartbeat, token)
            except StoreError:
                pass  # a busy database: the next beat tries again

    async def release(self) -> None:
        """Stop beating and give the claim back (to its end, even when cancelled meanwhile)."""
        if self._beat is not None:
            self._beat.cancel()
        if self.claims is None or self.token is None:
            return
        token, self.token = self.token, None
        try:
            await until_done(asyncio.to_thread(self.claims.release, token))
        except StoreError:
            pass  # left behind, the row names this live process and a token it no longer holds: taken over
