"""Provides `ChatScreen`: one playthrough's transcript, the prompt, and the streamed reply."""

from __future__ import annotations

from contextlib import aclosing

from textual import getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Input, Static
from textual.worker import Worker, WorkerState

from tavern_tui.engine.step import StepSettled, StepStarted
from tavern_tui.engine.stream import ReasoningDelta, TextDelta
from tavern_tui.errors import ProviderError, TavernError
from tavern_tui.service import MessageView, PlaythroughView, Tavern
from tavern_tui.tui.messages import ReplyDelta, ReplyReasoning, ReplySettled, ReplyStarted, WorldBooksRequested
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.tui.widgets.status_line import StatusLine
from tavern_tui.tui.widgets.transcript import Transcript

GENERATION = "generation"
"""Worker group of the reply stream (one at a time)."""


def describe_failure(error: BaseException | None) -> tuple[str, str]:
    """(category, plain message) of a failed step: "authentication", "Invalid API key"."""
    if isinstance(error, ProviderError):
        return error.category, str(error)
    if isinstance(error, TavernError):
        return "error", str(error)
    return "internal", f"{type(error).__name__}: {error}" if error else "unknown failure"


class ChatScreen(Screen[None]):
    """Plays one playthrough: Enter sends, the reply streams in, Esc stops it (or goes back).

    The send runs in an async worker that only posts Messages; the handlers here touch widgets.
    Whatever the outcome, the stored messages are re-read afterwards, so what is shown is what
    the database holds (a stopped or failed reply stays visible, marked).
    """

    BINDINGS = [
        Binding("escape", "stop", "Stop", id="chat.stop"),
        Binding("escape", "back", "Back", id="chat.back"),
        Binding("ctrl+o", "load_earlier", "Earlier messages", id="chat.load_earlier"),
        # F2, not ctrl+w: the prompt has focus and Input keeps ctrl+w for deleting a word.
        Binding("f2", "world_books", "World books", id="chat.world_books"),
        Binding("pageup", "scroll_transcript(-1)", "Page up", id="chat.page_up", show=False),
        Binding("pagedown", "scroll_transcript(1)", "Page down", id="chat.page_down", show=False),
    ]

    generating: reactive[bool] = reactive(False, bindings=True)
    """True while a reply streams; switches Esc between Stop and Back."""

    transcript = getters.query_one("#transcript", Transcript)
    status = getters.query_one("#status", StatusLine)
    prompt = getters.query_one("#prompt", Input)

    def __init__(self, tavern: Tavern, playthrough_id: int) -> None:
        super().__init__()
        self.tavern = tavern
        self.playthrough_id = playthrough_id
        self.playthrough: PlaythroughView | None = None
        self._reply: MessageBox | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="chat-title", markup=False)
        yield Transcript(id="transcript")
        yield Input(placeholder="Say something… (Enter sends, Esc stops a reply or goes back)", id="prompt")
        yield StatusLine(self.tavern.provider_label, id="status")
        yield Footer()

    async def on_mount(self) -> None:
        try:
            self.playthrough = view = self.tavern.open_playthrough(self.playthrough_id)
        except TavernError as exc:
            self.notify(str(exc), title="Cannot open the playthrough", severity="error")
            self.dismiss()
            return
        self.query_one("#chat-title", Static).update(f"{view.character_name} · #{view.id} · playing as {view.user_name}")
        self.prompt.placeholder = f"Say something as {view.user_name}… (Enter sends, Esc stops a reply or goes back)"
        await self.transcript.show(self.tavern.messages(self.playthrough_id))
        self._update_tokens()
        self.refresh_bindings()
        self.prompt.focus()

    def watch_generating(self, generating: bool) -> None:
        self.set_class(generating, "-generating")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "stop":
            return self.generating
        if action == "back":
            return not self.generating
        if action == "load_earlier":
            return self.is_mounted and self.transcript.earlier_count > 0
        return True

    def _update_tokens(self) -> None:
        try:
            self.status.tokens = self.tavern.estimate_tokens(self.playthrough_id)
        except TavernError:
            self.status.tokens = None

    # -- sending --------------------------------------------------------------------------

    @on(Input.Submitted, "#prompt")
    def _submitted(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            return
        if self.generating:
            self.notify("A reply is still streaming: wait, or press Esc to stop it.", severity="warning")
            return
        self.prompt.clear()
        self._reply = None
        self.generating = True
        self.status.detail = ""
        self.status.state = "streaming"
        self._generate(text)

    @work(exclusive=True, group=GENERATION, exit_on_error=False, description="stream a reply")
    async def _generate(self, text: str) -> None:
        # Only posts Messages: cancellation (Esc) lands inside `send`, which stores the partial
        # reply before re-raising; aclosing makes that deterministic if it lands here instead.
        async with aclosing(self.tavern.send(self.playthrough_id, text)) as updates:
            async for update in updates:
                match update:
                    case StepStarted(user=event):
                        self.post_message(ReplyStarted(str(event.body.get("content", text))))
                    case TextDelta(text=fragment):
                        self.post_message(ReplyDelta(fragment))
                    case ReasoningDelta(text=fragment):
                        self.post_message(ReplyReasoning(fragment))
                    case StepSettled(usage=usage):
                        self.post_message(ReplySettled(usage.total_tokens if usage else None))

    async def on_reply_started(self, message: ReplyStarted) -> None:
        """Show the person's message and an empty reply box to stream into."""
        assert self.playthrough is not None
        await self.transcript.add(MessageBox(self.playthrough.user_name, message.user_text, classes="-user"))
        self._reply = await self.transcript.add(MessageBox.streaming(self.playthrough.character_name))

    async def on_reply_delta(self, message: ReplyDelta) -> None:
        """Append reply text (MarkdownStream batches it)."""
        if self._reply is not None:
            await self._reply.append_text(message.text)

    async def on_reply_reasoning(self, message: ReplyReasoning) -> None:
        """Append reasoning into the reply's collapsed reasoning section."""
        if self._reply is not None:
            await self._reply.append_reasoning(message.text)

    def on_reply_settled(self, message: ReplySettled) -> None:
        """The reply is stored; the worker's end (below) reconciles the transcript."""

    @on(Worker.StateChanged)
    async def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group != GENERATION or event.state not in (
                WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            return
        await self._finish(event.worker)

    async def _finish(self, worker: Worker[None]) -> None:
        """Reconcile with the database after the step ended (settled, stopped or failed)."""
        messages = self.tavern.messages(self.playthrough_id)
        stored = _last_reply(messages)
        if worker.state == WorkerState.ERROR:
            category, text = describe_failure(worker.error)
            self.status.state, self.status.detail = "error", f"{category}: {text}"
            self.notify(f"{category}: {text}", title="The reply failed", severity="error", timeout=10)
            mark = f"error · {category}"
        else:
            self.status.state, self.status.detail = "idle", ""
            mark = "stopped" if worker.state == WorkerState.CANCELLED else None
        if self._reply is not None:
            await self._reply.settle(stored, mark)
        await self.transcript.sync(messages)
        self._reply = None
        self._update_tokens()
        self.generating = False
        self.refresh_bindings()

    # -- actions --------------------------------------------------------------------------

    def action_stop(self) -> None:
        """Cancel the streaming reply; the service keeps the text received so far."""
        self.workers.cancel_group(self, GENERATION)

    def action_world_books(self) -> None:
        """Open the world-book pane on this playthrough (bindings here, tester on this chat)."""
        self.post_message(WorldBooksRequested(self.playthrough_id))

    def action_back(self) -> None:
        """Return to the home screen."""
        self.dismiss()

    async def action_load_earlier(self) -> None:
        """Mount the previous window of messages above the first one."""
        await self.transcript.load_earlier()
        self.refresh_bindings()

    def action_scroll_transcript(self, direction: int) -> None:
        """Page the transcript while the prompt keeps focus."""
        if direction < 0:
            self.transcript.scroll_page_up()
        else:
            self.transcript.scroll_page_down()


def _last_reply(messages: list[MessageView]) -> MessageView | None:
    """The stored reply of the step that just ended: the last message when it is the model's."""
    if messages and messages[-1].role == "assistant" and messages[-1].source != "opening":
        return messages[-1]
    return None
