"""Provides `ChatState` and `ChatReading`, the chat screen's reads: what the chat shows of the
database (the newest messages, the message count, the swipe indicator and the inbox), read in one
worker run and shown by syncing the transcript; and the status line's token gauge: the screen
marks it stale (`StatusLine.gauge_stale`), the status line waits for a quiet moment and posts
`StatusLine.GaugeWanted`, and the gauge is computed here in a worker and handed back.

Mixed into `ChatScreen` (before `TavernScreen`), as `MessageCursor` is; a `MessagePump`, so its
`@on` handlers are collected. The narrow interface to the chat: `tavern`, `playthrough_id`,
`transcript`, `status` (`gauge_stale`, `show_gauge`, `swipe`, `detail`), `call`, `generating`,
`inbox` (`QueueControl`), and `_revision` and `_watch`, which the screen's `__init__` sets.
While the chat is open and idle it follows what other windows or commands write to it
(`FOLLOW_EVERY`); while another window or command is writing a reply here (a step `ReplyControl`
found taken), it watches for that step's end (`follow_elsewhere`, `WATCH_EVERY`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from textual import on, work
from textual.message_pump import MessagePump

from tavern_tui.errors import TavernError
from tavern_tui.tui.widgets.status_line import StatusLine
from tavern_tui.tui.widgets.transcript import WINDOW
from tavern_tui.views import InboxItemView, MessageView, PlaythroughView

FOLLOW_EVERY = 2.0
"""Seconds between checks for what other windows or commands wrote to the open chat."""

WATCH_EVERY = 0.5
"""Seconds between checks while another window or command is writing a reply here."""

ELSEWHERE = "a reply is being written in another window"
"""The status line's detail while another window or command is writing a reply here."""

HELD = 4 * WINDOW
"""Messages read when the chat opens or reloads; older ones are read as you scroll up."""


@dataclass(frozen=True)
class ChatState:
    """What the chat shows of the database, read in one worker run: the newest messages, the
    playthrough's message count and the swipe indicator ("" when there is nothing to swipe)."""

    messages: list[MessageView]
    total: int
    swipe: str
    queued: list[InboxItemView] = field(default_factory=list)
    """The playthrough's inbox, in claim order (steers first)."""
    revision: tuple[int, int] | None = None
    """The playthrough's revision when this was read (`PlaythroughService.revision`)."""
    plain: bool = False
    """No message shows other than stored (no MVU state, no allowed card scripts): a
    settled reply's stored text is what the chat will show, so it may be shown at once."""
    mvu_checked: bool = True
    """False when MVU state was not looked at (`plain` then says only the rest): the chat's
    first read leaves it to the world-info warm-up, which parses the books it needs."""


