"""Provides `ReplyFlow`, the chat screen's side of the reply stream: a key or Enter starts one
step (`_start`) in the generation worker, which only maps the service's `StepUpdate`s to Messages
(`_generate`); the handlers here hand them to the screen's `ReplyStream` (`stream`), which holds
the step's state and shows it in the transcript, making a stored event a `MessageView` first;
when the worker ends, `_finished` reconciles the transcript with what the database holds and
says the outcome (`step_outcome`).

The worker stays on the screen, in the group `GENERATION`: Textual's exclusivity is per node, so
a step and a compaction (`CompactionControl`, same group, same screen) never run at once, and Esc
cancels the group (`ChatScreen.action_stop`). The Messages are handled on the screen's queue in
the order the worker posted them, before the worker's end (`Worker.StateChanged`) is.

Mixed into `ChatScreen` (before `TavernScreen`), as `MessageCursor` and `GroupChat` are; a
`MessagePump`, so its `@on` handler is collected, not a DOMNode, so the screen's CSS type chain
stays `TavernScreen`'s. The narrow interface to the chat: `tavern`, `playthrough_id`,
`playthrough`, `reply_stream` (the `ReplyStream`, made in `compose`), `status`, `prompt`,
`generating`, `call`, `settled`, `turn`, `settle_member`, `refresh_members`, `queued_updates`
(`GroupChat`), `_read_state`, `_show_state`, `reload`, `_watch_elsewhere`, `_plain`
(`ChatReading`), `queued` (`QueueControl`), `_give_back` and `_save_draft` (`ChatSending`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from textual import on, work
from textual.message_pump import MessagePump
from textual.worker import Worker, WorkerState

from tavern_tui.engine.step import StepSettled, StepStarted, StepUpdate, ToolResultStored, TurnLimitReached
from tavern_tui.engine.stream import ReasoningDelta, TextDelta
from tavern_tui.errors import ProviderError, TavernError
from tavern_tui.service.groups import LineQueued, MemberTurn
from tavern_tui.tui.messages import (
    ReplyCalledTools,
    ReplyDelta,
    ReplyNextStep,
    ReplyReasoning,
    ReplySettled,
    ReplyStarted,
    RoundUpdate,
    ToolRan,
    TurnLimitHit,
)
from tavern_tui.tui.modals.tool_ask import ToolAskScreen
from tavern_tui.tui.screens.chat.reading import ELSEWHERE, ChatState
from tavern_tui.tui.screens.chat.stream import step_outcome
from tavern_tui.tui.screens.state import refused_status, refused_whole
from tavern_tui.tui.screens.swipe_note import swipe_note
from tavern_tui.views import MessageView, SwipeView

GENERATION = "generation"
"""Worker group of the reply stream and the compaction (one at a time)."""

Updates = Callable[[], AsyncIterator[StepUpdate]]
"""Starts a step's stream: `tavern.steps.send(...)`, `regenerate`, `continue_reply` or `impersonate`."""


def describe_failure(error: BaseException | None) -> tuple[str, str]:
    """(category, plain message) of a failed step: "authentication", "Invalid API key"."""
    if isinstance(error, ProviderError):
        return error.category, str(error)
    if isinstance(error, TavernError):
        return "error", str(error)
    return "internal", f"{type(error).__name__}: {error}" if error else "unknown failure"


