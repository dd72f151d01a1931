"""Provides `ChatHost`, the chat screen as its controls see it: the one interface through which
`QueueControl`, `CompactionControl`, `ReplyControl`, `GroupControl` and `SendControl` reach the
chat (its widgets, its service calls, its reads and the state a step leaves), so the controls
name what they use and the screen holds them rather than inheriting them. mypy checks
`ChatScreen` against it (below).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from textual.app import App
    from textual.message import Message
    from textual.widget import Widget
    from textual.worker import Worker

    from tavern_tui.service import Tavern
    from tavern_tui.tui.screens.base import Severity
    from tavern_tui.tui.screens.chat.queue import QueueControl
    from tavern_tui.tui.screens.chat.reading import ChatState
    from tavern_tui.tui.screens.chat.reply import ReplyControl
    from tavern_tui.tui.screens.chat.sending import SendControl
    from tavern_tui.tui.screens.chat.stream import ReplyStream
    from tavern_tui.tui.screens.group_round import GroupControl
    from tavern_tui.tui.screens.regex_allowance import ScriptAllowance
    from tavern_tui.tui.widgets.composer import Composer
    from tavern_tui.tui.widgets.inbox_queue import QueueEditor
    from tavern_tui.tui.widgets.member_strip import MemberStrip
    from tavern_tui.tui.widgets.status_line import StatusLine
    from tavern_tui.tui.widgets.transcript import Transcript
    from tavern_tui.views import PlaythroughView

ResultT = TypeVar("ResultT")


class ChatHost(Protocol):
    """What the chat's controls use of the chat screen (`ChatScreen` is one)."""

    tavern: Tavern
    playthrough_id: int
    playthrough: PlaythroughView | None
    generating: bool
    reply_stream: ReplyStream
    """The running step's state and what the transcript shows of it."""
    inbox: QueueControl
    """The inbox strip's control."""
    replies: ReplyControl
    """The reply stream's control."""
    groups: GroupControl
    """A group chat's control (its `group` is None in a one-character chat)."""
    sending: SendControl
    """The composer's control: Enter, the draft."""
    allowance: ScriptAllowance
    """The card's regex-script question: sends wait for its answer."""
    plain: bool
    """Messages show as stored (`ChatState.plain`): a settled reply may be shown at once."""

    @property
    def app(self) -> App[Any]:
        """The running app (to push a modal)."""

    @property
    def focused(self) -> Widget | None:
        """The widget with the focus."""

    @property
    def transcript(self) -> Transcript:
        """The messages shown."""

    @property
    def status(self) -> StatusLine:
        """The status line under the composer."""

    @property
    def prompt(self) -> Composer:
        """The composer."""

    @property
    def members(self) -> MemberStrip:
        """The strip of a group's members above the composer."""

    @property
    def queue(self) -> QueueEditor:
        """The strip of queued lines above the composer."""

    def call(self, fn: Callable[..., ResultT], *args: Any, title: str,
             then: Callable[[ResultT], object] | None = None, group: str = ..., exclusive: bool = False,
             severity: Severity = "error", failed: Callable[[BaseException], object] | None = None,
             **kwargs: Any) -> Worker[ResultT | None]:
        """A service call in a thread (`TavernCalls.call`)."""

    def run_worker(self, work: Coroutine[Any, Any, Any], name: str | None = "", group: str = "default",
                   description: str = "", exit_on_error: bool = True, start: bool = True,
                   exclusive: bool = False, thread: bool = False) -> Worker[Any]:
        """An async worker on the screen (Textual's; its group's exclusivity is per screen)."""

    def notify(self, message: str, *, title: str = "", severity: Severity = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """A toast (Textual's)."""

    def refresh_bindings(self) -> None:
        """Re-check the footer's keys (Textual's)."""

    def reload(self) -> None:
        """Re-read what the database holds for the chat and show it."""

    def read_state(self, view: PlaythroughView | None = None, *, mvu: bool = True) -> ChatState:
        """Read what the chat shows (in a worker)."""

    async def show_state(self, state: ChatState) -> None:
        """Show what `read_state` read."""

    async def settled(self) -> None:
        """Wait until every service call made so far has ended."""

    def post_message(self, message: Message) -> bool:
        """Queue a Message for the screen (Textual's)."""

    def follow_elsewhere(self) -> None:
        """Follow a step another window or command runs here until it ends."""

    def keep_speak_keys(self, members: int | None) -> None:
        """Offer alt+N only for a group's `members` (None: a one-character chat)."""


if TYPE_CHECKING:
    from tavern_tui.tui.screens.chat import ChatScreen

    def _the_chat_screen_is_a_host(screen: ChatScreen) -> ChatHost:
        """For the type checker: `ChatScreen` satisfies `ChatHost` (an error here names what it lacks)."""
        return screen
