"""Provides `ChatOpening`, the chat screen's opening: the playthrough is read (and an interrupted
step recovered) in a worker, then the group, title, kept draft, inbox and transcript are shown,
world info is warmed after first paint, the card's script question is asked, an opening draft's
line is sent and a search hit is paged to; and the title, re-read when a pane changed it.

Mixed into `ChatScreen` (before `TavernScreen`). The narrow interface to the chat: `tavern`,
`playthrough_id`, `playthrough`, `transcript`, `status`, `prompt`, `queue` (`show`),
`groups` (`GroupControl`: `group`, `show_group`, `refresh_members`), `_show_cursor` (`MessageCursor`), `call`,
`read_state`, `_fetch`, `_update_tokens` (`ChatReading`), `replies` (`ReplyControl`), `allowance`,
and the state the screen's `__init__` sets: `_focus`, `_send_on_open` and `_preset_names`.
"""

from __future__ import annotations

from collections.abc import Callable

from textual import work
from textual.message_pump import MessagePump
from textual.widgets import Static

from tavern_tui.errors import TavernError
from tavern_tui.tui.kept_text import put_back
from tavern_tui.tui.labels import speaking_as
from tavern_tui.tui.screens.chat.reading import ChatState
from tavern_tui.views import GroupView, PlaythroughView

PLACEHOLDER = ("Say something as {user}… (Enter sends · shift+Enter or ctrl+J new line · "
               "Esc stops a reply or goes back)")
"""The composer's hint where there is room: both newline keys named (a terminal that cannot tell
shift+Enter from Enter still sends ctrl+J)."""

PLACEHOLDERS = (
    PLACEHOLDER,
    "Say something as {user}… (Enter sends · ctrl+J new line · Esc stops a reply or goes back)",
    "As {user}: Enter sends · ctrl+J new line · Esc stops a reply or goes back",  # 80 columns
    "As {user}: Enter sends · Esc stops a reply or goes back",
    "Say something as {user}…",
)
"""The composer's hints, longest first: it shows the longest that fits its width (`Composer.hints`);
F1 lists every key."""


class ChatOpening(MessagePump):
    """Mixed into the chat screen: opening the playthrough, and its title."""

    def _open(self) -> tuple[PlaythroughView, ChatState, str, GroupView | None]:
        # In the worker: opening recovers an interrupted step and pins the persona (writes).
        view = self.tavern.playthroughs.open_playthrough(self.playthrough_id)
        # MVU state is looked at by the warm-up (`_warm_world_info`): it needs the parsed books,
        # which the first open would otherwise parse before the transcript shows.
        return (view, self.read_state(view, mvu=False), self.tavern.inbox.draft(self.playthrough_id),
                self.tavern.groups.group_of(self.playthrough_id))

    async def _opened(self, opened: tuple[PlaythroughView, ChatState, str, GroupView | None]) -> None:
        view, state, draft, group = opened
        self.playthrough = view
        await self.groups.show_group(group)  # before the transcript: its boxes take the members' colours
        self.groups.refresh_members()
        self._update_title(view)
        self.prompt.hints = speaking_as(PLACEHOLDERS, view.user_name)
        shown = put_back(draft, self.prompt.value)  # the kept draft, then what was typed while it opened
        if shown != self.prompt.value:
            self.prompt.value = shown
        self.queue.show(state.queued)
        self._revision = state.revision  # what other windows write after this is followed
        # Not plain until the warm-up has looked at MVU state (a reply then settles as usual).
        self.plain = state.plain and state.mvu_checked
        self._plain_unless_mvu = None if state.mvu_checked else state.plain
        self.transcript.fetch = self._fetch
        await self.transcript.show(state.messages, view.message_count)
        if self._send_on_open:  # the draft showed the line as Enter was pressed: it stays in sight
            await self.reply_stream.show_early(self._send_on_open, view.user_name)
        self._update_tokens()
        self.status.swipe = state.swipe
        self.status.ooc = view.ooc  # read with the view, off the loop
        self.refresh_bindings()
        self.call_after_refresh(self._warm_world_info)  # the transcript paints first (issue 22)
        self.allowance.check(view.character_id, view.character_name)  # before any send goes out
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
        # The card's display scripts shape every reply from now on (and the warm-up's answer on
        # MVU state no longer decides).
        self.plain, self._plain_unless_mvu = False, None

        async def reshow(state: ChatState) -> None:
            await self._reshow(state)
            done()  # a held send starts after the rebuild, never inside it

        self.call(self.read_state, title="Cannot read the chat", then=reshow, failed=lambda _: done())

    async def _reshow(self, state: ChatState) -> None:
        # Every message may now show differently (display scripts): rebuild the window.
        await self.transcript.show(state.messages, state.total)
        self.plain, self._plain_unless_mvu = state.plain, None

    def _send_opening_line(self) -> None:
        """Send the line an opening draft's first send was given (its checks passed before the
        draft became this playthrough), once, as Enter on it would."""
        text, self._send_on_open = self._send_on_open, ""
        if text:
            self.allowance.then(lambda: self.replies.start(
                "send", lambda: self.tavern.steps.send(self.playthrough_id, text, allow_secrets=True), text))

    @work(thread=True, exclusive=True, group="lore", exit_on_error=False, description="prepare world info")
    def _warm_world_info(self) -> None:
        # Builds the books' key indexes (and the provider's client) after first paint, so the
        # first send does not pay for them.
        self.tavern.steps.warm_provider()
        try:
            self.tavern.steps.warm_world_info(self.playthrough_id)
        except TavernError:
            pass  # a broken book is reported by the step that uses it
        if self._plain_unless_mvu:  # the first read left MVU state to now: the books are parsed
            try:
                no_state = self.tavern.mvu.head(self.playthrough_id).record is None
            except TavernError:
                return
            self.app.call_from_thread(self._mvu_looked_at, no_state)

    def _mvu_looked_at(self, no_state: bool) -> None:
        """The warm-up's answer on MVU state, unless a later read of the chat already gave one."""
        if self._plain_unless_mvu:
            self.plain, self._plain_unless_mvu = no_state, None

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
        name = self.groups.group.name if self.groups.group is not None else view.character_name
        title = f"{name} · #{view.id} · playing as {view.user_name} · {view.strategy} · {preset}"
        shown = self.query_one("#chat-title", Static)
        if str(shown.content) != title:  # re-read every follow tick something was committed: paint changes only
            shown.update(title)
            self.prompt.hints = speaking_as(PLACEHOLDERS, view.user_name)  # a persona switch too

    def _preset_named(self, view: PlaythroughView, preset_id: int, name: str) -> None:
        self._preset_names[preset_id] = name or f"#{preset_id}"
        if self.playthrough is view:  # not replaced by a newer read meanwhile
            self._update_title(view)
