"""Provides a step's place in a turn with tools (`TurnStep`) and what that place adds to the
step's header, trace and request.

Rules: seed 000 §1 (tool-call → tool/result → perhaps the next step) and §2 (native history,
input and tool transactions keep their protected order).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tavern_tui.engine.events import Event
from tavern_tui.engine.inbox import PendingItem
from tavern_tui.engine.log import SurfaceMessage
from tavern_tui.engine.tooling import tools_digest
from tavern_tui.engine.trace import SentMessage, message_hash

TOOL_GENERATIONS = ("normal", "regenerate", "swipe")
"""Generation types whose turn offers tools (a continue or an impersonation never does)."""

Steers = tuple[Event | None, list[PendingItem]]
"""Steers claimed at a step boundary: (the claim event, the claimed items)."""


@dataclass(frozen=True, slots=True)
class TurnStep:
    """One step's place in a turn with tools.

    Attributes:
        step: 1 for the turn's first request, 2 after the first tool results, …
        tools: the OpenAI `tools` array this step offers.
        first, previous: refs of the turn's first and the previous step's trace record.
        results: the previous boundary's tool results, as the trace names them.
        steers: the steers claimed at this boundary (claim event, items), None for none.
    """

    step: int
    tools: tuple[dict[str, Any], ...]
    first: tuple[int, int] | None = None
    previous: tuple[int, int] | None = None
    results: tuple[dict[str, Any], ...] = ()
    steers: Steers | None = None


def turn_header(turn: TurnStep) -> dict[str, Any]:
    """`request/header` fields of a step in a tool turn: the tools offered (names, schema hash,
    and the array itself, `offered`, so an export or a replay sends it exactly; it holds no
    secret: `Toolbox.offered` scrubs configured ones) and the step number."""
    return {"tools": {**tools_digest(turn.tools), "offered": [dict(t) for t in turn.tools]}, "step": turn.step}


def turn_trace(turn: TurnStep) -> dict[str, Any]:
    """Trace fields linking a turn's steps: step number, the first and previous records, the
    tools offered and the results (refused ones named, with why) this request answers."""
    link = {"step": turn.step, "first": list(turn.first) if turn.first else None,
            "previous": list(turn.previous) if turn.previous else None}
    return {"turn": link, "tools": tools_digest(turn.tools), "tool_results": [dict(r) for r in turn.results]}


def with_transaction(messages: list[dict[str, Any]], sent: list[SentMessage],
                     transaction: list[SurfaceMessage]) -> tuple[list[dict[str, Any]], list[SentMessage]]:
    """A projected request with the turn's tool calls and results put back as they are stored
    (seed 000 §2: "Native history, input and tool transactions retain their protected order"):
    before the steers this step claimed, else at the end."""
    at = next((i for i, m in enumerate(sent) if m.source == "input"), len(messages))
    wire = [m.to_request() for m in transaction]
    extra = [SentMessage(m.role, "history", m.ref, None, message_hash(w)) for m, w in zip(transaction, wire)]
    return messages[:at] + wire + messages[at:], sent[:at] + extra + sent[at:]
