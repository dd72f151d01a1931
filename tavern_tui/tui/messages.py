"""Provides the app-level Messages: what screens and workers tell each other (messages up)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from tavern_tui.views import ImportResult

if TYPE_CHECKING:
    from tavern_tui.lore.result import ActivationResult


@dataclass
class PlaythroughChosen(Message):
    """The person chose a playthrough to play; the app opens the chat screen on it."""

    playthrough_id: int
    typed: str = ""
    """What the person typed while it was being opened (it goes into the composer)."""
    send: str = ""
    """A line the chat sends as soon as it is open (an opening draft's first line, issue 20)."""
    focus: tuple[tuple[int, int], ...] = ()
    """A search hit's message: the cursor goes to the first of these (session, seq) the chat shows."""


@dataclass
class ImportFinished(Message):
    """An import worker finished; one result per file, failures carry their error."""

    results: list[ImportResult]


@dataclass
class ReplyStarted(Message):
    """A step's input is stored and its output is about to stream.

    Attributes:
        user_text: the person's message a send stored; None for a step without new input.
        generation: what streams: "send", "reply" (to the person's last line, no new text),
            "regenerate", "continue" or "impersonate".
    """

    user_text: str | None
    generation: str = "send"
    user_texts: tuple[str, ...] = ()
    """Every message of the claimed batch, in order (a step that claimed queued lines)."""


@dataclass
class ReplyDelta(Message):
    """A piece of the reply text arrived."""

    text: str


@dataclass
class ReplyReasoning(Message):
    """A piece of the model's reasoning arrived (shown apart from the reply)."""

    text: str


@dataclass
class ReplySettled(Message):
    """The reply is complete and stored as `assistant/message` (an impersonation: `user/message`)."""

    total_tokens: int | None = None
    content: str = ""
    """The settled text (an impersonation for the composer is not on the surface to re-read)."""
    event: object = None
    """The stored reply event (a group member's reply is settled in its box with it)."""


@dataclass
class RoundUpdate(Message):
    """A group round's own update (`MemberTurn`: who speaks next; `LineQueued`: nobody replies),
    posted by the chat's generation worker between the steps' updates."""

    update: object


@dataclass
class WorldBooksRequested(Message):
    """The person asked for the world-book pane; from a chat it carries the playthrough."""

    playthrough_id: int | None = None


@dataclass
class WorldInfoTested(Message):
    """A tester run finished: the activation result, or the plain error that stopped it."""

    run: int
    text: str
    result: ActivationResult | None = None
    error: str | None = None


@dataclass
class ReplyCalledTools(Message):
    """A step of the turn settled as a reply that calls tools (`event`: the stored reply); its
    calls run next (issue 19)."""

    event: object


@dataclass
class ToolRan(Message):
    """A tool call's `tool/result` is stored (`event`); the transcript shows its one line."""

    event: object


@dataclass
class ReplyNextStep(Message):
    """The turn's next step started after its tool results: a new reply streams."""


@dataclass
class TurnLimitHit(Message):
    """The turn reached its step limit (`message` names it)."""

    message: str


@dataclass
class DraftChosen(Message):
    """The person chose an opening draft (or made one); the app opens the draft screen on it."""

    draft_id: int
    typed: str = ""
    """What the person typed while it was being opened (it goes into the composer)."""
