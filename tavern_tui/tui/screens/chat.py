"""Provides `ChatScreen`: one playthrough's transcript, the prompt, and the streamed reply."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, ClassVar

from textual import events, getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Collapsible, Static, TextArea
from textual.worker import Worker, WorkerState

from tavern_tui.engine.step import (
    OPENING_SOURCE,
    InboxEmpty,
    StepBusy,
    StepSettled,
    StepStarted,
    StepUpdate,
    ToolResultStored,
    TurnLimitReached,
)
from tavern_tui.engine.stream import ReasoningDelta, TextDelta
from tavern_tui.errors import ProviderError, SecretRefused, TavernError
from tavern_tui.service import MessageView, PlaythroughView, Tavern
from tavern_tui.service.groups import LineQueued, MemberTurn
from tavern_tui.tui.labels import event_label, markup_literal, summary_title
from tavern_tui.tui.messages import (
    PlaythroughChosen,
    ReplyCalledTools,
    ReplyDelta,
    ReplyNextStep,
    ReplyReasoning,
    ReplySettled,
    ReplyStarted,
    RoundUpdate,
    ToolRan,
    TurnLimitHit,
    WorldBooksRequested,
)
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.modals.edit_message import EditMessageScreen
from tavern_tui.tui.modals.tool_ask import ToolAskScreen
from tavern_tui.tui.screens.base import TavernScreen
from tavern_tui.tui.screens.group_round import GROUP_ACTIONS, GROUP_BINDINGS, GroupChat
from tavern_tui.tui.screens.message_cursor import CURSOR_ACTIONS, CURSOR_BINDINGS, MessageCursor
from tavern_tui.tui.screens.persona import PersonaScreen
from tavern_tui.tui.screens.regex_allowance import ScriptAllowance
from tavern_tui.tui.screens.state import StateScreen, refused_status, refused_whole
from tavern_tui.tui.screens.strategy import StrategyScreen
from tavern_tui.tui.screens.swipe_note import swipe_note
from tavern_tui.tui.screens.trace import TraceScreen
from tavern_tui.tui.screens.tree import TreeScreen
from tavern_tui.tui.screens.variables import VariablesScreen
from tavern_tui.tui.widgets.composer import Composer, InboxStrip
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.member_strip import MemberStrip
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.tui.widgets.status_line import StatusLine
from tavern_tui.tui.widgets.transcript import WINDOW, Transcript
from tavern_tui.views import GroupView, InboxItemView, SwipeView

PLACEHOLDER = ("Say something as {user}… (Enter sends · shift+Enter or ctrl+J new line · "
               "Esc stops a reply or goes back)")
"""The composer's hint (issue 15: both newline keys named)."""

GENERATION = "generation"
"""Worker group of the reply stream (one at a time)."""

TOKEN_DELAY = 0.3
"""Seconds of quiet before the status line's token estimate is recomputed."""

DRAFT_DELAY = 0.3
"""Seconds of quiet before the composer's draft is written to the database."""

WATCH_EVERY = 0.5
"""Seconds between checks while another window or command is writing a reply here."""

ESC_AGAIN = 2.0
"""Seconds in which a second Esc goes back although the composer holds text."""

HELD = 4 * WINDOW
"""Messages read when the chat opens or reloads; older ones are read as you scroll up."""

Updates = Callable[[], AsyncIterator[StepUpdate]]
"""Starts a step's stream: `tavern.steps.send(...)`, `regenerate`, `continue_reply` or `impersonate`."""

_SWIPE = Binding.Group("Swipe")


@dataclass(frozen=True)
class ChatState:
    """What the chat shows of the database, read in one worker run: the newest messages, the
    playthrough's message count and the swipe indicator ("" when there is nothing to swipe)."""

    messages: list[MessageView]
    total: int
    swipe: str
    queued: list[InboxItemView] = field(default_factory=list)
    """The playthrough's inbox, in claim order (steers first)."""


def describe_failure(error: BaseException | None) -> tuple[str, str]:
    """(category, plain message) of a failed step: "authentication", "Invalid API key"."""
    if isinstance(error, ProviderError):
        return error.category, str(error)
    if isinstance(error, TavernError):
        return "error", str(error)
    return "internal", f"{type(error).__name__}: {error}" if error else "unknown failure"


