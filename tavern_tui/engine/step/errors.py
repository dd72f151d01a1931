"""Provides the errors a step raises: `StepBusy`, `InboxEmpty`, `CallNotPrepared`, `StepFailed`.

Rules: DESIGN.md "One step" (a refused step writes nothing; a failed one keeps what arrived).
"""

from __future__ import annotations

from tavern_tui.engine.events import Event
from tavern_tui.errors import ProviderError, TavernError


class StepBusy(TavernError):
    """Another process is streaming a reply in this session right now."""


class InboxEmpty(TavernError):
    """A step asked to claim the inbox found nothing pending."""


class CallNotPrepared(TavernError):
    """The prepare stage refused the call config before anything was admitted (seed 000 §1
    `prepareCall()`): no `system/message` or `user/message` was written, and the claimed input is
    back in the inbox (`kept`). The message is the provider's, naming what to fix.

    Attributes:
        problem: the provider's message (`CallConfigError`).
        kept: True when claimed input was put back in the inbox (False: the step claimed none).
    """

    def __init__(self, problem: str, kept: bool) -> None:
        super().__init__(problem)
        self.problem = problem
        self.kept = kept


class StepFailed(ProviderError):
    """The provider failed mid-step; `attempt` is the stored `assistant/attempt` (or None),
    `cause` the classified provider error."""

    def __init__(self, cause: ProviderError, attempt: Event | None) -> None:
        super().__init__(str(cause), status=cause.status, param=cause.param)
        self.category = cause.category
        self.cause = cause
        self.attempt = attempt
