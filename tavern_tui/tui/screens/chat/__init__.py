"""Provides `ChatScreen`: one playthrough's transcript, the prompt, and the streamed reply.

The screen holds the layout, the keys, the navigation to the panes and what it reads of the
database. Its parts, one a module: the screen's own opening and reading (mixins of it),
and the controls it holds (plain objects that reach it through `host.ChatHost`, which mypy checks
the screen against, and to which the screen's key actions and Message handlers hand over):

- `opening` (`ChatOpening`): opening the playthrough, and the title;
- `reading` (`ChatState`, `ChatReading`): what the chat shows of the database, and computing the
  token gauge the status line (`widgets.status_line.StatusLine`) asks for after a quiet moment;
- `sending` (`SendControl`, held as `sending`): what Enter does with the composer's text, and
  the draft;
- `queue` (`QueueControl`, held as `inbox`): the inbox strip's service calls; the strip
  (`widgets.inbox_queue.QueueEditor`) owns editing a queued line and posts what is to be stored;
- `reply` (`ReplyControl`, held as `replies`): one step run in the generation worker, its
  Messages handed to the transcript's side, and the transcript reconciled with the database when
  it ends;
- `stream` (`ReplyStream`): the running step's state, in one object the screen holds
  (`reply_stream`), and what the transcript shows of it; it does no I/O;
- `compaction` (`CompactionControl`, held as `compaction`): compacting the playthrough and
  editing its summaries;
- and, beside the package, `message_cursor` (`MessageCursor`, a mixin) and `group_round`
  (`GroupControl`, held as `groups`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import events, getters, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import TextArea
from textual.worker import Worker, WorkerState

from tavern_tui.tui.labels import speaking_as
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
from tavern_tui.tui.screens.base import ESC_AGAIN, TavernScreen
from tavern_tui.tui.screens.chat.compaction import CompactionControl
from tavern_tui.tui.screens.chat.opening import PLACEHOLDER, PLACEHOLDERS, ChatOpening
from tavern_tui.tui.screens.chat.queue import QueueControl
from tavern_tui.tui.screens.chat.reading import FOLLOW_EVERY, HELD, WATCH_EVERY, ChatReading, ChatState
from tavern_tui.tui.screens.chat.reply import GENERATION, ReplyControl, Updates, describe_failure
from tavern_tui.tui.screens.chat.sending import DRAFT_DELAY, SendControl, secret_label
from tavern_tui.tui.screens.chat.stream import ReplyStream
from tavern_tui.tui.screens.group_round import GROUP_ACTIONS, GROUP_BINDINGS, GroupControl, fit_speak_keys
from tavern_tui.tui.screens.message_cursor import CURSOR_ACTIONS, CURSOR_BINDINGS, MessageCursor
from tavern_tui.tui.screens.persona import PersonaScreen
from tavern_tui.tui.screens.regex_allowance import ScriptAllowance
from tavern_tui.tui.screens.state import StateScreen
from tavern_tui.tui.screens.strategy import StrategyScreen
from tavern_tui.tui.screens.trace import TraceScreen
from tavern_tui.tui.screens.tree import TreeScreen
from tavern_tui.tui.screens.variables import VariablesScreen
from tavern_tui.tui.widgets.composer import Composer
from tavern_tui.tui.widgets.fit_footer import FitFooter, ProviderSource, ScreenKeys
from tavern_tui.tui.widgets.inbox_queue import QueueEditor
from tavern_tui.tui.widgets.member_strip import MemberStrip
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.tui.widgets.screen_title import ScreenTitle
from tavern_tui.tui.widgets.status_line import TOKEN_DELAY, StatusLine
from tavern_tui.tui.widgets.transcript import Transcript
from tavern_tui.views import PlaythroughView

if TYPE_CHECKING:
    from tavern_tui.service import Tavern

__all__ = ["DRAFT_DELAY", "ESC_AGAIN", "GENERATION", "HELD", "PLACEHOLDER", "TOKEN_DELAY", "WATCH_EVERY",
           "ChatScreen", "ChatState", "ReplyStream", "Updates", "describe_failure", "secret_label"]

_SWIPE = Binding.Group("Swipe")


class ChatScreen(MessageCursor, ChatOpening, ChatReading, TavernScreen[None]):
    """Plays one playthrough: Enter sends, the reply streams in, Esc stops it (or goes back).

    The composer is multi-line (`widgets.composer`): shift+Enter or ctrl+J starts a new line, a
    paste keeps every line. While a reply streams, Enter queues the text in the playthrough's
    durable inbox and alt+Enter queues it as a steer; the queued items show above the composer,
    numbered. When the reply settles, the next step claims them all (steers first). ↑ on the
    empty composer edits the last queued item (↑ again the one before; Enter saves it, Esc
    leaves it as it was), or the last message you sent when nothing is queued; F9 cancels the
    item being edited (or the last one); the strip (`widgets.inbox_queue`) keeps the edit and posts
    what is to be stored. The draft is kept per playthrough in the database, so
    Esc, other screens and restarts keep it; a draft still waiting to be written when the chat
    closes or the app quits is written then (the app waits for it).

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

    Every step runs in one async worker on the screen that only posts Messages; the screen's
    handlers pass them to its `ReplyControl` (`replies`), which hands them to `reply_stream`
    (`ReplyStream`), the running step's state and its display in the transcript. A compaction runs
    in the same worker group, so the two never run at once. Every other service call runs in a
    thread worker (`TavernScreen.call`). Whatever the outcome, the stored messages are re-read
    afterwards, so what is shown is what the database holds (a stopped or failed reply stays
    visible, marked).
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
    queue = getters.query_one("#inbox", QueueEditor)
    members = getters.query_one("#members", MemberStrip)

    def __init__(self, tavern: Tavern, playthrough_id: int, *, typed: str = "", send: str = "",
                 focus: tuple[tuple[int, int], ...] = ()) -> None:
        super().__init__(tavern, playthrough_id)
        self._focus = focus  # a search hit's (session, seq) refs: the cursor goes to the first shown
        self._typed = typed  # keys typed on the home screen while this chat was being opened
        self._send_on_open = send  # an opening draft's first line (issue 20), sent once the chat is shown
        self.playthrough_id: int = playthrough_id
        self.playthrough: PlaythroughView | None = None
        self.plain = False  # messages show as stored (`ChatState.plain`): a reply may settle early
        self._plain_unless_mvu: bool | None = None  # plain but for MVU state, not looked at yet
        self.reply_stream: ReplyStream  # the running step's state and display (made in `compose`)
        self._preset_names: dict[int, str] = {}  # preset id → name, for the title
        self._watch: Timer | None = None  # while another window or command writes a reply here
        self._revision: tuple[int, int] | None = None  # the chat's revision as last shown (`_follow_tick`)
        self._data_seen: int | None = None  # the database's data version at the last follow tick
        self._auto_claim = False  # the step that just ended settled: claim what was queued meanwhile
        # The card's regex-script question (asked once per character per run): sends wait for the answer.
        self.allowance = ScriptAllowance(self, allowed=self._scripts_allowed)
        self.sending = SendControl(self)  # Enter, the queue while a reply streams, the draft
        self.inbox = QueueControl(self)  # the inbox strip's reads, edits and cancels
        self.compaction = CompactionControl(self)  # F10, F12 and a summary's originals
        self.replies = ReplyControl(self)  # the step: started, streamed, settled, reconciled
        self.groups = GroupControl(self)  # a group chat's cast, rounds and keys
        self._speak_keys: dict[str, list[Binding]] | None = None  # alt+N as declared (`keep_speak_keys`)

    def compose(self) -> ComposeResult:
        yield ScreenTitle("", id="chat-title", markup=False)
        transcript = Transcript(id="transcript")
        self.reply_stream = ReplyStream(transcript, self.groups.reply_box)
        yield transcript
        prompt = Composer(hints=speaking_as(PLACEHOLDERS, "you"), id="prompt", classes="pane")
        self._strip = QueueEditor(prompt, id="inbox")  # queued items are edited in the composer
        yield self._strip
        yield MemberStrip(id="members")
        yield prompt
        yield StatusLine(self.tavern.provider_label, id="status")
        yield FitFooter(drop=self.FOOTER_DROP)

    def on_mount(self) -> None:
        self.tavern.tools.set_asker(self.replies.ask_tool)  # the guard asks here (the CLI refuses instead)
        # Focus first: keys typed while the screen is pushed and the chat is read land here.
        self.prompt.focus()
        if self._typed:
            self.prompt.insert(self._typed)
        self.call(self._open, title="Cannot open the playthrough", then=self._opened, failed=self._not_opened)
        self.set_interval(FOLLOW_EVERY, self._follow_tick)  # what other windows write shows here too

    def _not_opened(self, _error: BaseException) -> None:
        """The chat could not be opened (its error is shown): back to the list; what was typed
        into it meanwhile is kept for when it opens (`TavernApp.unsent`), not lost."""
        typed = self.prompt.value
        unsent = getattr(self.app, "unsent", None)
        if typed.strip() and isinstance(unsent, dict):
            unsent[self.playthrough_id] = typed
            self.notify("What you typed is kept: it is back in the message box when this chat opens.",
                        title="Kept", timeout=8)
        self.dismiss()

    def on_key(self, event: events.Key) -> None:
        """A printable key with nothing focused (the screen is still being set up), or with the
        message cursor on and no key of it (a trial's "ok" vanished), goes into the composer
        rather than being lost; the cursor leaves."""
        if not (event.is_printable and event.character and self.is_mounted):
            return
        if self.focused is None or (self.focused is self.transcript and event.key not in self.active_bindings):
            if self.cursor_ref is not None:
                self.action_cursor_leave()
            self.prompt.focus()
            self.prompt.insert(event.character)
            event.stop()

    def on_unmount(self) -> None:
        self.sending.keep_draft_on_close(self._strip)
        self.tavern.tools.set_asker(None)
        # The warm-up froze the heap with this screen in it: once the screen is gone, collect it
        # and freeze the rest again (`release_heap`), in a worker after the next screen painted.
        app, release = self.app, self.tavern.steps.release_heap
        app.call_after_refresh(lambda: app.run_worker(release, thread=True, group="heap", exclusive=True,
                                                      exit_on_error=False))

    def settings_changed(self) -> None:
        """The settings screen saved (issue 21 item 1): show the new provider and the labels asked for."""
        self.status.provider = self.tavern.provider_label
        for box in self.transcript.boxes:
            box.show_extras()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in CURSOR_ACTIONS:
            return self.cursor_allows(action)
        if action == "stop":
            return self.generating
        if action == "back":
            return not self.generating
        if action == "load_earlier":
            # Offered until the chat is read, so the footer builds the key with the others: most
            # chats have earlier messages, and a key that appears later rebuilds every key (and
            # lays the screen out again); one that goes away is only hidden.
            return self.playthrough is None or (self.is_mounted and self.transcript.earlier_count > 0)
        if action == "swipe":
            # None (shown dimmed) also lets the key fall through to the prompt's word move.
            return None if self.generating or not self.sending.prompt_empty else True
        if action in ("regenerate", "continue", "impersonate", "tree", "strategy", "trace", "persona", "delete_swipe",
                      "state"):
            return None if self.generating else True
        if action == "cancel_queued":
            return self.is_mounted and bool(self.queue.items)
        if action in GROUP_ACTIONS:
            return self.groups.allows(action, parameters)
        return True

    def help_skips(self, action: str) -> bool:
        """Keys F1 leaves out here: a group chat's, in a chat with one character."""
        return action in GROUP_ACTIONS and self.groups.group is None

    # -- actions --------------------------------------------------------------------------

    def action_tree(self) -> None:
        """Open the branch tree of this playthrough; the chat reloads when it closes."""
        self.app.push_screen(TreeScreen(self.tavern, self.playthrough_id), self._tree_closed)

    def _tree_closed(self, playthrough_id: int | None) -> None:
        if playthrough_id is not None and playthrough_id != self.playthrough_id:
            # A new playthrough from a message: it replaces this chat (Esc there goes home).
            self.dismiss()
            self.app.post_message(PlaythroughChosen(playthrough_id))
            return
        self.reload()

    def action_strategy(self) -> None:
        """Open the strategy and preset pane; the title is re-read when it closes."""
        self.app.push_screen(StrategyScreen(self.tavern, self.playthrough_id), lambda _: self._update_title())

    def action_trace(self) -> None:
        """Open the requests this playthrough sent; the chat reloads when Enter there jumped."""
        self.app.push_screen(TraceScreen(self.tavern, self.playthrough_id), self._trace_closed)

    def _trace_closed(self, jumped: bool | None) -> None:
        if jumped:
            self.reload()

    def action_persona(self) -> None:
        """Open the persona pane on this playthrough; the title is re-read when it closes (the name may change)."""
        self.app.push_screen(PersonaScreen(self.tavern, self.playthrough_id), lambda _: self._update_title())

    def action_state(self) -> None:
        """Open the state pane (issue 18): MVU's stat_data and what the last reply changed."""
        self.app.push_screen(StateScreen(self.tavern, self.playthrough_id))

    def action_variables(self) -> None:
        """Open the variables pane (issue 17): the variables now and their history per message."""
        self.app.push_screen(VariablesScreen(self.tavern, self.playthrough_id))

    # -- the step's keys and Messages (`ReplyControl`) ----------------------------------------

    def action_swipe(self, direction: int) -> None:
        """Show the last message's previous (-1) or next (+1) variant; past the last reply, generate one."""
        self.replies.swipe(direction)

    def action_delete_swipe(self) -> None:
        """Delete the shown swipe of the last reply, keeping the others."""
        self.replies.delete_swipe()

    def action_regenerate(self) -> None:
        """Generate a new variant of the last reply."""
        self.replies.regenerate()

    def action_continue(self) -> None:
        """Extend the last reply into a new variant of it."""
        self.replies.continue_reply()

    def action_impersonate(self) -> None:
        """Have the model write the person's next line (into the composer, or posted)."""
        self.replies.impersonate()

    async def on_reply_started(self, message: ReplyStarted) -> None:
        await self.replies.started(message)

    async def on_reply_called_tools(self, message: ReplyCalledTools) -> None:
        await self.replies.called_tools(message)

    async def on_tool_ran(self, message: ToolRan) -> None:
        await self.replies.tool_ran(message)

    async def on_reply_next_step(self, message: ReplyNextStep) -> None:
        await self.replies.next_step()

    def on_turn_limit_hit(self, message: TurnLimitHit) -> None:
        self.replies.turn_limit_hit(message)

    async def on_reply_delta(self, message: ReplyDelta) -> None:
        await self.replies.delta(message)

    async def on_reply_reasoning(self, message: ReplyReasoning) -> None:
        await self.replies.reasoning(message)

    async def on_reply_settled(self, message: ReplySettled) -> None:
        await self.replies.settled(message)

    @on(Worker.StateChanged)
    def _worker_changed(self, event: Worker.StateChanged) -> None:
        if event.worker.group == GENERATION and event.state in (
                WorkerState.SUCCESS, WorkerState.ERROR, WorkerState.CANCELLED):
            self.replies.finish(event.worker)

    # -- a group chat's keys (`GroupControl`) ---------------------------------------------------

    def action_speak(self) -> None:
        """Choose a member who replies now, whatever the turn order."""
        self.groups.speak()

    def action_speak_member(self, number: int) -> None:
        """Member `number` of the strip replies now."""
        self.groups.speak_member(number)

    def action_mute_member(self) -> None:
        """Choose a member to mute or unmute."""
        self.groups.mute_member()

    @on(Composer.MemberKey, "#prompt")
    def _member_key(self, event: Composer.MemberKey) -> None:
        if self.groups.allows("speak_member", (event.number,)):
            self.groups.speak_member(event.number)

    async def on_round_update(self, message: RoundUpdate) -> None:
        await self.groups.round_update(message)

    def keep_speak_keys(self, members: int | None) -> None:
        """alt+N only for a group's `members` (None: a one-character chat keeps them, hidden)."""
        self._speak_keys = fit_speak_keys(self._bindings.key_to_bindings, self._speak_keys, members)

    # -- compaction and the inbox strip (`CompactionControl`, `QueueControl`) -------------------

    def action_compact(self) -> None:
        """Summarise the oldest messages into one summary (`CompactionControl.compact`)."""
        self.compaction.compact()

    def action_edit_summary(self) -> None:
        """Edit a summary: the focused one, else the only one, else one chosen."""
        self.compaction.edit_summary()

    @on(MessageBox.OriginalsWanted)
    def _show_originals(self, event: MessageBox.OriginalsWanted) -> None:
        self.compaction.show_originals(event.box)

    @on(TextArea.Changed, "#prompt")
    def _prompt_changed(self, event: TextArea.Changed) -> None:
        self.sending.prompt_changed()

    @on(Composer.Submitted, "#prompt")
    def _submitted(self, event: Composer.Submitted) -> None:
        self.sending.submit(event.text, steer=event.steer)

    def action_cancel_queued(self) -> None:
        """Cancel the queued item being edited, or else the last one; it never reaches the model."""
        self.queue.cancel()  # the strip posts `CancelRequested`

    @on(Composer.EditPrevious, "#prompt")
    def _edit_previous(self, event: Composer.EditPrevious) -> None:
        self.queue.edit_previous()

    @on(QueueEditor.EditSaved, "#inbox")
    def _save_queued_edit(self, event: QueueEditor.EditSaved) -> None:
        self.inbox.save_edit(event.item_id, event.text)

    @on(QueueEditor.CancelRequested, "#inbox")
    def _cancel_queued(self, event: QueueEditor.CancelRequested) -> None:
        self.inbox.cancel(event.item_id)

    @on(QueueEditor.EditLastSent, "#inbox")
    def _edit_last_sent(self, event: QueueEditor.EditLastSent) -> None:
        self.inbox.edit_last_sent()

    def action_stop(self) -> None:
        """Leave the edit of a queued item, or else cancel the streaming reply; the service
        keeps the text received so far."""
        if self.queue.editing is not None:
            self.queue.leave_edit()
            return
        self.workers.cancel_group(self, GENERATION)

    def action_world_books(self) -> None:
        """Open the world-book pane on this playthrough (bindings here, tester on this chat)."""
        self.post_message(WorldBooksRequested(self.playthrough_id))

    def action_back(self) -> None:
        """Leave the edit of a queued item, or else return to the home screen; the draft is
        written first (Esc never throws typed text away). With text in the composer the first
        Esc only says so; a second one within `ESC_AGAIN` seconds goes back."""
        if self.queue.editing is not None:
            self.queue.leave_edit()
            return
        # Esc with text in the composer does not leave (a stray Esc while typing); a second Esc
        # does, and the text is kept as the draft either way.
        warning = f"Esc again within {ESC_AGAIN:.0f} s goes back (your text is kept as a draft)."
        if self.esc_warns(bool(self.prompt.value.strip()), warning):
            return
        self.sending.draft.save(self.prompt.value, then=lambda _: self.dismiss(), failed=lambda _: self.dismiss())

    async def action_load_earlier(self) -> None:
        """Mount the previous window of messages above the first one and show them: the view
        goes up to the oldest of them (scrolling to the top pages earlier messages in while
        keeping the place; the key is asked for them, and showed no change in a trial)."""
        added = await self.transcript.load_earlier()
        if added:  # after the layout that gives the new boxes their heights
            transcript, oldest = self.transcript, self.transcript.boxes[0]

            def show_oldest() -> None:
                if oldest.is_mounted and transcript.boxes[:1] == [oldest]:  # not paged away meanwhile
                    transcript.scroll_to_widget(oldest, top=True, animate=False)

            transcript.call_after_refresh(show_oldest)
        self.refresh_bindings()

    async def action_scroll_transcript(self, direction: int) -> None:
        """Page the transcript while the prompt keeps focus (paging messages in near its ends)."""
        if direction < 0:
            await self.transcript.page_up()
        else:
            await self.transcript.page_down()