class ReplyFlow(MessagePump):
    """Mixed into the chat screen: one step at a time, streamed into the transcript."""

    # -- the keys that start a step ---------------------------------------------------------

    def action_swipe(self, direction: int) -> None:
        """Show the last message's previous (-1) or next (+1) variant; past the last reply,
        generate a new one (streamed like a send)."""
        timeline, pid = self.tavern.timeline, self.playthrough_id

        def swipe() -> tuple[SwipeView, SwipeView | None, ChatState | None]:
            # One worker: the swipe, then what the chat shows after it (one hop, one call in turn).
            before, after = timeline.swipe_state(pid), timeline.swipe(pid, direction)
            return before, after, (self._read_state() if after is not None else None)

        self.call(swipe, title="Cannot swipe", severity="warning",
                  then=lambda done: self._swiped(done[1], direction, done[0], done[2]))

    async def _swiped(self, state: SwipeView | None, direction: int = 0, before: SwipeView | None = None,
                      shown: ChatState | None = None) -> None:
        if state is None:
            if not self.generating:
                self._start("regenerate", lambda: self.tavern.steps.regenerate(self.playthrough_id))
            return
        if state == before:  # nothing moved: say why rather than nothing
            note = swipe_note(state, direction)
            if note:
                self.notify(note, title="Swipe", timeout=4)
        if shown is not None:
            await self._show_state(shown)
        else:
            self.reload()

    def action_delete_swipe(self) -> None:
        """Delete the shown swipe of the last reply (SillyTavern's "delete swipe"); the one
        before it is shown and the other swipes stay."""
        self.call(self.tavern.timeline.delete_swipe, self.playthrough_id, title="Cannot delete the swipe",
                  severity="warning", then=lambda _state: self.reload())

    def action_regenerate(self) -> None:
        """Generate a new variant of the last reply (the old one stays a swipe away)."""
        self._start("regenerate", lambda: self.tavern.steps.regenerate(self.playthrough_id))

    def action_continue(self) -> None:
        """Extend the last reply; the longer text becomes a new variant of it."""
        self._start("continue", lambda: self.tavern.steps.continue_reply(self.playthrough_id))

    def action_impersonate(self) -> None:
        """Have the model write the person's next line. As SillyTavern, it goes into the composer
        for the person to edit and send (after what is typed there already, never over it); with
        `[tui] impersonate_direct = true` it is posted at once as theirs, marked "written by the
        model for you" (Enter on the empty prompt then answers it)."""
        into = not self.tavern.settings.tui.impersonate_direct
        self._start("impersonate", lambda: self.tavern.steps.impersonate(self.playthrough_id, into_composer=into),
                    into_composer=into)

    # -- the step ---------------------------------------------------------------------------

    def _start(self, generation: str, updates: Updates, text: str = "", *, into_composer: bool = False) -> None:
        """Run one step (`generation` names it for the transcript; `text` is the person's line a
        send starts with; `into_composer`: an impersonation's line goes into the composer) in
        the generation worker."""
        self.turn = None
        self.reply_stream.begin(generation, text, into_composer=into_composer)
        self.generating = True
        self.status.detail = ""
        self.status.swipe = ""  # the counter of the reply being replaced; the settled one sets it again
        self.status.state = "streaming"
        self._generate(generation, updates, text)

    @work(exclusive=True, group=GENERATION, exit_on_error=False, description="stream a reply")
    async def _generate(self, generation: str, updates: Updates, text: str = "") -> None:
        # Only posts Messages: cancellation (Esc) lands inside the service's step, which stores
        # the partial reply before re-raising; aclosing makes that deterministic if it lands here.
        await self.settled()  # a swipe still being written comes first
        steps = 0  # a turn with tools has several steps (issue 19)
        async with aclosing(updates()) as stream:
            async for update in stream:
                match update:
                    case MemberTurn() | LineQueued():  # a group round: the next member's steps follow
                        steps = 0
                        self.post_message(RoundUpdate(update))
                    case StepStarted(user=event, claimed=claimed) if steps:
                        steps += 1
                        if claimed:  # steers claimed at the step boundary: shown, then the reply streams
                            self.post_message(ReplyStarted(None, "steer", tuple(e.content for e in claimed)))
                        else:
                            self.post_message(ReplyNextStep())
                    case StepStarted(user=event, claimed=claimed):
                        steps += 1
                        user_text = None if event is None else str(event.body.get("content", text))
                        self.post_message(ReplyStarted(user_text, generation,
                                                       tuple(e.content for e in claimed)))
                    case StepSettled(event=event, calls=calls) if calls:
                        self.post_message(ReplyCalledTools(event))
                    case ToolResultStored(event=event):
                        self.post_message(ToolRan(event))
                    case TurnLimitReached(message=limit):
                        self.post_message(TurnLimitHit(limit))
                    case TextDelta(text=fragment):
                        self.post_message(ReplyDelta(fragment))
                    case ReasoningDelta(text=fragment):
                        self.post_message(ReplyReasoning(fragment))
                    case StepSettled(usage=usage, event=event):
                        self.post_message(ReplySettled(usage.total_tokens if usage else None, event.content, event))

    def _view_of(self, event: object, speaker: str | None = None) -> MessageView | None:
        """A stored event as the chat shows it, under `speaker` (default: the playthrough's
        character); None before the chat is open. On the loop: `view_of` does no I/O."""
        if self.playthrough is None or event is None:
            return None
        return self.tavern.playthroughs.view_of(event, speaker or self.playthrough.character_name,  # type: ignore[arg-type]
                                                self.playthrough.user_name)

    async def on_reply_started(self, message: ReplyStarted) -> None:
        """Show the person's message (a send) and a box to stream into (`ReplyStream`)."""
        assert self.playthrough is not None
        await self.reply_stream.show_lines(message, self.playthrough.user_name)
        self.queued.refresh()  # the claimed batch left the inbox
        await self.reply_stream.open_box(message.generation, self.playthrough.user_name)

    async def on_reply_called_tools(self, message: ReplyCalledTools) -> None:
        """A step's reply asked for tools: settle its box (hidden when it has no text)."""
        await self.reply_stream.settle(self._view_of(message.event) if self.reply_stream.box is not None else None)

    async def on_tool_ran(self, message: ToolRan) -> None:
        """One compact line per tool call (expandable to its arguments and result)."""
        view = self._view_of(message.event)
        if view is not None:
            await self.reply_stream.add_tool_line(view)

    async def on_reply_next_step(self, message: ReplyNextStep) -> None:
        """The turn goes on after its tool results: a new box streams its next reply."""
        if self.playthrough is not None:
            await self.reply_stream.next_step()

    def on_turn_limit_hit(self, message: TurnLimitHit) -> None:
        """Say the step limit, once (the results name it too)."""
        self.notify(message.message, title="Tool turn stopped", severity="warning", timeout=10)

    async def _ask_tool(self, spec: Any, arguments: dict[str, Any]) -> str:
        """The guard's question for a call the config does not allow (issue 19 §4): the modal's
        answer, "once", "always" or "refuse". Runs on the app's loop, where the step runs."""
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def answered(value: str | None) -> None:
            if not answer.done():
                answer.set_result(value or "refuse")

        self.app.push_screen(ToolAskScreen(spec.name, spec.source, spec.risk, arguments), callback=answered)
        return await answer

    async def on_reply_delta(self, message: ReplyDelta) -> None:
        """Append reply text (MarkdownStream batches it)."""
        await self.reply_stream.append_text(message.text)

    async def on_reply_reasoning(self, message: ReplyReasoning) -> None:
        """Append reasoning into the reply's collapsed reasoning section."""
        await self.reply_stream.append_reasoning(message.text)

    async def on_reply_settled(self, message: ReplySettled) -> None:
        """The reply is stored; the worker's end (below) reconciles the transcript (a group
        member's box is settled at once: the next member's streams under it)."""
        self.reply_stream.settled(message.content)
        if self.turn is None and self._plain and self.reply_stream.generation in ("send", "regenerate"):
            await self._settle_now(message.event)
        await self.settle_member(message.event)

    async def _settle_now(self, event: object) -> None:
        """Show a stored reply as settled at once in a chat that shows messages as stored (`_plain`):
        the state's commit and belief learning still run before the step ends (the keys wait for
        them), the reply need not. The step's end reconciles the transcript as after any step."""
        view = self._view_of(event)
        if self.reply_stream.box is None or view is None:
            return
        await self.reply_stream.settle(view)
        self.status.state = "idle"

    # -- the end of the step ----------------------------------------------------------------

    @on(Worker.StateChanged)
    async def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != GENERATION or event.state not in (
                WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        self._finish(event.worker)

    def _finish(self, worker: Worker[None]) -> None:
        """Reconcile with the database after the step ended (settled, stopped or failed): read it in
        a worker, then `_finished` shows the outcome (also when the read failed)."""
        self.call(self._read_state, title="Cannot read the chat", then=lambda state: self._finished(worker, state),
                  failed=lambda _: self._finished(worker, None))

    async def _finished(self, worker: Worker[None], state: ChatState | None) -> None:
        stream = self.reply_stream
        stored = stream.stored(state.messages if state is not None else [])
        mark = self._say_outcome(worker, state)
        if stream.fills_composer:
            await self._impersonated_to_composer(worker, stored)
        else:
            await stream.end(stored, mark)
        self.generating = False
        for problem in self.tavern.tools.take_problems():  # an MCP server failed: said, the chat goes on
            self.notify(problem, title="Tool server", severity="warning", timeout=10)
        if state is not None:
            await self._show_state(state)
            # Queued while it streamed: the next step claims the batch now (not after a stop
            # or a failure: the person decides then; the next Enter sends them with its text).
            if worker.state == WorkerState.SUCCESS and state.queued and stream.started:
                self._start("send", self.queued_updates())
        self.refresh_members()  # who speaks next changed

    def _say_outcome(self, worker: Worker[None], state: ChatState | None) -> str | None:
        """Say how the step ended (the status line, a notice); returns the mark its box settles
        with (None: the stored message's own)."""
        stream = self.reply_stream
        outcome = step_outcome(worker.state, worker.error, stream.started)
        if outcome == "elsewhere":
            # Another window or command took the step (it claimed the queued lines first, seen
            # in a trial with `tavern chat --say`): follow it and show its reply once it settles.
            self.status.state, self.status.detail = "idle", ELSEWHERE
            self._watch_elsewhere()
            return None
        if outcome == "refused":
            # Not applicable here (continue without a reply…, a line that cannot fit): a plain
            # word, not an error state. A refused line not kept in the queue goes back into the
            # composer: nothing typed is lost.
            self.status.state, self.status.detail = "idle", ""
            self.notify(str(worker.error), title=f"Cannot {stream.generation}", severity="warning")
            sent = stream.sent_text
            if sent and (state is None or all(item.text != sent for item in state.queued)):
                self._give_back(sent)
            return None
        if outcome == "failed":
            category, text = describe_failure(worker.error)
            self.status.state, self.status.detail = "error", f"{category}: {text}"
            self.notify(f"{category}: {text}", title="The reply failed", severity="error", timeout=10)
            return f"error · {category}"
        # MVU: a reply whose update commands were refused says so, and why.
        mvu = self.tavern.steps.last_mvu.get(self.playthrough_id) if outcome == "settled" else None
        self.status.say("idle", refused_status(mvu), refused_whole(mvu))  # cut on screen, whole in ctrl+l
        return "stopped" if outcome == "stopped" else None

    async def _impersonated_to_composer(self, worker: Worker[None], stored: MessageView | None) -> None:
        """An impersonation for the composer ended: its line goes after what the composer holds
        and the streaming box goes. A stopped or failed one's partial line (stored as a visible
        attempt) goes into the composer too and is taken out of the chat, as SillyTavern leaves
        a stopped impersonation in its send box."""
        settled = worker.state == WorkerState.SUCCESS
        text = await self.reply_stream.take_line(settled, stored)
        if not settled and stored is not None and stored.content:
            self.call(self.tavern.timeline.delete_message, self.playthrough_id, stored.ref,
                      title="Cannot take the partial line out of the chat", then=lambda _: self.reload())
        if text.strip():
            typed = self.prompt.value
            self.prompt.value = f"{typed.rstrip()}\n{text.strip()}" if typed.strip() else text.strip()
            self.prompt.focus()
            self._save_draft()
