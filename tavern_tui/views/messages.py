"""Provides the chat's view types: one message of a playthrough's surface (`MessageView`), the swipe
counter of its last message (`SwipeView`), and one pending inbox item (`InboxItemView`).

Rules: the `to_json` forms are the `--json` output of `tavern show` and `tavern inbox`; the swipe
counter follows SillyTavern (format-digest §d: only the last message swipes, the greeting swipes
among the card's greetings). Plain values: no database objects leave the service (README
"Development": the layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class MessageView:
    """One message of a playthrough's surface, ready to display.

    Attributes:
        ref: (session_id, seq) of the event holding it.
        origin: the effective origin ("customer", "agent", "engine", "operator").
        natural: True when the origin is the role's natural producer (not marked in the UI).
        partial: a reply cut off by cancel or error (`assistant/attempt`).
        error: the provider error that cut it off, if any.
        speaker: the display name (character, person, or "System").
        summary: for a summary node, `{"covers", "first", "last", "from", "to", "targets"}`
            (issue 16: what it replaced); None otherwise.
        tool_calls: an assistant message's tool calls, as sent (`[{"id", "type", "function":
            {"name", "arguments"}}]`; issue 19).
        tool_result: a `tool/result`'s facts: `{"toolCallId", "name", "arguments", "status",
            "summary", "reason"}`; None for other messages.
        display: what the transcript shows when regex scripts change it (issue 18: `markdownOnly`
            scripts, status bars as readable text); None = `content` as it is. `content` stays
            the raw text (edits and exports use it).
        character_id: the character who wrote a group chat's reply (None: the playthrough's own).
        hidden: shown in the chat but never sent to the model (SillyTavern's `is_system` line).
    """

    ref: tuple[int, int]
    role: str
    origin: str
    natural: bool
    kind: str
    source: str | None
    content: str
    speaker: str
    created_at: datetime
    reasoning: str = ""
    partial: bool = False
    error: str | None = None
    error_category: str | None = None
    summary: dict[str, Any] | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_result: dict[str, Any] | None = None

    @property
    def tool_line(self) -> str:
        """A tool result's one-line form, name then summary: `roll_dice 2d6+1 → [3, 5] + 1 = 9`
        ("" for other messages)."""
        if self.tool_result is None:
            return ""
        result = self.tool_result
        summary = result.get("summary") or ": ".join(str(v) for v in (result.get("status"), result.get("reason")) if v)
        return f"{self.tool_result.get('name', '')} {summary}".strip()

    display: str | None = None
    character_id: int | None = None
    hidden: bool = False

    @property
    def shown(self) -> str:
        """The text the transcript shows (`display`, else `content`)."""
        return self.display if self.display is not None else self.content

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern show --json` (with `tool_calls` and `tool_result` when set)."""
        row = {"session_id": self.ref[0], "seq": self.ref[1], "role": self.role, "origin": self.origin,
               "kind": self.kind, "source": self.source, "speaker": self.speaker, "content": self.content,
               "reasoning": self.reasoning, "partial": self.partial, "error": self.error,
               "error_category": self.error_category,
               "created_at": self.created_at.isoformat()}
        if self.character_id is not None:
            row["character_id"] = self.character_id
        if self.tool_calls:
            row["tool_calls"] = [dict(c) for c in self.tool_calls]
        if self.tool_result is not None:
            row["tool_result"] = dict(self.tool_result)
        return row


@dataclass(frozen=True, slots=True)
class SwipeView:
    """The swipe counter of the chat's last message.

    Attributes:
        ref: the message swipes act on (None when the chat is empty).
        position: (n, m) shown as `n/m`; for a greeting, m counts the card's greetings.
        greeting: the last message is the opening greeting (swipes move among greetings).
        can_generate: swiping right past the last sibling generates a new reply.
    """

    ref: tuple[int, int] | None
    position: tuple[int, int]
    greeting: bool = False
    can_generate: bool = False

    @property
    def label(self) -> str:
        """"n/m", or "" when there is nothing to swipe."""
        return f"{self.position[0]}/{self.position[1]}" if self.ref is not None else ""


@dataclass(frozen=True, slots=True)
class InboxItemView:
    """One pending inbox item as the chat and `tavern inbox` show it (DESIGN.md "The inbox").

    Attributes:
        id: the item's stable id (kept across edits; `tavern inbox edit/cancel` take it).
        position: 1-based place in claim order (steers first).
        target: "next-turn" (queued) or "next-step" (a steer).
        origin: who wrote it ("customer" for the person).
    """

    id: str
    position: int
    target: str
    text: str
    queued_at: datetime
    origin: str = "customer"

    @property
    def steer(self) -> bool:
        """True for a next-step item."""
        return self.target == "next-step"

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern inbox --json`."""
        return {"id": self.id, "position": self.position, "target": self.target, "text": self.text,
                "queued_at": self.queued_at.isoformat(), "origin": self.origin}
