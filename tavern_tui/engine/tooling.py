"""Provides what a turn with tool calls needs from the engine's side: the `ToolRunner` protocol
the tools package implements, the `tool/result` event, and the turn's tool transaction.

Rules: seed 000 §1 ("tool-call → tool-role tool/result → perhaps the next step"; "Tool results
carry role `tool`, a top-level `toolCallId`, and direct content; they are not user messages
wrapping a `tool-result` content block") and §3 (`request/header` records the tools offered).
The engine knows no tool: it asks the runner what to offer and to run each call.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tavern_tui.engine.events import TOOL_CALL_ID_KEY, TOOL_CALLS_KEY, Event, EventKind, NewEvent
from tavern_tui.engine.log import SurfaceMessage
from tavern_tui.engine.stream import ToolCall

TOOL_RESULT_SOURCE = "tool"
"""`source` of a `tool/result` the engine appends after running a call."""


RESULT_STATUSES = ("ok", "error", "refused", "timeout", "unavailable", "limit", "cancelled")
"""How a call ended: ran (`ok`), ran and failed or had bad arguments (`error`), the guard refused
it (`refused`), it took too long (`timeout`), its server is gone (`unavailable`), the turn hit
its step limit (`limit`), the turn was cancelled before it ran (`cancelled`)."""


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """What running one call gave.

    Attributes:
        content: the text the model reads as the tool result (already size-bounded).
        status: one of `RESULT_STATUSES`.
        detail: facts kept with the result for the transcript and trace (`summary`: the
            one-line form; `reason`: why it was refused or failed; `risk`; …). Never secrets.
    """

    content: str
    status: str = "ok"
    detail: dict[str, Any] = field(default_factory=dict)


class ToolRunner(Protocol):
    """The tools a step offers and how a call runs (`tavern_tui.tools.Toolbox` implements it)."""

    async def offered(self) -> tuple[dict[str, Any], ...]:
        """The OpenAI `tools` array for the next request (may change between steps: a crashed
        server's tools drop out; the first call may start servers)."""
        ...

    async def run(self, call: ToolCall) -> ToolOutcome:
        """Run one call through the guard. Never raises for a tool's own failure: an error,
        refusal or timeout is an outcome the model reads."""
        ...


def tools_digest(tools: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`request/header.tools`: the names offered, in order, and the SHA-256 of their schemas as
    sent (the array's JSON with sorted keys, compact, UTF-8)."""
    names = [str((t.get("function") or {}).get("name", "")) for t in tools]
    text = json.dumps(list(tools), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return {"names": names, "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def with_ids(calls: Sequence[ToolCall], step_ref: tuple[int, int]) -> tuple[ToolCall, ...]:
    """The calls with an id each: a server that sent none gets a stand-in unique in the log
    (`call_<session>_<seq>_<index>`), so every result pairs with its call."""
    return tuple(c if c.id else ToolCall(f"call_{step_ref[0]}_{step_ref[1]}_{c.index}", c.name, c.arguments, c.index)
                 for c in calls)


def result_event(call: ToolCall, outcome: ToolOutcome) -> NewEvent:
    """The `tool/result` for `call`: role tool, top-level `toolCallId`, the content direct."""
    body: dict[str, Any] = {"content": outcome.content, TOOL_CALL_ID_KEY: call.id, "name": call.name,
                            "arguments": call.arguments, "status": outcome.status}
    if outcome.detail:
        body["detail"] = dict(outcome.detail)
    return NewEvent(EventKind.TOOL_RESULT, "tool", body, None, TOOL_RESULT_SOURCE)


def result_summary(event_ref: tuple[int, int], body: dict[str, Any]) -> dict[str, Any]:
    """One stored result as the next step's trace names it (no content: references only)."""
    detail = body.get("detail") or {}
    summary = {"ref": list(event_ref), "toolCallId": body.get(TOOL_CALL_ID_KEY), "name": body.get("name"),
               "status": body.get("status")}
    if isinstance(detail, dict) and detail.get("reason"):
        summary["reason"] = detail["reason"]
    return summary


def in_transaction(message: SurfaceMessage) -> bool:
    """A tool result, or an assistant message that made tool calls."""
    return message.role == "tool" or (message.role == "assistant" and bool(message.body.get(TOOL_CALLS_KEY)))


def turn_transaction(history: Sequence[SurfaceMessage], since: tuple[int, int]) -> list[SurfaceMessage]:
    """The running turn's tool transaction: its calls and results, stored after `since` (the
    turn's first trace record), in order."""
    return [m for m in history if in_transaction(m) and m.ref[0] == since[0] and m.ref[1] > since[1]]


def pending_calls(calls: Sequence[ToolCall], done: set[str]) -> list[ToolCall]:
    """The calls that have no result yet."""
    return [c for c in calls if c.id not in done]


INTERRUPTED_CALL = "the app was closed before this call ran"
"""The result a call gets when a crash left it unanswered (`unanswered_calls`)."""


def unanswered_calls(surface: Sequence[Event]) -> list[ToolCall]:
    """The calls of the newest reply that asked for tools which have no `tool/result` yet: a
    crash between a reply and its results leaves them so, and a request carrying a call without
    its result is refused by OpenAI-style servers. Empty when every call is answered."""
    calls: list[ToolCall] = []
    answered: set[str] = set()
    for event in reversed(surface):
        if event.kind == EventKind.TOOL_RESULT:
            answered.add(str(event.body.get(TOOL_CALL_ID_KEY)))
        elif event.kind == EventKind.ASSISTANT_MESSAGE:
            wire = event.body.get(TOOL_CALLS_KEY)
            if isinstance(wire, list):
                for index, entry in enumerate(wire):
                    function = entry.get("function") if isinstance(entry, dict) else None
                    if isinstance(function, dict) and str(entry.get("id")) not in answered:
                        calls.append(ToolCall(str(entry.get("id")), str(function.get("name", "")),
                                              str(function.get("arguments", "")), index))
            break
    return calls