class ChatScreen(MessageCursor, GroupChat, TavernScreen[None]):
    """Plays one playthrough: Enter sends, the reply streams in, Esc stops it (or goes back).

    The composer is multi-line (`widgets.composer`): shift+Enter or ctrl+J starts a new line, a
    paste keeps every line. While a reply streams, Enter queues the text in the playthrough's
    durable inbox and alt+Enter queues it as a steer; the queued items show above the composer,
    numbered. When the reply settles, the next step claims them all (steers first). ↑ on the
    empty composer edits the last queued item (↑ again the one before; Enter saves it, Esc
    leaves it as it was), or the last message you sent when nothing is queued; F9 cancels the
    item being edited (or the last one). The draft is kept per playthrough in the database, so
    Esc, other screens and restarts keep it.

    Keys: ctrl+←/ctrl+→ swipe the last message (→ past the last reply generates a new one;
    with text in the prompt they move by word instead), ctrl+r regenerates the last reply,
    F3 continues it, F4 has the model write the person's next line into the composer, to edit
    and send (`[tui] impersonate_direct`: posted at once; Enter on the empty prompt then answers
    it), F5 opens the branch tree, F2 the world books, F6 the strategy and preset,
    F7 the requests sent (trace), F8 the persona and its nominations. In a group chat
    (`group_round`) a line plays a round, one reply per member the turn order picks; ctrl+b or
    alt+N has a member speak now, ctrl+n mutes one. On a narrow terminal the
    footer leaves out the less used keys (`FOOTER_DROP`); the command palette lists them all.

    A turn with tools (issue 19) shows each call as one line (Enter or a click expands it to
    its arguments and result) and streams the next step's reply in a new box; a call the config
    does not allow is asked about in `ToolAskScreen` (allow once / always / refuse).

    Every step runs in one async worker that only posts Messages; the handlers here touch
    widgets. Every other service call runs in a thread worker (`TavernScreen.call`). Whatever
    the outcome, the stored messages are re-read afterwards, so what is shown is what the
    database holds (a stopped or failed reply stays visible, marked).
    """

    DEFAULT_CSS = """
    /* Toasts sit top-right, under the title: bottom-right (Textual's place) covers the composer. */
    ChatScreen ToastRack { dock: top; align: right top; margin-bottom: 0; margin-top: 1; max-height: 60%; }
    ChatScreen.-narrow Toast { max-width: 75%; }
    """

    BINDINGS = [
        *CURSOR_BINDINGS,  # the message cursor (alt+↑/↓, then e d b c [ ] y t; its Esc first)
        Binding("escape", "stop", "Stop", id="chat.stop"),
        Binding("escape", "back", "Back", id="chat.back", show=False),  # the prompt says so; room for F8
        Binding("ctrl+o", "load_earlier", "Earlier messages", id="chat.load_earlier"),
        # Priority, because the focused prompt binds ctrl+←/→ to word moves; check_action hands
        # them back to it while the prompt holds text.
        Binding("ctrl+left", "swipe(-1)", "Swipe ←", id="chat.swipe_left", priority=True, group=_SWIPE),
        Binding("ctrl+right", "swipe(1)", "Swipe →", id="chat.swipe_right", priority=True, group=_SWIPE),
        Binding("ctrl+r", "regenerate", "Regen", id="chat.regenerate", tooltip="Regenerate the last reply"),
        # F-keys, not ctrl+e/ctrl+w…: Input keeps those for editing the line.
        Binding("f3", "continue", "Continue", id="chat.continue"),
        Binding("f4", "impersonate", "Impersonate", id="chat.impersonate"),
        Binding("f5", "tree", "Tree", id="chat.tree", tooltip="Branches: every variant"),
        Binding("f2", "world_books", "Lore", id="chat.world_books", tooltip="World books"),
        Binding("f6", "strategy", "Strategy", id="chat.strategy"),
        Binding("f7", "trace", "Trace", id="chat.trace"),
        Binding("f8", "persona", "Persona", id="chat.persona"),
        Binding("f9", "cancel_queued", "Cancel queued", id="chat.cancel_queued"),
        # Not in the footer (it is full at 80 columns); the command palette lists them.
        Binding("ctrl+delete", "delete_swipe", "Delete swipe", id="chat.delete_swipe", show=False,
                tooltip="Delete the shown swipe of the last reply, keeping the others"),
        Binding("f11", "variables", "Variables", id="chat.variables", show=False,
                tooltip="Macro variables and their history"),
        Binding("ctrl+g", "state", "State", id="chat.state",
                tooltip="MVU state: stat_data and what the last reply changed"),
        Binding("f10", "compact", "Compact", id="chat.compact", show=False,
                tooltip="Summarise the oldest messages into one summary (the originals stay in the log)"),
        Binding("f12", "edit_summary", "Edit summary", id="chat.edit_summary", show=False,
                tooltip="Edit a summary (the focused one, else choose)"),
        # Priority: the focused composer must not take it (issue 20: ctrl+f is the search everywhere).
        Binding("ctrl+f", "app.search", "Search", id="chat.search", show=False, priority=True,
                tooltip="Find a line in any chat, on any branch"),
        Binding("pageup", "scroll_transcript(-1)", "Page up", id="chat.page_up", show=False),
        Binding("pagedown", "scroll_transcript(1)", "Page down", id="chat.page_down", show=False),
        *GROUP_BINDINGS,  # group chats only (hidden elsewhere): speak now, mute
    ]

    COMMANDS: ClassVar[set[ProviderSource]] = {ScreenKeys}

    FOOTER_DROP = ("quit", "load_earlier", "state", "persona", "trace", "strategy", "speak", "world_books", "tree")
    """The keys the footer hides first on a narrow terminal: the panes before the keys of play
    (issue 21 item 2: 80 columns keeps Swipe, Regen, Continue and Impersonate, and, while a reply
    streams, Stop); every key still works, the palette key says where help is (F1), and the
    command palette (ctrl+p) lists them by name."""

    generating: reactive[bool] = reactive(False, bindings=True)
    """True while a reply streams; switches Esc between Stop and Back."""

    transcript = getters.query_one("#transcript", Transcript)
    status = getters.query_one("#status", StatusLine)
    prompt = getters.query_one("#prompt", Composer)
    inbox_strip = getters.query_one("#inbox", InboxStrip)
    members = getters.query_one("#members", MemberStrip)

    def __init__(self, tavern: Tavern, playthrough_id: int, *, typed: str = "", send: str = "",
                 focus: tuple[tuple[int, int], ...] = ()) -> None:
        super().__init__(tavern, playthrough_id)
        self._focus = focus  # a search hit's (session, seq) refs: the cursor goes to the first shown
        self._typed = typed  # keys typed on the home screen while this chat was being opened
        self._send_on_open = send  # an opening draft's first line (issue 20), sent once the chat is shown
        self.playthrough_id: int = playthrough_id
        self.playthrough: PlaythroughView | None = None
        self._reply: MessageBox | None = None
        self._generation = "send"
        self._started = False  # the running step got as far as ReplyStarted
        self._before: set[tuple[int, int]] = set()  # refs shown when the step began
        self._prompt_empty = True
        self._token_timer: Timer | None = None
        self._confirmed_secret: str | None = None  # refused text a second Enter sends anyway
        self._editing: str | None = None  # id of the queued item the composer is editing
        self._preset_names: dict[int, str] = {}  # preset id → name, for the title
        self._held_draft = ""  # the draft put aside while a queued item is edited
        self._draft_timer: Timer | None = None
        self._watch: Timer | None = None
        self._auto_claim = False  # the step that just ended settled: claim what was queued meanwhile
        self._esc_armed = False  # Esc was pressed once with text in the composer (issue 21 item 4)
        self._into_composer = False  # the running impersonation fills the composer (issue 21 item 3)
        self._settled_text = ""  # the text of the step's settled reply (ReplySettled)
        # The card's regex-script question (asked once per character per run): sends wait for the answer.
        self._allowance = ScriptAllowance(self, allowed=self._scripts_allowed)

    def compose(self) -> ComposeResult:
        yield ScreenTitle("", id="chat-title", markup=False)
        yield Transcript(id="transcript")
        yield InboxStrip(id="inbox")
        yield MemberStrip(id="members")
        yield Composer(placeholder=PLACEHOLDER.format(user="you"), id="prompt", classes="pane")
        yield StatusLine(self.tavern.provider_label, id="status")
        yield FitFooter(drop=self.FOOTER_DROP)

    def on_mount(self) -> None:
        self.tavern.tools.set_asker(self._ask_tool)  # the guard asks here (the CLI refuses instead)
        # Focus first: keys typed while the screen is pushed and the chat is read land here.
        self.prompt.focus()
        if self._typed:
            self.prompt.insert(self._typed)
        self.call(self._open, title="Cannot open the playthrough", then=self._opened, failed=lambda _: self.dismiss())

    def on_key(self, event: events.Key) -> None:
        """A printable key with nothing focused (the screen is still being set up) goes into
        the composer rather than being lost."""
        if self.focused is None and event.is_printable and event.character and self.is_mounted:
            self.prompt.focus()
            self.prompt.insert(event.character)
            event.stop()

    def _open(self) -> tuple[PlaythroughView, ChatState, str, GroupView | None]:
        # In the worker: opening recovers an interrupted step and pins the persona (writes).
        view = self.tavern.playthroughs.open_playthrough(self.playthrough_id)
        return (view, self._read_state(view.message_count), self.tavern.inbox.draft(self.playthrough_id),
                self.tavern.groups.group_of(self.playthrough_id))

    async def _opened(self, opened: tuple[PlaythroughView, ChatState, str, GroupView | None]) -> None:
        view, state, draft, group = opened
        self.playthrough = view
        await self.show_group(group)  # before the transcript: its boxes take the members' colours
        self.refresh_members()
        self._update_title(view)
        self.prompt.placeholder = PLACEHOLDER.format(user=markup_literal(view.user_name))  # a str is markup
        if draft:  # the kept draft first, then whatever was typed while the chat opened
            typed = self.prompt.value
            self.prompt.value = f"{draft}\n{typed}" if typed else draft
        self.inbox_strip.show(state.queued)
        self.transcript.fetch = self._fetch
        await self.transcript.show(state.messages, view.message_count)
        self._update_tokens()
        self.status.swipe = state.swipe
        self.status.ooc = view.ooc  # read with the view, off the loop
        self.refresh_bindings()
        self.call_after_refresh(self._warm_world_info)  # the transcript paints first (issue 22)
        self._allowance.check(view.character_id, view.character_name)  # before any send goes out
        self._send_opening_line()
        if self._focus:
            refs, self._focus = self._focus, ()
            self.call(self._index_of, refs, title="Cannot find the message",
                      then=lambda found, refs=refs: self._focus_message(found, refs))

    def _index_of(self, refs: tuple[tuple[int, int], ...]) -> tuple[int, int] | None:
        # In the worker: where the message is on the (now active) path, as (index, total).
        messages = self.tavern.playthroughs.messages(self.playthrough_id)
        where = {message.ref: index for index, message in enumerate(messages)}
        found = next((where[ref] for ref in refs if ref in where), None)
        return None if found is None else (found, len(messages))

    async def _focus_message(self, found: tuple[int, int] | None, refs: tuple[tuple[int, int], ...]) -> None:
        """Page the transcript to a search hit and put the message cursor on it (found by its ref:
        the stored message count the transcript numbers from can be off)."""
        if found is None:
            self.notify("That message is not on this chat's path any more.", severity="warning")
            return
        box = await self.transcript.page_to_ref(refs)
        if box is not None:
            self._show_cursor(box)
            self.transcript.scroll_box_into_view(box, top=True)

    def _scripts_allowed(self, done: Callable[[], None]) -> None:
        async def reshow(state: ChatState) -> None:
            await self._reshow(state)
            done()  # a held send starts after the rebuild, never inside it

        self.call(self._read_state, title="Cannot read the chat", then=reshow, failed=lambda _: done())

    async def _reshow(self, state: ChatState) -> None:
        # Every message may now show differently (display scripts): rebuild the window.
        await self.transcript.show(state.messages, state.total)

    def _send_opening_line(self) -> None:
        """Send the line an opening draft's first send was given (its checks passed before the
        draft became this playthrough), once, as Enter on it would."""
        text, self._send_on_open = self._send_on_open, ""
        if text:
            self._allowance.then(lambda: self._start(
                "send", lambda: self.tavern.steps.send(self.playthrough_id, text, allow_secrets=True), text))

    def on_unmount(self) -> None:
        self.tavern.tools.set_asker(None)
        self.tavern.steps.release_heap()  # no I/O (gc.unfreeze): the warm-up froze the heap with this screen in it

    @work(thread=True, exclusive=True, group="lore", exit_on_error=False, description="prepare world info")
    def _warm_world_info(self) -> None:
        # Builds the books' key indexes after first paint, so the first send does not pay for it.
        try:
            self.tavern.steps.warm_world_info(self.playthrough_id)
        except TavernError:
            pass  # a broken book is reported by the step that uses it

    def _update_title(self, view: PlaythroughView | None = None) -> None:
        """Show the playthrough's character, person, strategy and preset in the title (re-read
        from the service when `view` is not given)."""
        if view is None:
            self.call(self.tavern.playthroughs.playthrough, self.playthrough_id, title="Cannot read the playthrough",
                      then=self._update_title)
            return
        self.playthrough = view
        if view.preset_id is None:
            preset = "default preset"
        elif self._preset_names.get(view.preset_id):
            preset = f"preset {self._preset_names[view.preset_id]}"
        else:  # its name is read in a worker; the id stands in until then
            preset = f"preset #{view.preset_id}"
            self.call(self.tavern.presets.find_preset, str(view.preset_id), title="Cannot read the preset",
                      severity="warning", then=lambda found: self._preset_named(view, found.id, found.name))
        name = self.group.name if self.group is not None else view.character_name
        self.query_one("#chat-title", Static).update(
            f"{name} · #{view.id} · playing as {view.user_name} · {view.strategy} · {preset}")
        self.prompt.placeholder = PLACEHOLDER.format(user=markup_literal(view.user_name))  # a persona switch too

    def _preset_named(self, view: PlaythroughView, preset_id: int, name: str) -> None:
        self._preset_names[preset_id] = name or f"#{preset_id}"
        if self.playthrough is view:  # not replaced by a newer read meanwhile
            self._update_title(view)

    def settings_changed(self) -> None:
        """The settings screen saved (issue 21 item 1): show the new provider and the labels asked for."""
        self.status.provider = self.tavern.provider_label
        for box in self.transcript.boxes:
            box.show_extras()

    def watch_generating(self, generating: bool) -> None:
        self.set_class(generating, "-generating")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CURSOR_ACTIONS:
            return self.cursor_allows(action)
        if action == "stop":
            return self.generating
        if action == "back":
            return not self.generating
        if action == "load_earlier":
            return self.is_mounted and self.transcript.earlier_count > 0
        if action == "swipe":
            # None (shown dimmed) also lets the key fall through to the prompt's word move.
            return None if self.generating or not self._prompt_empty else True
        if action in ("regenerate", "continue", "impersonate", "tree", "strategy", "trace", "persona", "delete_swipe",
                      "state"):
            return None if self.generating else True
        if action == "cancel_queued":
            return self.is_mounted and bool(self.inbox_strip.items)
        if action in GROUP_ACTIONS:
            return self.group_allows(action, parameters)
        return True

    def _fetch(self, last: int) -> list[MessageView]:
        """The newest `last` messages (one bounded read, however long the chat); call it in a worker
        (the transcript calls it when Ctrl+O mounts earlier messages)."""
        return self.tavern.playthroughs.messages(self.playthrough_id, last=last)

    def _read_state(self, total: int | None = None) -> ChatState:
        """Read what the chat shows (call it in a worker); `total` is the message count when the
        caller has just read it. Raises the service's `TavernError`."""
        messages = self._fetch(HELD)
        if total is None:
            total = self.tavern.playthroughs.playthrough(self.playthrough_id).message_count
        queued = self.tavern.inbox.pending(self.playthrough_id)
        try:
            state = self.tavern.timeline.swipe_state(self.playthrough_id)
        except TavernError:
            return ChatState(messages, total, "", queued)
        shown, count = state.position
        swipe = "" if state.ref is None or count <= 1 else \
            f"{'greeting' if state.greeting else 'swipe'} {shown}/{count}"
        return ChatState(messages, total, swipe, queued)

    def _update_tokens(self) -> None:
        # Debounced: the estimate reads the whole history, and a burst of swipes should repaint
        # first and count once.
        if self._token_timer is not None:
            self._token_timer.stop()
        self._token_timer = self.set_timer(TOKEN_DELAY, self._estimate_tokens)

    @work(thread=True, exclusive=True, group="tokens", exit_on_error=False, description="estimate tokens")
    def _estimate_tokens(self) -> None:
        # Reads the whole history: off the UI thread, so a swipe repaints before it is done.
        try:
            gauge: dict | None = self.tavern.steps.context_gauge(self.playthrough_id)
        except TavernError:
            gauge = None
        self.app.call_from_thread(setattr, self.status, "tokens", gauge["tokens"] if gauge else None)
        self.app.call_from_thread(setattr, self.status, "gauge", gauge)

    def _reload(self) -> None:
        """Re-read what the database holds (after a swipe or the tree) in a worker, then show it."""
        self.call(self._read_state, title="Cannot read the chat", then=self._show_state)

    async def _show_state(self, state: ChatState) -> None:
        """Show what the database holds now, rebuilding the transcript only where it differs."""
        earlier = self.transcript.earlier_count
        with self.app.batch_update():  # one layout pass for the boxes and the counter
            await self.transcript.sync(state.messages, state.total)
            self._update_tokens()
            self.status.swipe = state.swipe
            self._show_queue(state.queued)
            if (self.transcript.earlier_count > 0) != (earlier > 0):
                self.refresh_bindings()  # "Earlier messages" came or went (the footer recomposes)

    # -- sending --------------------------------------------------------------------------

    @on(TextArea.Changed, "#prompt")
    def _prompt_changed(self, event: TextArea.Changed) -> None:
        # Only when emptiness flips: the footer re-renders on every refresh_bindings.
        empty = not self.prompt.value
        if empty != self._prompt_empty:
            self._prompt_empty = empty
            self.refresh_bindings()
        if self._editing is None:  # a queued item being edited is not the draft
            if self._draft_timer is not None:
                self._draft_timer.stop()
            self._draft_timer = self.set_timer(DRAFT_DELAY, self._save_draft)

    def _save_draft(self) -> None:
        """Keep the composer's text as this playthrough's draft (in a worker; a text holding a
        secret is not written, `InboxService.save_draft`)."""
        text = self.prompt.value if self._editing is None else self._held_draft
        self.call(self.tavern.inbox.save_draft, self.playthrough_id, text, title="Cannot keep the draft",
                  group="draft")

    @on(Composer.Submitted, "#prompt")
    def _submitted(self, event: Composer.Submitted) -> None:
        text = event.text.strip()
        if self._editing is not None:
            self._save_queued_edit(self._editing, text)
            return
        if self.generating and not text:
            return
        if not text and self.inbox_strip.items:
            # Queued lines left over (a stopped reply, a restart, another window): answer them.
            self._start("send", self.queued_updates())
            return
        if not text and self.group is not None:  # the members go on by themselves
            self._start("generate", self.round_updates(""))
            return
        if not text:
            # As SillyTavern: an empty send after the person's last line (e.g. an impersonated
            # one) asks for the reply to it.
            self.call(self.tavern.playthroughs.messages, self.playthrough_id, last=1, title="Cannot read the chat",
                      then=self._reply_to_last)
            return
        allow = text == self._confirmed_secret  # Enter again on the same unchanged text
        try:  # on the loop on purpose: a text scan (no I/O), and a refusal must keep the prompt
            self.tavern.playthroughs.check_message(text, allow_secrets=allow)
        except SecretRefused as exc:
            self._give_back(event.text)  # a refused text stays in the prompt
            self._refuse_secret(text, exc)
            return
        self._confirmed_secret = None
        if self.generating:
            # A reply streams: the text waits in the durable inbox; the next step claims it.
            self.call(self.tavern.inbox.add, self.playthrough_id, text, steer=event.steer, allow_secrets=allow,
                      title="Cannot queue the message", then=lambda _: self._refresh_queue())
            return
        # Another window or command replying here: the text is queued and goes once that settles.
        updates = self.round_updates(text, allow) if self.group is not None else (
            lambda: self.tavern.steps.send_or_queue(self.playthrough_id, text, steer=event.steer,
                                                    allow_secrets=allow, queued=self._queued_elsewhere))
        self._allowance.then(lambda: self._start("send", updates, text))

    def _give_back(self, text: str) -> None:
        """Put a text Enter took (the composer empties itself) back in the composer, before
        whatever was typed since."""
        self.prompt.value = text + self.prompt.value

    def _queued_elsewhere(self, item: InboxItemView) -> None:
        self.notify(f"A reply is being written in this playthrough by another tavern window or command: your "
                    f"message is queued ({item.position}) and goes once it settles.", title="Queued", timeout=6)
        self._refresh_queue()

    # -- the inbox --------------------------------------------------------------------------

    def _show_queue(self, items: list[InboxItemView]) -> None:
        had = bool(self.inbox_strip.items)
        if self._editing is not None and all(i.id != self._editing for i in items):
            self._leave_edit()  # claimed or canceled meanwhile (elsewhere too)
        self.inbox_strip.show(items, self._editing)
        if had != bool(items):
            self.refresh_bindings()  # "Cancel queued" came or went

    def _refresh_queue(self) -> None:
        """Re-read the inbox (in a worker) and show it above the composer."""
        self.call(self.tavern.inbox.pending, self.playthrough_id, title="Cannot read the inbox",
                  then=self._show_queue)

    @on(Composer.EditPrevious, "#prompt")
    def _edit_previous(self, event: Composer.EditPrevious) -> None:
        items = self.inbox_strip.items
        if not items:
            if self._editing is None:
                self._edit_last_sent()
            return
        index = next((n for n, i in enumerate(items) if i.id == self._editing), len(items))
        if index == 0:
            return
        if self._editing is None:
            self._held_draft = self.prompt.value
        item = items[index - 1]
        self._editing = item.id
        self.prompt.editing_first_line_up = True
        self.prompt.value = item.text
        self.inbox_strip.show(items, item.id)

    def _leave_edit(self) -> None:
        """Stop editing a queued item; the composer gets its draft back."""
        self._editing = None
        self.prompt.editing_first_line_up = False
        self.prompt.value = self._held_draft
        self._held_draft = ""
        self.inbox_strip.show(self.inbox_strip.items)

    def _save_queued_edit(self, item_id: str, text: str) -> None:
        if not text:
            self.notify("An edit cannot be empty: F9 cancels the item instead.", severity="warning")
            return
        self._leave_edit()
        self.call(self.tavern.inbox.edit, self.playthrough_id, item_id, text, title="Cannot edit the queued message",
                  severity="warning", then=lambda _: self._refresh_queue(), failed=lambda _: self._refresh_queue())

    def action_cancel_queued(self) -> None:
        """Cancel the queued item being edited, or else the last one; it never reaches the model."""
        items = self.inbox_strip.items
        if not items:
            return
        item_id = self._editing or items[-1].id
        if self._editing is not None:
            self._leave_edit()
        self.call(self.tavern.inbox.cancel, self.playthrough_id, item_id, title="Cannot cancel the queued message",
                  severity="warning", then=lambda item: self._cancelled(item), failed=lambda _: self._refresh_queue())

    def _cancelled(self, item: InboxItemView) -> None:
        self.notify(f"Canceled queued message {item.position}.", timeout=3)
        self._refresh_queue()

    def _edit_last_sent(self) -> None:
        """↑ with nothing queued: edit your last message (the fork-preserving edit the tree
        makes: a surface replacement; the original stays in the log)."""
        if self.generating:
            return
        mine = [b.view for b in self.transcript.boxes if b.view is not None and b.view.role == "user"]
        if not mine:
            return
        last = mine[-1]

        def save(edited: str | None) -> None:
            if edited is not None and edited != last.content:
                self.call(self.tavern.timeline.edit_message, self.playthrough_id, last.ref, edited,
                          title="Cannot edit", then=lambda _: self._reload())

        self.app.push_screen(EditMessageScreen(last.speaker, last.content), save)

    def _reply_to_last(self, messages: list[MessageView]) -> None:
        if messages and messages[-1].role == "user" and not self.generating:
            self._start("reply", lambda: self.tavern.steps.reply(self.playthrough_id))
        elif (not messages or messages[-1].source == OPENING_SOURCE) and not self.generating:
            # An empty chat or just the greeting: the model may speak first (SillyTavern's Send
            # with an empty box is a normal generation; no turn of the person is made up).
            self._start("generate", lambda: self.tavern.steps.generate(self.playthrough_id))

    def _refuse_secret(self, text: str, refused: SecretRefused) -> None:
        """Say what kind of secret the message holds (never the secret) and, when the person may
        override, that Enter on the same text sends it anyway."""
        if refused.configured:
            self._confirmed_secret = None
            self.notify("The message contains your configured provider API key. It is never stored or "
                        "sent to the model: remove it.", title="Not sent", severity="warning", timeout=10)
            return
        self._confirmed_secret = text if refused.overridable else None
        then = ("press Enter again on the same text to send it anyway, or remove it" if refused.overridable
                else "remove it")
        self.notify(f"The message contains what looks like {secret_label(refused.kind)}; it was not sent: {then}.",
                    title="Not sent: possible secret", severity="warning", timeout=10)

    def _start(self, generation: str, updates: Updates, text: str = "") -> None:
        """Run one step (`generation` names it for the transcript) in the generation worker."""
        self._reply = None
        self.turn = None
        self._generation = generation
        self._started = False
        self._settled_text = ""
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
        await self.settle_member(message.event)

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
            # Not applicable here (continue without a reply…): a plain word, not an error state.
            self.status.state, self.status.detail = "idle", ""
            self.notify(str(worker.error), title=f"Cannot {self._generation}", severity="warning")
            mark = None
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

    # -- actions --------------------------------------------------------------------------

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

    def action_tree(self) -> None:
        """Open the branch tree of this playthrough; the chat reloads when it closes."""
        self.app.push_screen(TreeScreen(self.tavern, self.playthrough_id), self._tree_closed)

    def _tree_closed(self, playthrough_id: int | None) -> None:
        if playthrough_id is not None and playthrough_id != self.playthrough_id:
            # A new playthrough from a message: it replaces this chat (Esc there goes home).
            self.dismiss()
            self.app.post_message(PlaythroughChosen(playthrough_id))
            return
        self._reload()

    def action_strategy(self) -> None:
        """Open the strategy and preset pane; the title is re-read when it closes."""
        self.app.push_screen(StrategyScreen(self.tavern, self.playthrough_id), lambda _: self._update_title())

    def action_trace(self) -> None:
        """Open the requests this playthrough sent; the chat reloads when Enter there jumped."""
        self.app.push_screen(TraceScreen(self.tavern, self.playthrough_id), self._trace_closed)

    def _trace_closed(self, jumped: bool | None) -> None:
        if jumped:
            self._reload()

    def action_persona(self) -> None:
        """Open the persona pane on this playthrough; the title is re-read when it closes (the name may change)."""
        self.app.push_screen(PersonaScreen(self.tavern, self.playthrough_id), lambda _: self._update_title())

    def action_state(self) -> None:
        """Open the state pane (issue 18): MVU's stat_data and what the last reply changed."""
        self.app.push_screen(StateScreen(self.tavern, self.playthrough_id))

    def action_variables(self) -> None:
        """Open the variables pane (issue 17): the variables now and their history per message."""
        self.app.push_screen(VariablesScreen(self.tavern, self.playthrough_id))

    # -- compaction (issue 16) ------------------------------------------------------------

    def action_compact(self) -> None:
        """Summarise the oldest messages (all but the newest ten) into one summary node; the
        status line shows the progress; the transcript and the gauge follow."""
        if self.generating:
            return
        self.generating = True
        self.status.detail, self.status.state = "asking the model for a summary…", "compacting"
        self._compact()

    @work(exclusive=True, group=GENERATION, exit_on_error=False, description="compact the playthrough")
    async def _compact(self) -> None:
        # On the loop: the provider streams here (its client lives on this loop); the
        # service's reads and writes run in threads.
        state = {"part": ""}

        def progress(chars: int) -> None:
            self.status.detail = f"summary{state['part']}: {chars:,} chars"

        def on_part(done_messages: int, total: int) -> None:
            state["part"] = f" {done_messages:,}/{total:,}" if done_messages else ""

        try:
            done = await self.tavern.compaction.compact(self.playthrough_id, progress=progress, on_part=on_part)
        except Exception as exc:  # noqa: BLE001 - any failure is shown; nothing was stored
            self.status.state, self.status.detail = "error", f"compaction: {exc}"
            self.notify(str(exc), title="Cannot compact", severity="error", timeout=10)
        else:
            self.status.state, self.status.detail = "idle", ""
            self.notify(f"{done.covers} messages replaced by a summary (the originals stay in the log).",
                        title="Compacted")
        finally:
            self.generating = False
        self._reload()

    def action_edit_summary(self) -> None:
        """Edit a summary (a replacement of it; the earlier text stays in the log): the one that
        holds the focus (e.g. its originals' toggle, reached with Tab), else the only one shown,
        else the one chosen from a list of the summaries shown (newest highlighted)."""
        boxes = [b for b in self.transcript.boxes if b.view is not None and b.view.summary is not None]
        if not boxes:
            self.notify("No summary in this chat yet; compact first (F10).", title="Edit summary")
            return
        focused = self.focused
        held = next((a for a in (focused.ancestors_with_self if focused is not None else ())
                     if isinstance(a, MessageBox) and a in boxes), None)
        if held is not None or len(boxes) == 1:
            self._edit_summary(held or boxes[0])
            return

        def chosen(index: int | None) -> None:
            if index is not None:
                self._edit_summary(boxes[index])

        labels = [f"{summary_title(b.view)} · {b.view.content[:60]}" for b in boxes if b.view is not None]
        self.app.push_screen(ChooseScreen("Edit which summary?", labels, selected=len(labels) - 1), chosen)

    def _edit_summary(self, box: MessageBox) -> None:
        view = box.view
        if view is None:
            return

        def save(edited: str | None) -> None:
            if edited is not None:
                self.call(self.tavern.timeline.edit_message, self.playthrough_id, view.ref, edited,
                          title="Cannot edit the summary", then=lambda _: self._reload())

        self.app.push_screen(EditMessageScreen("Summary", view.content), save)

    @on(Collapsible.Expanded, ".originals")
    def _show_originals(self, event: Collapsible.Expanded) -> None:
        """Fill a summary's originals section on first expand (read-only, marked not sent)."""
        section = event.collapsible
        box = next((a for a in section.ancestors if isinstance(a, MessageBox)), None)
        if box is None or box.view is None or section.query(".original"):
            return
        ref = box.view.ref

        async def fill(replaced: dict) -> None:
            lines = [Static(f"{o.speaker} ({event_label(o.ref)}, not sent): {o.content}", classes="original",
                            markup=False) for o in replaced.get(ref, [])]
            await section.query_one(Collapsible.Contents).mount_all(lines)

        self.call(self.tavern.compaction.replaced_views, self.playthrough_id, title="Cannot read the originals",
                  then=fill)

    def action_stop(self) -> None:
        """Leave the edit of a queued item, or else cancel the streaming reply; the service
        keeps the text received so far."""
        if self._editing is not None:
            self._leave_edit()
            return
        self.workers.cancel_group(self, GENERATION)

    def action_world_books(self) -> None:
        """Open the world-book pane on this playthrough (bindings here, tester on this chat)."""
        self.post_message(WorldBooksRequested(self.playthrough_id))

    def action_back(self) -> None:
        """Leave the edit of a queued item, or else return to the home screen; the draft is
        written first (Esc never throws typed text away). With text in the composer the first
        Esc only says so; a second one within `ESC_AGAIN` seconds goes back."""
        if self._editing is not None:
            self._leave_edit()
            return
        if self.prompt.value.strip() and not self._esc_armed:
            # Issue 21 item 4: Esc with text in the composer does not leave (a stray Esc while
            # typing); a second Esc does, and the text is kept as the draft either way.
            self._esc_armed = True
            self.set_timer(ESC_AGAIN, lambda: setattr(self, "_esc_armed", False))
            self.notify("Esc again goes back (your text is kept as a draft).", timeout=ESC_AGAIN)
            return
        self._esc_armed = False
        if self._draft_timer is not None:
            self._draft_timer.stop()
        self.call(self.tavern.inbox.save_draft, self.playthrough_id, self.prompt.value, title="Cannot keep the draft",
                  then=lambda _: self.dismiss(), failed=lambda _: self.dismiss())

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


def secret_label(kind: str) -> str:
    """A secret kind for people: "api_key" → "an API key", "jwt" → "a JWT"."""
    return {"api_key": "an API key", "bearer_token": "a bearer token", "private_key": "a private key",
            "jwt": "a JWT (JSON web token)", "password": "a password"}.get(kind, f"a {kind.replace('_', ' ')}")


def _new_last(messages: list[MessageView], role: str, before: set[tuple[int, int]]) -> MessageView | None:
    """What the step that just ended stored: the last message, when it has the streamed role, is
    not the greeting and was not shown before the step."""
    if messages and messages[-1].role == role and messages[-1].source != "opening" and messages[-1].ref not in before:
        return messages[-1]
    return None
