"""Provides `GroupControl`, the chat's group-chat part: a line plays a round (one reply per
member the turn order picks, each under its speaker's name and colour), the member strip, and
the keys to have a member speak now or to mute one.

The chat screen holds one (`ChatScreen.groups`): its keys are listed in the chat's BINDINGS
(`GROUP_BINDINGS`), allowed there through `GroupControl.allows` and handed to it by the screen's
actions, as `RoundUpdate` is by its handler. The control reaches the chat only through
`ChatHost` (the members' strip `members`, the reply's `replies` and `reply_stream`, the inbox
strip's `inbox`, the status line, the service calls).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from textual.binding import Binding

from tavern_tui.service.groups import LineQueued, MemberTurn
from tavern_tui.tui.labels import clip
from tavern_tui.tui.messages import RoundUpdate
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.views import GroupMemberView, GroupView, MessageView

if TYPE_CHECKING:
    from tavern_tui.tui.screens.chat.host import ChatHost

_GROUP = Binding.Group("Group chat")

NOBODY_REPLIES = ("Nobody replies on their own in this group: your line waits until a member is asked "
                  "(alt+N or ctrl+b speaks now).")
"""The notice of a round in which no member replies (a manual group, every member muted)."""

ROUND_RUNNING = "A reply is being written: wait for it (Esc stops it), then ctrl+b asks a member."
"""The notice of ctrl+b or alt+N pressed while a round runs."""

SPEAK_ID = "chat.group_speak_"
"""The binding ids of alt+N are this and N."""

GROUP_BINDINGS = [
    Binding("ctrl+b", "speak", "Speak", id="chat.group_speak", group=_GROUP,
            tooltip="Group chat: choose a member who replies now, whatever the turn order (inside tmux: ctrl+b twice)"),
    *(Binding(f"alt+{n}", f"speak_member({n})", f"Speak now: member {n}", id=f"{SPEAK_ID}{n}",
              show=False, priority=True, group=_GROUP,
              tooltip=f"Group chat: member {n} of the strip above the composer replies now")
      for n in range(1, 10)),
    Binding("ctrl+n", "mute_member", "Mute / unmute member", id="chat.group_mute", show=False, group=_GROUP,
            tooltip="Group chat: a muted member never replies on its own (it can still be asked)"),
]
"""The group chat's keys; the chat lists them in its BINDINGS. alt+N is a priority key: the
focused composer would otherwise take it."""

GROUP_ACTIONS = frozenset(b.action.split("(", 1)[0] for b in GROUP_BINDINGS)


def speak_number(binding: Binding) -> int | None:
    """The member number alt+N asks (N), None for any other binding."""
    ident = binding.id or ""
    return int(ident.removeprefix(SPEAK_ID)) if ident.startswith(SPEAK_ID) else None


def fit_speak_keys(bindings: dict[str, list[Binding]], declared: dict[str, list[Binding]] | None,
                   count: int | None) -> dict[str, list[Binding]]:
    """Keep alt+N in a screen's `bindings` (key → bindings, changed in place) only for N ≤ `count`
    (a group's members), so the help (F1), the palette and the keys offer no alt+3…9 in a
    two-member group; `count` None (a one-character chat) keeps them all (hidden). `declared` is
    what an earlier call returned (None the first time): the alt+N bindings as the screen
    declared them, which this returns."""
    if declared is None:
        declared = {key: list(found) for key, found in bindings.items()
                    if any(speak_number(b) is not None for b in found)}
    limit = len(declared) if count is None else count
    for key, found in declared.items():
        kept = [b for b in found if (speak_number(b) or 0) <= limit]
        if kept:
            bindings[key] = kept
        else:
            bindings.pop(key, None)
    return declared


def progress_detail(name: str, position: int, count: int, room: int | None) -> str:
    """The status line's detail while member `position` of `count` replies, within `room` cells
    (None: unknown, the whole text): the progress "(1 of 2)" stays, the words give way first
    ("Seraphina replies (1 of 2)", "Seraphina (1 of 2)", "Sera… (1 of 2)", "(1 of 2)")."""
    progress = f"({position} of {count})"
    whole = f"{name} replies {progress}"
    if room is None or cell_len(whole) <= room:
        return whole
    if cell_len(f"{name} {progress}") <= room:
        return f"{name} {progress}"
    left = room - len(progress) - 1
    return f"{clip(name, left)} {progress}" if left >= 4 else progress


def next_choice(members: Sequence[GroupMemberView], upcoming: list[str] | None, last: int | None) -> int:
    """Which of `members` (every member, in order, muted ones too) the speak picker highlights,
    among the unmuted ones: the first of `upcoming` (the turn order's next speakers, list and
    pooled order), else the first after `last` (the character id of the latest reply, muted or
    not), wrapping round, else the first. When every member is muted, the same among them all."""
    open_ = [n for n, m in enumerate(members) if not m.muted] or list(range(len(members)))
    if not open_:
        return 0
    for name in upcoming or ():
        hit = next((n for n in open_ if members[n].name == name), None)
        if hit is not None:
            return hit
    ids = [m.character_id for m in members]
    if last in ids:
        after = ids.index(last)
        return next((n for n in open_ if n > after), open_[0])
    return open_[0]


async def queued_round(tavern: Any, playthrough_id: int) -> AsyncGenerator[Any, None]:
    """The step or round answering the lines waiting in the inbox: a one-character chat's queued
    step, a group's `GroupService.play_queued`."""
    group = await asyncio.to_thread(tavern.groups.group_of, playthrough_id)
    updates = tavern.steps.run_queued(playthrough_id) if group is None else tavern.groups.play_queued(playthrough_id)
    async with aclosing(updates) as stream:
        async for update in stream:
            yield update


class GroupControl:
    """The group the chat plays (None: a one-character chat), the round being played and the
    group's keys.

    Args:
        chat: the chat screen (`ChatHost`); its strip of members is `chat.members`.
    """

    def __init__(self, chat: ChatHost) -> None:
        self.chat = chat
        self.group: GroupView | None = None
        """The group the playthrough plays, read when the chat opens (None: not a group chat)."""
        self.turn: MemberTurn | None = None
        """The member whose reply streams now (None outside a group round)."""

    # -- showing --------------------------------------------------------------------------

    async def show_group(self, group: GroupView | None, names: list[str] | None = None) -> None:
        """Take the playthrough's group (None: not a group chat): colours, the member strip."""
        self.group = group
        self.chat.transcript.member_of = self.member_of if group is not None else None
        self.chat.prompt.member_keys = group is not None  # alt+N as terminals send it (`Composer.MemberKey`)
        await self.chat.members.show(group, names)
        self.chat.keep_speak_keys(len(group.members) if group is not None else None)
        self.chat.refresh_bindings()

    def member_of(self, view: MessageView) -> int | None:
        """The 0-based place in the group of the member who wrote `view` (a reply without a
        recorded member is the first member's: the greeting); None for no member colour."""
        if self.group is None or view.role != "assistant":
            return None
        who = view.character_id if view.character_id is not None else self.group.members[0].character_id
        return next((n for n, m in enumerate(self.group.members) if m.character_id == who), None)

    def refresh_members(self) -> None:
        """Re-read the group and who speaks next (in a worker), then show them in the strip."""
        if self.group is not None:
            self.chat.call(self.chat.tavern.groups.upcoming, self.chat.playthrough_id, title="Cannot read the group",
                      severity="warning", group="members", exclusive=True,
                      then=lambda found: self.show_group(*found))

    def reply_box(self, prefill: str = "", like: MessageView | None = None) -> MessageBox:
        """A box for a reply to stream into, under the member whose turn it is, else under the
        speaker of `like` (the reply being regenerated or continued), else the playthrough's
        character; in that member's colour."""
        playthrough = self.chat.playthrough
        name = playthrough.character_name if playthrough is not None else ""  # open before any box
        position = None
        if self.group is not None and self.turn is not None:
            name, who = self.turn.name, self.turn.character_id
            position = next((n for n, m in enumerate(self.group.members) if m.character_id == who), None)
        elif self.group is not None and like is not None and like.role == "assistant":
            name, position = like.speaker, self.member_of(like)
        box = MessageBox(name, prefill, mark="writing…", classes="-assistant -streaming")
        box.set_member(position)
        return box

    # -- playing --------------------------------------------------------------------------

    def round_updates(self, text: str, allow_secrets: bool = False) -> Callable[[], AsyncGenerator[Any, None]]:
        """The updates of a round on `text` (the step stream `ChatScreen._start` runs)."""
        return lambda: self.chat.tavern.groups.play_round(self.chat.playthrough_id, text,
                                                     allow_secrets=allow_secrets)

    def queued_updates(self) -> Callable[[], AsyncGenerator[Any, None]]:
        """The updates of a step answering the queued lines: a round in a group chat."""
        if self.group is None:
            return lambda: self.chat.tavern.steps.run_queued(self.chat.playthrough_id)
        return lambda: queued_round(self.chat.tavern, self.chat.playthrough_id)

    async def round_update(self, message: RoundUpdate) -> None:
        """A member's turn begins (its box is made at its step's start), or nobody replies."""
        update = message.update
        if isinstance(update, MemberTurn):
            self.turn = update
            if update.count > 1:
                status = self.chat.status
                status.detail = ""  # the line without a detail: what room is left for one
                width = status.content_size.width
                room = width - cell_len(f"{status.line} — ") if width > 0 else None
                status.detail = progress_detail(update.name, update.position, update.count, room)
        elif isinstance(update, LineQueued):
            self.chat.notify(NOBODY_REPLIES, title="Your line waits", timeout=8)
            self.chat.inbox.refresh()

    async def settle_member(self, event: object) -> None:
        """A member's reply is stored: settle its box now, so the next member's streams under it."""
        stream = self.chat.reply_stream
        if self.turn is None or stream.box is None:
            return
        view = self.chat.replies.view_of(event, self.turn.name)
        if view is not None:
            await stream.settle(view)

    # -- keys -----------------------------------------------------------------------------

    def allows(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """check_action for the group keys: hidden outside a group chat (and alt+N past the
        cast); while a reply streams ctrl+b and alt+N stay live to say why they wait, the mute
        key is dimmed."""
        if self.group is None:
            return False
        if action == "speak_member" and parameters and not 1 <= int(parameters[0]) <= len(self.group.members):  # type: ignore[call-overload]
            return False
        if action in ("speak", "speak_member"):
            return True  # while a round runs the key says why it waits (`ROUND_RUNNING`)
        return None if self.chat.generating else True

    def speak_member(self, number: int) -> None:
        """Member `number` (as the strip numbers them) replies now, whatever the turn order (a
        muted one too); lines waiting in the inbox are its input."""
        if self.group is None or not 1 <= number <= len(self.group.members):
            return
        if self.chat.generating:
            self.chat.notify(ROUND_RUNNING, title="Not now", severity="warning")
            return
        member = self.group.members[number - 1]
        groups, pid = self.chat.tavern.groups, self.chat.playthrough_id
        self.chat.replies.start("speak", lambda: groups.speak(pid, member.character_id))

    def _choose_member(self, title: str, then: Callable[[int], None]) -> None:
        group = self.group
        if group is None:
            return
        labels = [f"{n} · {m.name}" + (" · muted" if m.muted else "") for n, m in enumerate(group.members, 1)]
        self.chat.app.push_screen(ChooseScreen(title, labels),
                             lambda index: then(index + 1) if index is not None else None)

    def _last_speaker(self) -> int | None:
        """The character id of the newest reply shown (None: none, or not a member's)."""
        for box in reversed(self.chat.transcript.boxes):
            view = box.view
            if view is not None and view.role == "assistant":
                position = self.member_of(view)
                return self.group.members[position].character_id if self.group and position is not None else None
        return None

    def speak(self) -> None:
        """Choose a member who replies now, muted ones too, marked "(muted)" (SillyTavern lets a
        muted member be forced to speak), numbered as the strip numbers them; the next speaker
        among the unmuted is highlighted (`next_choice`); alt+N asks member N at once. While a
        round runs, a notice says to wait."""
        group = self.group
        if group is None:
            return
        if self.chat.generating:
            self.chat.notify(ROUND_RUNNING, title="Not now", severity="warning")
            return
        selected = next_choice(group.members, self.chat.members.upcoming, self._last_speaker())
        labels = [f"{n} · {m.name}" + (" (muted)" if m.muted else "") for n, m in enumerate(group.members, 1)]
        self.chat.app.push_screen(
            ChooseScreen("Who speaks now?", labels, hint="Enter: this member replies now · Esc cancels",
                         selected=selected),
            lambda index: self.speak_member(index + 1) if index is not None else None)

    def mute_member(self) -> None:
        """Choose a member to mute (it no longer replies on its own) or unmute."""
        def toggle(number: int) -> None:
            assert self.group is not None
            member = self.group.members[number - 1]
            self.chat.call(self.chat.tavern.groups.set_muted, self.group.id, str(member.character_id),
                      not member.muted, title="Cannot change the member", then=lambda _: self.refresh_members())

        self._choose_member("Mute or unmute which member?", toggle)
