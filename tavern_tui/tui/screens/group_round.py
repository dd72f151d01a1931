"""Provides `GroupChat`, the chat screen's group-chat part: a line plays a round (one reply per
member the turn order picks, each under its speaker's name and colour), the member strip, and
the keys to have a member speak now or to mute one.

Mixed into `ChatScreen` (before `TavernScreen`), as `MessageCursor` is: its keys are listed in
the chat's BINDINGS (`GROUP_BINDINGS`) and allowed there through `group_allows`; its handler is a
named one (`on_round_update`: Textual finds named handlers on any class of the screen's MRO,
while `@on` needs a widget or screen class). The narrow interface to the chat: `tavern`,
`playthrough_id`, `playthrough`, `transcript`, `members` (the `MemberStrip`), `status`,
`generating`, `call`, `_start`, `_reply`, `_before` and `_refresh_queue`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from textual.binding import Binding

from tavern_tui.service.groups import LineQueued, MemberTurn
from tavern_tui.tui.messages import RoundUpdate
from tavern_tui.tui.modals.choose import ChooseScreen
from tavern_tui.tui.widgets.message_box import MessageBox
from tavern_tui.views import GroupView, MessageView

_GROUP = Binding.Group("Group chat")

NOBODY_REPLIES = ("Nobody replies on their own in this group: your line waits until a member is asked "
                  "(alt+N or ctrl+b speaks now).")
"""The notice of a round in which no member replies (a manual group, every member muted)."""

GROUP_BINDINGS = [
    Binding("ctrl+b", "speak", "Speak", id="chat.group_speak", group=_GROUP,
            tooltip="Group chat: choose a member who replies now, whatever the turn order"),
    *(Binding(f"alt+{n}", f"speak_member({n})", f"Speak now: member {n}", id=f"chat.group_speak_{n}",
              show=False, priority=True, group=_GROUP,
              tooltip=f"Group chat: member {n} of the strip above the composer replies now")
      for n in range(1, 10)),
    Binding("ctrl+n", "mute_member", "Mute / unmute member", id="chat.group_mute", show=False, group=_GROUP,
            tooltip="Group chat: a muted member never replies on its own (it can still be asked)"),
]
"""The group chat's keys; the chat lists them in its BINDINGS. alt+N is a priority key: the
focused composer would otherwise take it."""

GROUP_ACTIONS = frozenset(b.action.split("(", 1)[0] for b in GROUP_BINDINGS)


async def queued_round(tavern: Any, playthrough_id: int) -> AsyncIterator[Any]:
    """The step or round answering the lines waiting in the inbox: a one-character chat's queued
    step, a group's `GroupService.play_queued`."""
    group = await asyncio.to_thread(tavern.groups.group_of, playthrough_id)
    updates = tavern.steps.run_queued(playthrough_id) if group is None else tavern.groups.play_queued(playthrough_id)
    async with aclosing(updates) as stream:
        async for update in stream:
            yield update