class ChatReading(MessagePump):
    """Mixed into the chat screen: reading what the chat shows, and showing it."""

    def _fetch(self, last: int) -> list[MessageView]:
        """The newest `last` messages (one bounded read, however long the chat); call it in a worker
        (the transcript calls it when Ctrl+O mounts earlier messages)."""
        return self.tavern.playthroughs.messages(self.playthrough_id, last=last)

    def read_state(self, view: PlaythroughView | None = None, *, mvu: bool = True) -> ChatState:
        """Read what the chat shows (call it in a worker); `view` is the playthrough when the
        caller has just read it (its message count is current), else it is read here; `mvu`
        False leaves MVU state unlooked at (`ChatState.mvu_checked`: finding an uncommitted
        initial record parses the bound books, ~0.6 s for a 5,000-entry book on a chat's first
        open). Raises the service's `TavernError`. Every read sees the log as of one version
        (`Tavern.one_version`: the playthrough is read once, the caches ask once)."""
        with self.tavern.one_version():
            return self._read_state_pinned(view, mvu=mvu)

    def _read_state_pinned(self, view: PlaythroughView | None, *, mvu: bool) -> ChatState:
        revision = self.tavern.playthroughs.revision(self.playthrough_id)  # first: a later write shows as newer
        messages = self._fetch(HELD)
        if view is None:
            view = self.tavern.playthroughs.playthrough(self.playthrough_id)
        total = view.message_count
        queued = self.tavern.inbox.pending(self.playthrough_id)
        plain = all(m.display is None for m in messages) and not self.tavern.scripts.allowed(view.character_id)
        if mvu:
            plain = plain and self.tavern.mvu.head(self.playthrough_id, view).record is None
        try:
            state = self.tavern.timeline.swipe_state(self.playthrough_id)
        except TavernError:
            return ChatState(messages, total, "", queued, revision, plain, mvu)
        shown, count = state.position
        swipe = "" if state.ref is None or count <= 1 else \
            f"{'greeting' if state.greeting else 'swipe'} {shown}/{count}"
        return ChatState(messages, total, swipe, queued, revision, plain, mvu)

    def _update_tokens(self) -> None:
        """The token gauge is out of date: the status line asks for it after a quiet moment."""
        self.status.gauge_stale()

    @on(StatusLine.GaugeWanted, "#status")
    def _gauge_wanted(self, event: StatusLine.GaugeWanted) -> None:
        event.stop()
        self._estimate_tokens(event.status_line)

    @work(thread=True, exclusive=True, group="tokens", exit_on_error=False, description="estimate tokens")
    def _estimate_tokens(self, status: StatusLine) -> None:
        # Reads the whole history: off the UI thread, so a swipe repaints before it is done.
        try:
            gauge: dict | None = self.tavern.steps.context_gauge(self.playthrough_id)
        except TavernError:
            gauge = None
        self.app.call_from_thread(status.show_gauge, gauge)

    def reload(self) -> None:
        """Re-read what the database holds (after a swipe or the tree) in a worker, then show it."""
        self.call(self.read_state, title="Cannot read the chat", then=self.show_state)

    def _follow_tick(self) -> None:
        """Every `FOLLOW_EVERY` s while nothing runs here: ask (in a worker) whether another window
        or command wrote to this chat since it was read; `_followed` re-reads it if so, and the
        title when anything else was committed (a persona renamed elsewhere). While a reply
        streams here the chat is not re-read (its own writes would re-read everything), but the
        inbox is: a line another window or command queues meanwhile shows in the strip."""
        if self._watch is not None or self._revision is None:
            return
        if self.generating:
            self.inbox.follow()
        self.call(self.tavern.playthroughs.follow_mark, self.playthrough_id, title="Cannot read the chat",
                  group="follow", exclusive=True, then=self._followed)

    def _followed(self, mark: tuple[tuple[int, int], int | None]) -> None:
        revision, data = mark
        if self._revision is None:
            return
        if revision != self._revision and not self.generating:
            # Seen now, so the next tick does not reload again; the reload's own read sets the
            # revision it shows (a failed reload leaves following on, not stopped).
            self._revision = revision
            self.reload()
        if data != self._data_seen:  # something else changed (a persona renamed elsewhere): the title
            self._data_seen = data
            self._update_title()

    async def show_state(self, state: ChatState) -> None:
        """Show what the database holds now, rebuilding the transcript only where it differs."""
        self._revision = state.revision
        self.plain, self._plain_unless_mvu = state.plain, None
        earlier = self.transcript.earlier_count
        with self.app.batch_update():  # one layout pass for the boxes and the counter
            await self.transcript.sync(state.messages, state.total)
            self._update_tokens()
            self.status.swipe = state.swipe
            self.inbox.show(state.queued)
            if (self.transcript.earlier_count > 0) != (earlier > 0):
                self.refresh_bindings()  # "Earlier messages" came or went (the footer recomposes)

    # -- a step another window or command takes ----------------------------------------------

    def follow_elsewhere(self) -> None:
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
        if self.status.detail == ELSEWHERE:
            self.status.detail = ""
        self.reload()
