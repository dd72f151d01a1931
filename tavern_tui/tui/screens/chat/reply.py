"""Provides `ReplyFlow`, the chat screen's reply stream: a key or Enter starts one step (`_start`)
in the generation worker, which only maps the service's `StepUpdate`s to Messages
(`_generate`); the handlers here turn them into transcript changes (the person's line, a box to
stream into, tool calls, the settled reply); when the worker ends, `_finished` reconciles the
transcript with what the database holds and says the outcome.

Mixed into `ChatScreen` (before `TavernScreen`), as `MessageCursor` and `GroupChat` are; a
`MessagePump`, so its `@on` handler is collected, not a DOMNode, so the screen's CSS type chain
stays `TavernScreen`'s. The narrow interface to the chat: `tavern`, `playthrough_id`,
`playthrough`, `transcript`, `status`, `prompt`, `generating`, `call`, `settled`, `turn`,
`reply_box`, `settle_member`, `refresh_members` (`GroupChat`), `_read_state`, `_show_state`,
`_reload` (`ChatReading`), `_refresh_queue` (`ChatQueue`), `_save_draft` (`ChatSending`) and
the step's state the screen's `__init__` sets: `_reply`, `_generation`, `_started`, `_before`,
`_into_composer`, `_settled_text`, `_watch`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from textual import on, work
from textual.message_pump import MessagePump
from textual.worker import Worker, WorkerState

from tavern_tui.engine.step import (
    InboxEmpty,
    StepBusy,
    StepSettled,
    StepStarted,
    StepUpdate,
    ToolResultStored,
    TurnLimitReached,
)
from tavern_tui.engine.stream import ReasoningDelta, TextDelta
from tavern_tui.errors import ProviderError, TavernError
from tavern_tui.service import MessageView
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
from tavern_tui.tui.screens.chat.reading import ChatState
from tavern_tui.tui.screens.state import refused_status, refused_whole
from tavern_tui.tui.screens.swipe_note import swipe_note
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.views import SwipeView

GENERATION = "generation"
"""Worker group of the reply stream (one at a time)."""

WATCH_EVERY = 0.5
"""Seconds between checks while another window or command is writing a reply here."""

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

        def swipe() -> tuple[SwipeView, SwipeView | None]:
            return timeline.swipe_state(pid), timeline.swipe(pid, direction)

        self.call(swipe, title="Cannot swipe", severity="warning",
                  then=lambda states: self._swiped(states[1], direction, states[0]))

    def _swiped(self, state: SwipeView | None, direction: int = 0, before: SwipeView | None = None) -> None:
        if state is None:
            if not self.generating:
                self._start("regenerate", lambda: self.tavern.steps.regenerate(self.playthrough_id))
            return
        if state == before:  # nothing moved: say why rather than nothing
            note = swipe_note(state, direction)
            if note:
                self.notify(note, title="Swipe", timeout=4)
        self._reload()

    def action_delete_swipe(self) -> None:
        """Delete the shown swipe of the last reply (SillyTavern's "delete swipe"); the one
        before it is shown and the other swipes stay."""
        self.call(self.tavern.timeline.delete_swipe, self.playthrough_id, title="Cannot delete the swipe",
                  severity="warning", then=lambda _state: self._reload())

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
        self._into_composer = into = not self.tavern.settings.tui.impersonate_direct
        self._start("impersonate", lambda: self.tavern.steps.impersonate(self.playthrough_id, into_composer=into))

    # -- the step ---------------------------------------------------------------------------

    def _start(self, generation: str, updates: Updates, text: str = "") -> None:
        """Run one step (`generation` names it for the transcript) in the generation worker."""
        self._reply = None
        self.turn = None
        self._generation = generation
        self._started = False
        self._settled_text = ""
        self._sent_text = text
        if generation != "impersonate":
            self._into_composer = False
        self._before = {box.view.ref for box in self.transcript.boxes if box.view is not None}
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

    async def on_reply_started(self, message: ReplyStarted) -> None:
        """Show the person's message (a send) and a box to stream into.

        A regenerated reply replaces the last box, a continued one too but streams after its
        text (a continued greeting becomes a reply); an impersonation streams into a box of the
        person's.
        """
        assert self.playthrough is not None
        self._started = True
        for user_text in message.user_texts or ((message.user_text,) if message.user_text is not None else ()):
            await self.transcript.add(MessageBox(self.playthrough.user_name, user_text, classes="-user"))
        self._refresh_queue()  # the claimed batch left the inbox
        prefill = ""
        boxes = self.transcript.boxes
        last = boxes[-1].view if boxes else None
        if last is not None and last.role == "assistant" and (
                message.generation == "continue" or (message.generation == "regenerate" and last.source != "opening")):
            prefill = boxes[-1].text if message.generation == "continue" else ""
            await boxes[-1].remove()
        if message.generation == "impersonate":
            mark = "writing your line… (it goes into the composer)" if self._into_composer else "writing…"
            box = MessageBox(self.playthrough.user_name, mark=mark, classes="-user -streaming")
        else:
            box = self.reply_box(prefill, like=last if message.generation in ("regenerate", "continue") else None)
        self._reply = await self.transcript.add(box)

    async def on_reply_called_tools(self, message: ReplyCalledTools) -> None:
        """A step's reply asked for tools: settle its box (hidden when it has no text)."""
        if self._reply is not None and self.playthrough is not None:
            view = self.tavern.playthroughs.view_of(message.event, self.playthrough.character_name,  # type: ignore[arg-type]
                                                    self.playthrough.user_name)
            await self._reply.settle(view)
            self._before.add(view.ref)
        self._reply = None

    async def on_tool_ran(self, message: ToolRan) -> None:
        """One compact line per tool call (expandable to its arguments and result)."""
        if self.playthrough is not None:
            view = self.tavern.playthroughs.view_of(message.event, self.playthrough.character_name,  # type: ignore[arg-type]
                                                    self.playthrough.user_name)
            self._before.add(view.ref)
            await self.transcript.add(MessageBox.from_view(view))

    async def on_reply_next_step(self, message: ReplyNextStep) -> None:
        """The turn goes on after its tool results: a new box streams its next reply."""
        if self.playthrough is not None:
            self._reply = await self.transcript.add(self.reply_box())

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
        if self._reply is not None:
            await self._reply.append_text(message.text)

    async def on_reply_reasoning(self, message: ReplyReasoning) -> None:
        """Append reasoning into the reply's collapsed reasoning section."""
        if self._reply is not None:
            await self._reply.append_reasoning(message.text)

    async def on_reply_settled(self, message: ReplySettled) -> None:
        """The reply is stored; the worker's end (below) reconciles the transcript (a group
        member's box is settled at once: the next member's streams under it)."""
        self._settled_text = message.content
        if self.turn is None and self._plain and self._generation in ("send", "regenerate"):
            await self._settle_now(message.event)
        await self.settle_member(message.event)

    async def _settle_now(self, event: object) -> None:
        """Show a stored reply as settled at once in a chat that shows messages as stored (`_plain`):
        the state's commit and belief learning still run before the step ends (the keys wait for
        them), the reply need not. The step's end reconciles the transcript as after any step."""
        if self._reply is None or event is None or self.playthrough is None:
            return
        view = self.tavern.playthroughs.view_of(event, self.playthrough.character_name,  # type: ignore[arg-type]
                                                self.playthrough.user_name)
        await self._reply.settle(view)
        self._before.add(view.ref)
        self._reply = None
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
        messages = state.messages if state is not None else []
        role = "user" if self._generation == "impersonate" else "assistant"
        stored = _new_last(messages, role, self._before)
        refused = (worker.state == WorkerState.ERROR and not self._started
                   and isinstance(worker.error, TavernError) and not isinstance(worker.error, ProviderError))
        if refused and isinstance(worker.error, (StepBusy, InboxEmpty)):
            # Another window or command took the step (it claimed the queued lines first, seen
            # in a trial with `tavern chat --say`): follow it and show its reply once it settles.
            self.status.state, self.status.detail = "idle", "a reply is being written in another window"
            self._watch_elsewhere()
            mark = None
        elif refused:
            # Not applicable here (continue without a reply…, a line that cannot fit): a plain
            # word, not an error state. A refused line not kept in the queue goes back into the
            # composer: nothing typed is lost.
            self.status.state, self.status.detail = "idle", ""
            self.notify(str(worker.error), title=f"Cannot {self._generation}", severity="warning")
            mark = None
            if self._sent_text and (state is None or all(item.text != self._sent_text for item in state.queued)):
                self._give_back(self._sent_text)
        elif worker.state == WorkerState.ERROR:
            category, text = describe_failure(worker.error)
            self.status.state, self.status.detail = "error", f"{category}: {text}"
            self.notify(f"{category}: {text}", title="The reply failed", severity="error", timeout=10)
            mark = f"error · {category}"
        else:
            # MVU (issue 18): a reply whose update commands were refused says so, and why.
            mvu = self.tavern.steps.last_mvu.get(self.playthrough_id) if worker.state == WorkerState.SUCCESS else None
            self.status.say("idle", refused_status(mvu), refused_whole(mvu))  # cut on screen, whole in ctrl+l
            mark = "stopped" if worker.state == WorkerState.CANCELLED else None
        if self._generation == "impersonate" and self._into_composer:
            await self._impersonated_to_composer(worker, stored)
        elif self._reply is not None:
            await self._reply.settle(stored, mark)
        self._reply = None
        self.generating = False
        for problem in self.tavern.tools.take_problems():  # an MCP server failed: said, the chat goes on
            self.notify(problem, title="Tool server", severity="warning", timeout=10)
        if state is not None:
            await self._show_state(state)
            # Queued while it streamed: the next step claims the batch now (not after a stop
            # or a failure: the person decides then; the next Enter sends them with its text).
            if worker.state == WorkerState.SUCCESS and state.queued and self._started:
                self._start("send", self.queued_updates())
        self.refresh_members()  # who speaks next changed

    async def _impersonated_to_composer(self, worker: Worker[None], stored: MessageView | None) -> None:
        """An impersonation for the composer ended: its line goes after what the composer holds
        and the streaming box goes. A stopped or failed one's partial line (stored as a visible
        attempt) goes into the composer too and is taken out of the chat, as SillyTavern leaves
        a stopped impersonation in its send box."""
        text = self._settled_text if worker.state == WorkerState.SUCCESS else (stored.content if stored else "")
        if self._reply is not None:
            await self._reply.stop_streams()
            await self._reply.remove()
        if worker.state != WorkerState.SUCCESS and stored is not None and stored.content:
            self.call(self.tavern.timeline.delete_message, self.playthrough_id, stored.ref,
                      title="Cannot take the partial line out of the chat", then=lambda _: self._reload())
        if text.strip():
            typed = self.prompt.value
            self.prompt.value = f"{typed.rstrip()}\n{text.strip()}" if typed.strip() else text.strip()
            self.prompt.focus()
            self._save_draft()

    # -- a step another window or command takes ----------------------------------------------

    def _watch_elsewhere(self) -> None:
        """Follow a step another window or command is taking in this playthrough: every
        `WATCH_EVERY` s ask (in a worker) whether it still holds the step; once it does not,
        re-read the chat, so its reply shows here too."""
        if self._watch is None:
            self._watch = self.set_interval(WATCH_EVERY, self._watch_tick)

    def _watch_tick(self) -> None:
        self.call(self.tavern.inbox.step_in_progress, self.playthrough_id, title="Cannot read the chat",
                  group="watch", exclusive=True, then=self._watched)

    def _watched(self, busy: bool) -> None:
        if busy or self._watch is None:
            return
        self._watch.stop()
        self._watch = None
        if self.status.detail == "a reply is being written in another window":
            self.status.detail = ""
        self._reload()


def _new_last(messages: list[MessageView], role: str, before: set[tuple[int, int]]) -> MessageView | None:
    """What the step that just ended stored: the last message, when it has the streamed role, is
    not the greeting and was not shown before the step."""
    if messages and messages[-1].role == role and messages[-1].source != "opening" and messages[-1].ref not in before:
        return messages[-1]
    return None