class GroupChat:
    """Mixed into the chat screen: the group it plays (None: a one-character chat) and the round
    being played."""

    group: GroupView | None = None
    """The group the playthrough plays, read when the chat opens (None: not a group chat)."""

    turn: MemberTurn | None = None
    """The member whose reply streams now (None outside a group round)."""

    # -- showing --------------------------------------------------------------------------

    async def show_group(self, group: GroupView | None, names: list[str] | None = None) -> None:
        """Take the playthrough's group (None: not a group chat): colours, the member strip."""
        self.group = group
        self.transcript.member_of = self.member_of if group is not None else None  # type: ignore[attr-defined]
        await self.members.show(group, names)  # type: ignore[attr-defined]
        self.refresh_bindings()  # type: ignore[attr-defined]

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
            self.call(self.tavern.groups.upcoming, self.playthrough_id, title="Cannot read the group",  # type: ignore[attr-defined]
                      severity="warning", group="members", exclusive=True,
                      then=lambda found: self.show_group(*found))

    def reply_box(self, prefill: str = "", like: MessageView | None = None) -> MessageBox:
        """A box for a reply to stream into, under the member whose turn it is, else under the
        speaker of `like` (the reply being regenerated or continued), else the playthrough's
        character; in that member's colour."""
        name = self.playthrough.character_name  # type: ignore[attr-defined]
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

    def round_updates(self, text: str, allow_secrets: bool = False) -> Callable[[], AsyncIterator[Any]]:
        """The updates of a round on `text` (the step stream `ChatScreen._start` runs)."""
        return lambda: self.tavern.groups.play_round(self.playthrough_id, text,  # type: ignore[attr-defined]
                                                     allow_secrets=allow_secrets)

    def queued_updates(self) -> Callable[[], AsyncIterator[Any]]:
        """The updates of a step answering the queued lines: a round in a group chat."""
        if self.group is None:
            return lambda: self.tavern.steps.run_queued(self.playthrough_id)  # type: ignore[attr-defined]
        return lambda: queued_round(self.tavern, self.playthrough_id)  # type: ignore[attr-defined]

    async def on_round_update(self, message: RoundUpdate) -> None:
        """A member's turn begins (its box is made at its step's start), or nobody replies."""
        update = message.update
        if isinstance(update, MemberTurn):
            self.turn = update
            if update.count > 1:
                self.status.detail = f"{update.name} replies ({update.position} of {update.count})"  # type: ignore[attr-defined]
        elif isinstance(update, LineQueued):
            self.notify(NOBODY_REPLIES, title="Your line waits", timeout=8)  # type: ignore[attr-defined]
            self._refresh_queue()  # type: ignore[attr-defined]

    async def settle_member(self, event: object) -> None:
        """A member's reply is stored: settle its box now, so the next member's streams under it."""
        reply: MessageBox | None = self._reply  # type: ignore[attr-defined]
        if self.turn is None or reply is None or event is None or self.playthrough is None:  # type: ignore[attr-defined]
            return
        view = self.tavern.playthroughs.view_of(event, self.turn.name, self.playthrough.user_name)  # type: ignore[attr-defined]
        await reply.settle(view)
        self._before.add(view.ref)  # type: ignore[attr-defined]
        self._reply = None

    # -- keys -----------------------------------------------------------------------------

    def group_allows(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """check_action for the group keys: hidden outside a group chat (and alt+N past the
        cast), dimmed while a reply streams."""
        if self.group is None:
            return False
        if action == "speak_member" and parameters and not 1 <= int(parameters[0]) <= len(self.group.members):  # type: ignore[call-overload]
            return False
        return None if self.generating else True  # type: ignore[attr-defined]

    def action_speak_member(self, number: int) -> None:
        """Member `number` (as the strip numbers them) replies now, whatever the turn order (a
        muted one too); lines waiting in the inbox are its input."""
        if self.group is None or self.generating or not 1 <= number <= len(self.group.members):  # type: ignore[attr-defined]
            return
        member = self.group.members[number - 1]
        self._start("speak", lambda: self.tavern.groups.speak(self.playthrough_id, member.character_id))  # type: ignore[attr-defined]

    def _choose_member(self, title: str, then: Callable[[int], None]) -> None:
        group = self.group
        if group is None:
            return
        labels = [f"{n} · {m.name}" + (" · muted" if m.muted else "") for n, m in enumerate(group.members, 1)]
        self.app.push_screen(ChooseScreen(title, labels),  # type: ignore[attr-defined]
                             lambda index: then(index + 1) if index is not None else None)

    def action_speak(self) -> None:
        """Choose a member who replies now (alt+N asks member N at once)."""
        self._choose_member("Who speaks now?", self.action_speak_member)

    def action_mute_member(self) -> None:
        """Choose a member to mute (it no longer replies on its own) or unmute."""
        def toggle(number: int) -> None:
            assert self.group is not None
            member = self.group.members[number - 1]
            self.call(self.tavern.groups.set_muted, self.group.id, str(member.character_id),  # type: ignore[attr-defined]
                      not member.muted, title="Cannot change the member", then=lambda _: self.refresh_members())

        self._choose_member("Mute or unmute which member?", toggle)
