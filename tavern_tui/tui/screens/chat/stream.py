"""Provides `ReplyStream`, the running step as the transcript shows it, and `step_outcome`.

`ReplyStream` is the one place that holds a step's state while it runs (what the step is, whether
it got as far as its start, the messages shown before it, the box its reply streams into, the
settled text, the line a send started with, whether an impersonation fills the composer) and
turns the step's updates into transcript changes: the person's lines, a box to stream into, text
and reasoning appended, a reply that called tools and a tool's line, the next step's box, and at
the end the stored message found and its box settled (or, for an impersonation that fills the
composer, taken out).

It does no I/O and calls no service: the chat screen (`reply.ReplyControl`) runs the generation
worker, hands it the worker's Messages with any stored event already made a `MessageView`, and
keeps every service call and what the outcome says. The narrow interface to the chat: the
`Transcript` (`boxes`, `add`) and `reply_box` (`GroupControl.reply_box`: the box a reply streams into, under
the member whose turn it is), both given when it is made.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from textual.worker import WorkerState

from tavern_tui.engine.step import InboxEmpty, StepBusy
from tavern_tui.errors import ProviderError, TavernError
from tavern_tui.tui.messages import ReplyStarted
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.tui.widgets.transcript import Transcript
from tavern_tui.views import MessageView

Outcome = Literal["elsewhere", "refused", "failed", "stopped", "settled"]
"""How a step ended (`step_outcome`)."""

ReplyBox = Callable[[str, MessageView | None], MessageBox]
"""`reply_box(prefill, like)`: a box for a reply to stream into (`GroupControl.reply_box`)."""


def step_outcome(state: WorkerState, error: BaseException | None, started: bool) -> Outcome:
    """How the step's worker ended, in `state` with `error`, having `started` (shown its start):
    "elsewhere" (refused before it began because another window or command holds the step or
    took the queued lines), "refused" (not applicable here: continue without a reply, a line that
    cannot fit), "failed", "stopped" (Esc) or "settled"."""
    refused = (state == WorkerState.ERROR and not started
               and isinstance(error, TavernError) and not isinstance(error, ProviderError))
    if refused:
        return "elsewhere" if isinstance(error, (StepBusy, InboxEmpty)) else "refused"
    if state == WorkerState.ERROR:
        return "failed"
    return "stopped" if state == WorkerState.CANCELLED else "settled"


class ReplyStream:
    """The step the chat runs, as its transcript shows it (one step at a time; `begin` starts the
    next one afresh).

    State, read by the chat: `generation` (what streams: "send", "reply", "generate",
    "regenerate", "continue", "impersonate", "speak"), `started` (the step got as far as
    `ReplyStarted`), `before` (the refs shown when it began, and those settled since), `box`
    (the box streaming now, None between steps), `settled_text`, `sent_text` (the person's line a
    send started with, given back when the send is refused) and `into_composer`.
    """

    def __init__(self, transcript: Transcript, reply_box: ReplyBox) -> None:
        self.transcript = transcript
        self.reply_box = reply_box
        self.box: MessageBox | None = None
        """The box the reply streams into; None between steps and once it settled."""
        self.generation = "send"
        """What the step generates, as `ChatScreen._start` named it."""
        self.started = False
        """The running step got as far as `ReplyStarted` (its input is stored)."""
        self.before: set[tuple[int, int]] = set()
        """The refs shown when the step began, and those of the boxes it settled since."""
        self.into_composer = False
        """The running step is an impersonation whose line goes into the composer."""
        self.settled_text = ""
        """The text of the step's settled reply (`ReplySettled`)."""
        self.sent_text = ""
        """The person's line a send started with (given back when the send is refused)."""
        self.early: MessageBox | None = None
        """The person's line shown before its step began (an opening draft's first line, shown as
        the chat opens, as the draft showed it): `show_lines` takes it instead of mounting it
        again; a step refused before it began leaves it to the next `Transcript.sync`, which
        shows what is stored."""

    def begin(self, generation: str, text: str = "", *, into_composer: bool = False) -> None:
        """A new step (`generation`, on the person's line `text`) starts: forget the last one and
        note what the transcript shows now."""
        self.box = None
        self.generation = generation
        self.started = False
        self.settled_text = ""
        self.sent_text = text
        self.into_composer = into_composer and generation == "impersonate"
        self.before = {box.view.ref for box in self.transcript.boxes if box.view is not None}

    @property
    def fills_composer(self) -> bool:
        """The step is an impersonation whose line goes into the composer, not the chat."""
        return self.generation == "impersonate" and self.into_composer

    # -- while it streams ---------------------------------------------------------------------

    async def show_early(self, text: str, user_name: str) -> None:
        """Show the person's line `text` now, before its step begins (see `early`)."""
        self.early = await self.transcript.add(MessageBox(user_name, text, classes="-user"))

    async def show_lines(self, message: ReplyStarted, user_name: str) -> None:
        """The step started: show the person's line (a send) or the claimed batch's lines."""
        self.started = True
        early, self.early = self.early, None
        for user_text in message.user_texts or ((message.user_text,) if message.user_text is not None else ()):
            if early is not None and early.is_mounted and early.text == user_text:
                early = None  # shown already
                continue
            await self.transcript.add(MessageBox(user_name, user_text, classes="-user"))

    async def open_box(self, generation: str, user_name: str) -> None:
        """Mount the box the reply streams into. A regenerated reply replaces the last box, a
        continued one too but streams after its text (a continued greeting becomes a reply); an
        impersonation streams into a box of the person's."""
        prefill = ""
        boxes = self.transcript.boxes
        last = boxes[-1].view if boxes else None
        if last is not None and last.role == "assistant" and (
                generation == "continue" or (generation == "regenerate" and last.source != "opening")):
            prefill = boxes[-1].text if generation == "continue" else ""
            await boxes[-1].remove()
        if generation == "impersonate":
            mark = "writing your line… (it goes into the composer)" if self.into_composer else "writing…"
            box = MessageBox(user_name, mark=mark, classes="-user -streaming")
        else:
            box = self.reply_box(prefill, last if generation in ("regenerate", "continue") else None)
        self.box = await self.transcript.add(box)

    async def append_text(self, fragment: str) -> None:
        """Append reply text (MarkdownStream batches it)."""
        if self.box is not None:
            await self.box.append_text(fragment)

    async def append_reasoning(self, fragment: str) -> None:
        """Append reasoning into the reply's collapsed reasoning section."""
        if self.box is not None:
            await self.box.append_reasoning(fragment)

    async def settle(self, view: MessageView | None) -> None:
        """Settle the streaming box now as the stored `view` (a reply that called tools, a group
        member's reply, a reply in a chat that shows messages as stored); the step's end then
        leaves it be. With `view` None the box is only let go."""
        if self.box is not None and view is not None:
            await self.box.settle(view)
            self.before.add(view.ref)
        self.box = None

    async def add_tool_line(self, view: MessageView) -> None:
        """A tool call's stored result: one compact line (expandable to its arguments and result)."""
        self.before.add(view.ref)
        await self.transcript.add(MessageBox.from_view(view))

    async def next_step(self) -> None:
        """The turn goes on after its tool results: a new box streams its next reply."""
        self.box = await self.transcript.add(self.reply_box("", None))

    def settled(self, text: str) -> None:
        """The step's reply is stored with `text`."""
        self.settled_text = text

    # -- the end of the step ------------------------------------------------------------------

    def stored(self, messages: list[MessageView]) -> MessageView | None:
        """What the step stored, among `messages` as re-read after it: the last message, when it
        has the streamed role, is not the greeting and was not shown before the step."""
        role = "user" if self.generation == "impersonate" else "assistant"
        if messages and messages[-1].role == role and messages[-1].source != "opening" \
                and messages[-1].ref not in self.before:
            return messages[-1]
        return None

    async def end(self, stored: MessageView | None, mark: str | None) -> None:
        """The step ended: settle the box still streaming as `stored` (None: nothing stored; it
        stays marked partial), with `mark` over the stored one's."""
        if self.box is not None:
            await self.box.settle(stored, mark)
        self.box = None

    async def take_line(self, settled: bool, stored: MessageView | None) -> str:
        """An impersonation for the composer ended: take its box out of the chat and return the
        line for the composer: the settled text, or (stopped or failed) the partial line stored."""
        text = self.settled_text if settled else (stored.content if stored else "")
        if self.box is not None:
            await self.box.stop_streams()
            await self.box.remove()
        self.box = None
        return text
