"""Provides `ReplyControl`, the chat's reply stream: a key or Enter starts one step (`start`) in
the generation worker, which only maps the service's `StepUpdate`s to Messages (`_generate`);
the chat screen hands those Messages to the control's handlers (`started`, `delta`, `settled`,
…), which pass them to the chat's `ReplyStream` (`reply_stream`), which holds the step's state
and shows it in the transcript, making a stored event a `MessageView` first; when the worker
ends, `finish` reconciles the transcript with what the database holds and says the outcome
(`step_outcome`).

The worker runs on the screen, in the group `GENERATION`: Textual's exclusivity is per node, so
a step and a compaction (`CompactionControl`, same group, same screen) never run at once, and Esc
cancels the group (`ChatScreen.action_stop`). The Messages are handled on the screen's queue in
the order the worker posted them, before the worker's end (`Worker.StateChanged`) is.

The chat screen holds one (`ChatScreen.replies`); the control reaches the chat only through
`ChatHost`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

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
from tavern_tui.tui.widgets.fit_footer import FitFooter
from tavern_tui.views import MessageView, SwipeView

if TYPE_CHECKING:
    from tavern_tui.tui.screens.chat.host import ChatHost

GENERATION = "generation"
"""Worker group of the reply stream and the compaction (one at a time)."""

HOLD_LIMIT = 0.15
"""Seconds at most the screen's repaints wait for a step's opening (`PaintHold`)."""

SEND_ALLOWANCE = 0.02
"""Seconds the repaints still wait once the step's opening is done, so its request goes out on a
quiet loop first (it takes a few milliseconds then), unless the reply's first update comes sooner."""

Updates = Callable[[], AsyncGenerator[StepUpdate | MemberTurn | LineQueued | Any, None]]
"""Starts a step's stream: `tavern.steps.send(...)`, `regenerate`, `continue_reply` or
`impersonate`; a group round's (`tavern.groups.play_round`, `speak`) says whose turn it is too."""


def describe_failure(error: BaseException | None) -> tuple[str, str]:
    """(category, plain message) of a failed step: "authentication", "Invalid API key"."""
    if isinstance(error, ProviderError):
        return error.category, str(error)
    if isinstance(error, TavernError):
        return "error", str(error)
    return "internal", f"{type(error).__name__}: {error}" if error else "unknown failure"


class PaintHold:
    """The screen's repaints held (`App.batch_update`) from Enter until the step's request has gone
    out (its opening done, then `SEND_ALLOWANCE`, or its next update), at most `HOLD_LIMIT`
    seconds: the opening's dozen short hops between the event loop and worker threads each wait
    for the loop, and a repaint between two of them (the composer cleared, the footer's keys, the
    status line, the person's line mounted) costs milliseconds each time, before the request goes
    out (B9, performance-anchors §7). The footer's rebuild waits too (`FitFooter.wait`), and the
    person's line is mounted once released (`released`). What changed meanwhile is painted at
    release, a few frames after Enter.

    Args:
        app: the app whose repaints are held.
    """

    def __init__(self, app: Any) -> None:
        self._app = app
        self._held: Any = None
        self._timer: Any = None
        self._footers: list[FitFooter] = []  # their rebuilds wait while held
        self._free = asyncio.Event()
        self._free.set()

    async def released(self) -> None:
        """Return once repaints are not held (at once when they are not): what would be mounted
        meanwhile is not painted before the release anyway, so it waits rather than delay the
        request on the loop."""
        await self._free.wait()

    def hold(self) -> None:
        """Hold repaints now (once; released by `release` or after `HOLD_LIMIT`)."""
        if self._held is not None:
            return
        self._held = self._app.batch_update()
        self._held.__enter__()
        self._free.clear()
        self._footers = list(self._app.screen.query_children(FitFooter))  # each screen yields its own
        for footer in self._footers:
            footer.wait()
        self._timer = self._app.set_timer(HOLD_LIMIT, self.release)

    def release_soon(self) -> None:
        """Release after `SEND_ALLOWANCE` (or sooner, by `release`)."""
        if self._held is None:
            return
        if self._timer is not None:
            self._timer.stop()
        self._timer = self._app.set_timer(SEND_ALLOWANCE, self.release)

    def release(self) -> None:
        """Paint again (what changed while held is painted now); nothing when not held."""
        held, self._held = self._held, None
        if held is None:
            return
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        held.__exit__(None, None, None)
        self._free.set()
        for footer in self._footers:
            footer.resume()
        self._footers = []
        self._app.screen.refresh()


