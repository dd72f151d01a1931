"""Provides what a step that fails or is refused tells the person: `kept_after_failure` (a step
that cannot be prepared keeps the typed text queued and says so), `not_sent` (the message of a
step refused before anything was admitted) and `with_omit_step` (a provider failure naming the
`tavern omit-param` command with this playthrough's number).

Separate from `runner` because none of it runs a step: these turn a failure into the error the
person reads (and, for `kept_after_failure`, keep their text), so the step code in `StepRunner`
reads as the step and the wording lives in one place.

Rules: the person's typed text is never lost when a step cannot be prepared (it waits in the
inbox, durable, for the next step or `tavern inbox`).
"""

from __future__ import annotations

import logging

from tavern_tui.engine.step import StepFailed
from tavern_tui.errors import TavernError
from tavern_tui.service.inbox import InboxService

# The runner's logger: these records are the step's, and keep the name they were always logged under.
logger = logging.getLogger("tavern_tui.service.steps.runner")


def kept_after_failure(inbox: InboxService | None, playthrough_id: int, text: str | None,
                       exc: BaseException | str) -> TavernError:
    """The error for a step that cannot be prepared (a card, book or template that broke the
    build, or `exc` as text: an endpoint that cannot be reached as configured), after the
    person's `text` is queued in `inbox`, durable, so nothing typed is lost: the next step
    (or `tavern inbox`) sends it. Runs SQL: called in a worker thread."""
    if isinstance(exc, str):
        reason = exc
    else:
        logger.error("preparing a step of playthrough %s failed", playthrough_id, exc_info=exc)
        reason = f"{type(exc).__name__}: {str(exc)[:200]}".rstrip(": ")
    if text is None or inbox is None:
        return TavernError(not_sent(reason, kept=False))
    try:  # already checked by `send`: the by-value key check still runs in `add`
        inbox.add(playthrough_id, text, allow_secrets=True)
    except Exception:  # noqa: BLE001 - the store itself failed: say the text was not kept
        logger.exception("queueing the unsent message of playthrough %s failed", playthrough_id)
        return TavernError(f"the request could not be built ({reason}); nothing was sent or kept")
    return TavernError(not_sent(reason, kept=True))


def not_sent(reason: str, *, kept: bool) -> str:
    """The message of a step refused before anything was admitted: `reason` (what to fix), that
    nothing was sent, and, when `kept`, where the person's input waits."""
    if not kept:
        return f"the request could not be built ({reason}); nothing was sent"
    return (f"the request could not be built ({reason}); nothing was sent, and your message is kept in the "
            "queue (`tavern inbox`, or above the message box): it goes with the next step")


def with_omit_step(exc: StepFailed, playthrough_id: int) -> StepFailed:
    """A step failed on a call parameter the fallback never drops (the provider's message names
    it and `tavern omit-param PLAYTHROUGH NAME`): the same failure with this playthrough's number
    in the command, so the one step past it can be copied as it is. Anything else unchanged."""
    cause = exc.cause
    if not (cause.param and "tavern omit-param PLAYTHROUGH" in str(cause)):
        return exc
    message = str(cause).replace("tavern omit-param PLAYTHROUGH", f"tavern omit-param {playthrough_id}")
    named = type(cause)(message, status=cause.status, param=cause.param)
    return StepFailed(named, exc.attempt)
