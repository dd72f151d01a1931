"""Provides the admit stage of a step's opening (system section, runtime context, the claimed
input), the context a step would admit (`context_events`) and the opening reference
(`admit_opening`).

Rules: DESIGN.md "One step" (system sections → `system/message`, accepted input and runtime
context → `user/message`, once per step) and seed 000 §2.2 (context-snapshot reuse), §3.
"""

from __future__ import annotations

from typing import Any

from tavern_tui.engine.events import Event, EventKind, NewEvent, Origin
from tavern_tui.engine.inbox import CLAIM_KEY
from tavern_tui.engine.log import SYSTEM_PROMPT_SOURCE, AsyncSessionLog, SessionLog, SurfaceMessage
from tavern_tui.engine.step.claim import Claimed
from tavern_tui.engine.step.types import CONTEXT_SOURCE, CONTEXT_SOURCES, OPENING_SOURCE, Assembly, Generation


def admit_opening(log: SessionLog, session_id: int, text: str, meta: dict[str, Any] | None = None) -> Event:
    """Append the opening reference (a greeting): role assistant, origin engine, never an agent reply
    (seed 000 §3: "Greeting is an opening reference, never a fabricated assistant reply")."""
    body = {"content": text, **(meta or {})}
    opening = NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", body, Origin.ENGINE, OPENING_SOURCE)
    return log.append(session_id, [opening])[0]


def admitted_context(history: list[SurfaceMessage]) -> dict[str, str]:
    """The durable context snapshot: each context identifier's newest admitted text on the surface
    (messages of source "runtime-context", or "context" as stored before)."""
    newest: dict[str, str] = {}
    for message in history:
        if message.source in CONTEXT_SOURCES and isinstance(message.body.get("context"), str):
            newest[message.body["context"]] = message.content
    return newest


def context_events(history: list[SurfaceMessage], context: tuple[tuple[str, str], ...]) -> list[NewEvent]:
    """Context messages to admit: those whose identifier's newest admitted text differs."""
    newest = admitted_context(history)
    return [NewEvent(EventKind.USER_MESSAGE, "user", {"content": text, "context": ident}, Origin.ENGINE,
                     CONTEXT_SOURCE)
            for ident, text in context if newest.get(ident) != text]


async def admit(log: AsyncSessionLog, session_id: int, assembly: Assembly, claimed: Claimed,
                generation: Generation, context: tuple[tuple[str, str], ...] | None = None
                ) -> tuple[tuple[Event, ...], list[Event]]:
    """Append, in one batch: the system section when it differs from the effective one, the
    context not admitted yet (`context`, the refreshed snapshot; None: the assembly's proposed
    one), and one `user/message` per claimed item (as the assembler expanded it, `Assembly.input`;
    its `claim` key resolves the claim, engine.inbox).

    Returns:
        (the stored `user/message` of each claimed item, in order (empty for none); every event
        stored, in order).
    """
    history, batch, claim_event = claimed.history, claimed.batch, claimed.event
    admitted: list[NewEvent] = []
    current_system = history[0].content if history and history[0].source == SYSTEM_PROMPT_SOURCE else None
    if assembly.system and assembly.system != current_system:
        admitted.append(NewEvent(EventKind.SYSTEM_MESSAGE, "system", {"content": assembly.system},
                                 source=SYSTEM_PROMPT_SOURCE))
    admitted += context_events(history, assembly.context if context is None else context)
    contents = (list(assembly.input) if assembly.input is not None and len(assembly.input) == len(batch)
                else [item.content for item in batch])
    admitted += [NewEvent(EventKind.USER_MESSAGE, "user", {"content": content, CLAIM_KEY: claim_event.seq,
                                                           **generation.speaker_fields()},
                          item.origin) for item, content in zip(batch, contents) if claim_event is not None]
    stored = await log.append(session_id, admitted) if admitted else []
    return (tuple(stored[len(stored) - len(batch):]) if batch else ()), stored