class ReplyControl:
    """One step at a time, streamed into the transcript.

    Args:
        chat: the chat screen (`ChatHost`); the step's state and display are its `reply_stream`.
    """

    def __init__(self, chat: ChatHost) -> None:
        self.chat = chat
        self.paints = PaintHold(chat.app)
        """The screen's repaints, held while a step opens."""

    # -- the keys that start a step ---------------------------------------------------------

    def swipe(self, direction: int) -> None:
        """Show the last message's previous (-1) or next (+1) variant; past the last reply,
        generate a new one (streamed like a send)."""
        chat = self.chat
        timeline, pid = chat.tavern.timeline, chat.playthrough_id

        def swipe() -> tuple[SwipeView, SwipeView | None, ChatState | None]:
            # One worker: the swipe, then what the chat shows after it (one hop, one call in turn).
            before, after = timeline.swipe_state(pid), timeline.swipe(pid, direction)
            return before, after, (chat.read_state() if after is not None else None)

        chat.call(swipe, title="Cannot swipe", severity="warning",
                  then=lambda done: self._swiped(done[1], direction, done[0], done[2]))

    async def _swiped(self, state: SwipeView | None, direction: int = 0, before: SwipeView | None = None,
                      shown: ChatState | None = None) -> None:
        chat = self.chat
        if state is None:
            if not chat.generating:
                self.regenerate()
            return
        if state == before:  # nothing moved: say why rather than nothing
            note = swipe_note(state, direction)
            if note:
                chat.notify(note, title="Swipe", timeout=4)
        if shown is not None:
            await chat.show_state(shown)
        else:
            chat.reload()

    def delete_swipe(self) -> None:
        """Delete the shown swipe of the last reply (SillyTavern's "delete swipe"); the one
        before it is shown and the other swipes stay."""
        chat = self.chat
        chat.call(chat.tavern.timeline.delete_swipe, chat.playthrough_id, title="Cannot delete the swipe",
                  severity="warning", then=lambda _state: chat.reload())

    def regenerate(self) -> None:
        """Generate a new variant of the last reply (the old one stays a swipe away)."""
        steps, pid = self.chat.tavern.steps, self.chat.playthrough_id
        self.start("regenerate", lambda: steps.regenerate(pid))

    def continue_reply(self) -> None:
        """Extend the last reply; the longer text becomes a new variant of it."""
        steps, pid = self.chat.tavern.steps, self.chat.playthrough_id
        self.start("continue", lambda: steps.continue_reply(pid))

    def impersonate(self) -> None:
        """Have the model write the person's next line. As SillyTavern, it goes into the composer
        for the person to edit and send (after what is typed there already, never over it); with
        `[tui] impersonate_direct = true` it is posted at once as theirs, marked "written by the
        model for you" (Enter on the empty prompt then answers it)."""
        tavern, pid = self.chat.tavern, self.chat.playthrough_id
        into = not tavern.settings.tui.impersonate_direct
        self.start("impersonate", lambda: tavern.steps.impersonate(pid, into_composer=into), into_composer=into)

    # -- the step ---------------------------------------------------------------------------

    def start(self, generation: str, updates: Updates, text: str = "", *, into_composer: bool = False) -> None:
        """Run one step (`generation` names it for the transcript; `text` is the person's line a
        send starts with; `into_composer`: an impersonation's line goes into the composer) in
        the generation worker."""
        chat = self.chat
        chat.groups.turn = None
        chat.reply_stream.begin(generation, text, into_composer=into_composer)
        chat.generating = True
        status = chat.status
        status.detail = ""
        status.swipe = ""  # the counter of the reply being replaced; the settled one sets it again
        status.state = "streaming"
        self.paints.hold()
        chat.run_worker(self._generate(generation, updates, text), group=GENERATION, exclusive=True,
                        exit_on_error=False, description="stream a reply")

    async def _generate(self, generation: str, updates: Updates, text: str = "") -> None:
        # Only posts Messages: cancellation (Esc) lands inside the service's step, which stores
        # the partial reply before re-raising; aclosing makes that deterministic if it lands here.
        chat = self.chat
        try:
            await chat.settled()  # a swipe still being written comes first
            await self._stream(generation, updates, text)
        finally:
            self.paints.release()

    async def _stream(self, generation: str, updates: Updates, text: str) -> None:
        """`_generate`'s loop: each update as the Message the screen hands back to this control."""
        chat = self.chat
        steps = 0  # a turn with tools has several steps (issue 19)
        async with aclosing(updates()) as stream:
            async for update in stream:
                # The opening is done: its request goes out, then what changed on screen is painted.
                if isinstance(update, StepStarted) and not steps:
                    self.paints.release_soon()
                else:
                    self.paints.release()
                match update:
                    case MemberTurn() | LineQueued():  # a group round: the next member's steps follow
                        steps = 0
                        chat.post_message(RoundUpdate(update))
                    case StepStarted(user=event, claimed=claimed) if steps:
                        steps += 1
                        if claimed:  # steers claimed at the step boundary: shown, then the reply streams
                            chat.post_message(ReplyStarted(None, "steer", tuple(e.content for e in claimed)))
                        else:
                            chat.post_message(ReplyNextStep())
                    case StepStarted(user=event, claimed=claimed):
                        steps += 1
                        user_text = None if event is None else str(event.body.get("content", text))
                        chat.post_message(ReplyStarted(user_text, generation, tuple(e.content for e in claimed)))
                    case StepSettled(event=event, calls=calls) if calls:
                        chat.post_message(ReplyCalledTools(event))
                    case ToolResultStored(event=event):
                        chat.post_message(ToolRan(event))
                    case TurnLimitReached(message=limit):
                        chat.post_message(TurnLimitHit(limit))
                    case TextDelta(text=fragment):
                        chat.post_message(ReplyDelta(fragment))
                    case ReasoningDelta(text=fragment):
                        chat.post_message(ReplyReasoning(fragment))
                    case StepSettled(usage=usage, event=event):
                        chat.post_message(ReplySettled(usage.total_tokens if usage else None, event.content, event))

    def view_of(self, event: object, speaker: str | None = None) -> MessageView | None:
        """A stored event as the chat shows it, under `speaker` (default: the playthrough's
        character); None before the chat is open. On the loop: `view_of` does no I/O."""
        chat = self.chat
        if chat.playthrough is None or event is None:
            return None
        return chat.tavern.playthroughs.view_of(event, speaker or chat.playthrough.character_name,  # type: ignore[arg-type]
                                                chat.playthrough.user_name)

    # -- the worker's Messages, handed over by the chat screen ------------------------------

    async def started(self, message: ReplyStarted) -> None:
        """Show the person's message (a send) and a box to stream into (`ReplyStream`), once the
        step's request has gone out (`PaintHold.released`: they would not be painted sooner)."""
        chat = self.chat
        await self.paints.released()
        assert chat.playthrough is not None
        await chat.reply_stream.show_lines(message, chat.playthrough.user_name)
        chat.inbox.refresh()  # the claimed batch left the inbox
        await chat.reply_stream.open_box(message.generation, chat.playthrough.user_name)

    async def called_tools(self, message: ReplyCalledTools) -> None:
        """A step's reply asked for tools: settle its box (hidden when it has no text)."""
        stream = self.chat.reply_stream
        await stream.settle(self.view_of(message.event) if stream.box is not None else None)

    async def tool_ran(self, message: ToolRan) -> None:
        """One compact line per tool call (expandable to its arguments and result)."""
        view = self.view_of(message.event)
        if view is not None:
            await self.chat.reply_stream.add_tool_line(view)

    async def next_step(self) -> None:
        """The turn goes on after its tool results: a new box streams its next reply."""
        if self.chat.playthrough is not None:
            await self.chat.reply_stream.next_step()

    def turn_limit_hit(self, message: TurnLimitHit) -> None:
        """Say the step limit, once (the results name it too)."""
        self.chat.notify(message.message, title="Tool turn stopped", severity="warning", timeout=10)

    async def ask_tool(self, spec: Any, arguments: dict[str, Any]) -> str:
        """The guard's question for a call the config does not allow (issue 19 §4): the modal's
        answer, "once", "always" or "refuse". Runs on the app's loop, where the step runs."""
        answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

        def answered(value: str | None) -> None:
            if not answer.done():
                answer.set_result(value or "refuse")

        self.chat.app.push_screen(ToolAskScreen(spec.name, spec.source, spec.risk, arguments), callback=answered)
        return await answer

    async def delta(self, message: ReplyDelta) -> None:
        """Append reply text (MarkdownStream batches it)."""
        await self.chat.reply_stream.append_text(message.text)

    async def reasoning(self, message: ReplyReasoning) -> None:
        """Append reasoning into the reply's collapsed reasoning section."""
        await self.chat.reply_stream.append_reasoning(message.text)

    async def settled(self, message: ReplySettled) -> None:
        """The reply is stored; the worker's end (`finish`) reconciles the transcript (a group
        member's box is settled at once: the next member's streams under it)."""
        chat = self.chat
        chat.reply_stream.settled(message.content)
        if chat.groups.turn is None and chat.plain and chat.reply_stream.generation in ("send", "regenerate"):
            await self._settle_now(message.event)
        await chat.groups.settle_member(message.event)

    async def _settle_now(self, event: object) -> None:
        """Show a stored reply as settled at once in a chat that shows messages as stored (`plain`):
        the state's commit and belief learning still run before the step ends (the keys wait for
        them), the reply need not. The step's end reconciles the transcript as after any step."""
        view, chat = self.view_of(event), self.chat
        if chat.reply_stream.box is None or view is None:
            return
        await chat.reply_stream.settle(view)
        chat.status.state = "idle"

    # -- the end of the step ----------------------------------------------------------------

    def finish(self, worker: Worker[None]) -> None:
        """Reconcile with the database after the step ended (settled, stopped or failed): read it in
        a worker, then `_finished` shows the outcome (also when the read failed)."""
        self.chat.call(self.chat.read_state, title="Cannot read the chat",
                       then=lambda state: self._finished(worker, state), failed=lambda _: self._finished(worker, None))

    async def _finished(self, worker: Worker[None], state: ChatState | None) -> None:
        chat = self.chat
        stream = chat.reply_stream
        stored = stream.stored(state.messages if state is not None else [])
        mark = self._say_outcome(worker, state)
        if stream.fills_composer:
            await self._impersonated_to_composer(worker, stored)
        else:
            await stream.end(stored, mark)
        chat.generating = False
        for problem in chat.tavern.tools.take_problems():  # an MCP server failed: said, the chat goes on
            chat.notify(problem, title="Tool server", severity="warning", timeout=10)
        if state is not None:
            await chat.show_state(state)
            # Queued while it streamed: the next step claims the batch now (not after a stop
            # or a failure: the person decides then; the next Enter sends them with its text).
            if worker.state == WorkerState.SUCCESS and state.queued and stream.started:
                self.start("send", chat.groups.queued_updates())
        chat.groups.refresh_members()  # who speaks next changed

    def _say_outcome(self, worker: Worker[None], state: ChatState | None) -> str | None:
        """Say how the step ended (the status line, a notice); returns the mark its box settles
        with (None: the stored message's own)."""
        chat = self.chat
        stream, status = chat.reply_stream, chat.status
        outcome = step_outcome(worker.state, worker.error, stream.started)
        if outcome == "elsewhere":
            # Another window or command took the step (it claimed the queued lines first, seen
            # in a trial with `tavern chat --say`): follow it and show its reply once it settles.
            status.state, status.detail = "idle", ELSEWHERE
            chat.follow_elsewhere()
            return None
        if outcome == "refused":
            # Not applicable here (continue without a reply…, a line that cannot fit): a plain
            # word, not an error state. A refused line not kept in the queue goes back into the
            # composer: nothing typed is lost.
            status.state, status.detail = "idle", ""
            chat.notify(str(worker.error), title=f"Cannot {stream.generation}", severity="warning")
            sent = stream.sent_text
            if sent and (state is None or all(item.text != sent for item in state.queued)):
                chat.sending.give_back(sent)
            return None
        if outcome == "failed":
            category, text = describe_failure(worker.error)
            status.state, status.detail = "error", f"{category}: {text}"
            chat.notify(f"{category}: {text}", title="The reply failed", severity="error", timeout=10)
            return f"error · {category}"
        # MVU: a reply whose update commands were refused says so, and why.
        mvu = chat.tavern.steps.last_mvu.get(chat.playthrough_id) if outcome == "settled" else None
        status.say("idle", refused_status(mvu), refused_whole(mvu))  # cut on screen, whole in ctrl+l
        return "stopped" if outcome == "stopped" else None

    async def _impersonated_to_composer(self, worker: Worker[None], stored: MessageView | None) -> None:
        """An impersonation for the composer ended: its line goes after what the composer holds
        and the streaming box goes. A stopped or failed one's partial line (stored as a visible
        attempt) goes into the composer too and is taken out of the chat, as SillyTavern leaves
        a stopped impersonation in its send box."""
        chat = self.chat
        settled = worker.state == WorkerState.SUCCESS
        text = await chat.reply_stream.take_line(settled, stored)
        if not settled and stored is not None and stored.content:
            chat.call(chat.tavern.timeline.delete_message, chat.playthrough_id, stored.ref,
                      title="Cannot take the partial line out of the chat", then=lambda _: chat.reload())
        if text.strip():
            typed = chat.prompt.value
            chat.prompt.value = f"{typed.rstrip()}\n{text.strip()}" if typed.strip() else text.strip()
            chat.prompt.focus()
            chat.sending.save_draft()
