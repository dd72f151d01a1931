"""Provides the settle stage of a step: the complete reply as `assistant/message` (or, for an
impersonation, `user/message`), or what arrived as `assistant/attempt` on a cancel, an error or
a cut-off stream; appended with retries while the database is busy.

Rules: DESIGN.md "One step" (settle `assistant/message`, or `assistant/attempt` with the partial
text on cancel or error; a crash or cancel mid-stream loses nothing already received).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tavern_tui.engine.events import TOOL_CALLS_KEY, Event, EventKind, NewEvent, Origin
from tavern_tui.engine.log import PLACEHOLDER_SOURCE, AsyncSessionLog
from tavern_tui.engine.step.errors import StepFailed
from tavern_tui.engine.step.types import IMPERSONATION_SOURCE, Generation
from tavern_tui.engine.step.updates import StepSettled
from tavern_tui.engine.stream import Provider
from tavern_tui.engine.tooling import with_ids
from tavern_tui.errors import NetworkError, StoreBusy

if TYPE_CHECKING:  # stream imports nothing of this module; the hint alone needs it
    from tavern_tui.engine.step.stream import Reply

SETTLE_TRIES = 12
"""How often a settlement is tried against a busy database (each try waits out the store's
busy timeout, 5 s on SQLite), before the step gives up with `StoreBusy`."""


async def settling(log: AsyncSessionLog, session_id: int, events: list[NewEvent]) -> list[Event]:
    """Append a step's settlement, trying again while the database is busy (a lock never costs
    the text that arrived; it waits in memory until it lands).

    Raises:
        StoreBusy: still busy after `SETTLE_TRIES` tries.
    """
    for attempt in range(SETTLE_TRIES):
        try:
            return await log.append(session_id, events)
        except StoreBusy:
            if attempt == SETTLE_TRIES - 1:
                raise
            await asyncio.sleep(0.2)
    raise AssertionError("unreachable")


def attempt_event(text: str, reasoning: str, extra: dict[str, Any], origin: Origin | None = None,
                  source: str | None = None, role: str = "assistant") -> NewEvent:
    """The `assistant/attempt` that keeps a reply cut short (cancel, error, crash)."""
    body: dict[str, Any] = {"content": text, **extra}
    if reasoning:
        body["reasoning"] = reasoning
    return NewEvent(EventKind.ASSISTANT_ATTEMPT, role, body, origin, source)


@dataclass(frozen=True, slots=True)
class Author:
    """Who a step's reply is stored as: role, origin, source, and the body fields naming the
    character who speaks (`Generation.author_fields`; none for the playthrough's own)."""

    role: str = "assistant"
    origin: Origin | None = None
    source: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, provider: Provider, generation: Generation) -> Author:
        """A placeholder provider's text is the engine's (source "placeholder"); an impersonation
        is a user line the model wrote (origin agent, source "impersonation"); else the model's
        reply."""
        placeholder = provider.placeholder
        origin, source = (Origin.ENGINE, PLACEHOLDER_SOURCE) if placeholder else (None, None)
        impersonate = generation.type == "impersonate"
        if impersonate and not placeholder:
            origin, source = Origin.AGENT, IMPERSONATION_SOURCE
        fields = {} if impersonate else generation.author_fields()
        return cls("user" if impersonate else "assistant", origin, source, fields)

    def attempt(self, text: str, reasoning: str, extra: dict[str, Any]) -> NewEvent:
        """`attempt_event` as this author."""
        return attempt_event(text, reasoning, {**self.fields, **extra}, self.origin, self.source, self.role)


async def settle_attempt(reply: Reply, author: Author, extra: dict[str, Any]) -> Event:
    """Store what arrived as an attempt (cancel or provider error), retries recorded first when
    the stream never started."""
    if not reply.retries_recorded:
        await reply.record_retries()
    reply.finish()
    stored = await settling(reply.log, reply.session_id,
                            [author.attempt(reply.text, reply.thought, {**extra, **reply.context})])
    return stored[0]


async def settle_early_cancel(reply: Reply, author: Author) -> None:
    """A step cancelled before its request went out: an empty cancelled attempt, without the
    provider's attempts (they are still its previous request's)."""
    reply.timing["last_byte"] = reply.options.now().isoformat()
    text = reply.options.generation.settle_text("")
    await reply.log.append(reply.session_id, [author.attempt(text, "", {"cancelled": True, **reply.context})])


async def settle_cut_off(reply: Reply, author: Author) -> StepFailed:
    """Store what arrived of a stream that closed mid-reply; returns the error to raise."""
    cut = NetworkError("the connection closed before the reply finished (no finish_reason and no [DONE]); "
                       "the text that arrived is kept")
    error = {"category": cut.category, "message": str(cut), "status": None}
    stored = await settling(reply.log, reply.session_id,
                            [author.attempt(reply.text, reply.thought, {"error": error, **reply.context})])
    return StepFailed(cut, stored[0])


async def settle_reply(reply: Reply, author: Author, provider: Provider, model: str, offers_tools: bool) -> StepSettled:
    """Store the complete reply with its usage, reasoning and context; its tool calls (given ids
    from the step's trace) only when the step offered tools, else a stray call is not run."""
    generation, impersonate = reply.options.generation, reply.options.generation.type == "impersonate"
    finished = reply.finished
    body: dict[str, Any] = {"content": reply.text, "provider": provider.name, "model": model,
                            "finish_reason": finished.finish_reason if finished else None, **author.fields,
                            **reply.context}
    if reply.reasoning:
        body["reasoning"] = reply.thought
    usage = reply.usage
    if usage is not None:
        body["usage"] = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                         "total_tokens": usage.total_tokens}
    calls = reply.calls
    if calls and offers_tools and not impersonate:
        calls = with_ids(calls, reply.trace_event.ref)
        body[TOOL_CALLS_KEY] = [c.to_wire() for c in calls]  # sent back exactly so in the next step
    else:
        calls = ()  # no tools were offered: a stray call is not run (its text, if any, stays)
    kind = EventKind.USER_MESSAGE if impersonate else EventKind.ASSISTANT_MESSAGE
    if impersonate:
        body.update(generation.speaker_fields())
    event = NewEvent(kind, author.role, body, author.origin, author.source)
    settled = (await settling(reply.log, reply.session_id, [event]))[0]
    return StepSettled(settled, usage, calls)
