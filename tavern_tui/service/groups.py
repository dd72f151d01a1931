"""Provides `GroupService`: group chats' casts, their playthroughs, and who speaks next.

A group is a cast of characters in order, some muted, with SillyTavern's turn order (natural,
list, manual, pooled: `assembly.group_order`) and card mode (swap: the speaker's card; join:
every member's). A group playthrough is a playthrough like any other (its own timeline, inbox,
preset, strategy and books) that records the group it plays; its character is the first member,
so whatever reads a playthrough's character keeps working.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tavern_tui.assembly.group_order import GroupCast, Member, Said, Strategy, speakers
from tavern_tui.engine.step import admit_opening
from tavern_tui.errors import NotFound, TavernError
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.store.groups import GroupMemberRecord, GroupRecord
from tavern_tui.store.repositories import CharacterRecord
from tavern_tui.text.names import substitute_names
from tavern_tui.views import GroupMemberView, GroupView, MessageView, PlaythroughView

if TYPE_CHECKING:
    from tavern_tui.service.inbox import InboxService
    from tavern_tui.service.steps import StepRunner
    from tavern_tui.store.store import UnitOfWork

TURN_WINDOW = 50
"""How many of the newest messages the turn order reads (the last reply, and pooled order's
replies since the person last spoke)."""


@dataclass(frozen=True, slots=True)
class MemberTurn:
    """A round's update before each member's step: who speaks now, and where in the round.

    Attributes:
        character_id, name: the member. position: 1-based. count: members in this round.
    """

    character_id: int
    name: str
    position: int
    count: int


@dataclass(frozen=True, slots=True)
class LineQueued:
    """A round in which nobody replies (a manual group, every member muted): the person's line
    waits in the inbox for a member to be asked (`speak`)."""

    text: str


MODES = {"swap": 0, "join": 1}
"""Card modes by name, as SillyTavern's `group_generation_mode` numbers them."""


def talkativeness_of(data: dict[str, Any]) -> float | None:
    """A card's talkativeness (`extensions.talkativeness`, SillyTavern's `Number(...)`); None when
    unset or not a number (the group order then uses 0.5)."""
    value = (data.get("extensions") or {}).get("talkativeness") if isinstance(data, dict) else None
    try:
        number = float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None
    return None if number is None or number != number else number  # NaN: unset


class GroupService:
    """Groups and the playthroughs that play them.

    Args:
        ctx: the shared service context. library: characters. playthroughs: creating the
            group's playthrough and reading its messages.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 steps: Callable[[], StepRunner] | None = None,
                 inbox: Callable[[], InboxService] | None = None) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self._steps = steps  # built on first use: listing groups never loads the step runner
        self._inbox = inbox

    # --- reading ----------------------------------------------------------------------------

    def _view(self, record: GroupRecord, playthroughs: list[int]) -> GroupView:
        members = []
        with self.ctx.store.unit_of_work(write=False) as uow:
            characters = [uow.characters.get(m.character_id) for m in record.members]
        for member, character in zip(record.members, characters, strict=True):
            card = self.library.card(character)
            members.append(GroupMemberView(character.id, character.name, member.muted, talkativeness_of(card.data)))
        return GroupView(record.id, record.name, tuple(members), Strategy(record.strategy).name.lower(),
                         "join" if record.generation_mode else "swap", record.allow_self_responses,
                         tuple(playthroughs))

    def group(self, query: str | int) -> GroupView:
        """A group by id or by name (case-insensitive; the newest of that name).

        Raises:
            NotFound: nothing matches (the message lists the groups' names).
        """
        with self.ctx.store.unit_of_work(write=False) as uow:
            records = uow.groups.all()
            found = self._match(records, query)
            return self._view(found, uow.groups.playthroughs(found.id))

    @staticmethod
    def _match(records: Sequence[GroupRecord], query: str | int) -> GroupRecord:
        text = str(query).strip()
        by_id = next((r for r in records if text.isdigit() and r.id == int(text)), None)
        if by_id is not None:
            return by_id
        named = [r for r in records if r.name.casefold() == text.casefold()]
        if named:
            return named[-1]
        known = (", ".join(f"{r.id} {r.name!r}" for r in records)
                 or "none yet (`tavern group new NAME --member CHARACTER`)")
        what = "with id" if text.isdigit() else "named"
        raise NotFound(f"no group {what} {text!r}; groups: {known}")

    def groups(self) -> list[GroupView]:
        """Every group, oldest first, with its playthroughs."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            pairs = [(r, uow.groups.playthroughs(r.id)) for r in uow.groups.all()]
        return [self._view(record, ids) for record, ids in pairs]

    def names_by_playthrough(self) -> dict[int, str]:
        """{playthrough id: its group's name} of every group chat (how lists name a group chat)."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            return uow.groups.names_by_playthrough()

    def group_of(self, playthrough_id: int) -> GroupView | None:
        """The group a playthrough plays (None: a one-character playthrough)."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            group_id = uow.groups.group_of(playthrough_id)
            if group_id is None:
                return None
            record = uow.groups.get(group_id)
            ids = uow.groups.playthroughs(group_id)
        return self._view(record, ids)

    # --- writing ----------------------------------------------------------------------------

    def new_group(self, name: str, members: Sequence[str], *, strategy: str = "natural", mode: str = "swap",
                  allow_self_responses: bool = False,
                  user_name: str | None = None) -> tuple[GroupView, PlaythroughView]:
        """Make a group of the characters `members` names (ids or names, in order) and a first
        playthrough of it.

        Raises:
            TavernError: no member, a member named twice, an unknown strategy or mode.
            NotFound, Ambiguous: a member that names no character, or several.
        """
        if not name.strip():
            raise TavernError("a group needs a name")
        if not members:
            raise TavernError("a group needs at least one member (--member CHARACTER)")
        ids = [self.library.find_character(query).id for query in members]
        twice = sorted({query for query, id_ in zip(members, ids, strict=True) if ids.count(id_) > 1})
        if twice:
            raise TavernError(f"a character is named twice among the members: {', '.join(twice)}")
        self._check_name(name.strip())
        record = GroupRecord(0, name.strip(), tuple(GroupMemberRecord(i) for i in ids),
                             int(Strategy.parse(strategy)), _mode(mode), allow_self_responses)
        playthrough = self.playthroughs.new_playthrough(ids[0], user_name=user_name, member=True)
        playthrough = self._greet(playthrough, ids[1:])
        with self.ctx.store.unit_of_work() as uow:
            stored = uow.groups.add(record)
            uow.groups.attach(playthrough.id, stored.id)
        return self.group(stored.id), playthrough

    def _greet(self, playthrough: PlaythroughView, members: Sequence[int]) -> PlaythroughView:
        """Post each of `members`' greetings after the first member's (`new_playthrough` posted
        that one), in member order, each under its speaker: SillyTavern `getGroupChat` pushes
        every member's first message into a new group chat, muted ones too, and skips a member
        without one. Each is an opening reference whose swipes are its member's greetings.
        Returns the playthrough as it is now."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            records = [uow.characters.get(member) for member in members]
        for record in records:
            card = self.library.card(record)
            greetings = card.greetings
            if not greetings or not greetings[0].strip():
                continue  # "No first message"
            admit_opening(self.ctx.store.events, playthrough.session_id,
                          substitute_names(greetings[0], card.name, playthrough.user_name),
                          {"greeting_index": 0, "greetings": len(greetings), "name": card.name,
                           "character_id": record.id})
        return self.playthroughs.playthrough(playthrough.id)

    def _check_name(self, name: str) -> None:
        """Refuse a name another group or a character has: `tavern chat NAME` and `tavern group`
        commands find a group by it. Raises TavernError."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            taken = any(r.name.casefold() == name.casefold() for r in uow.groups.all())
            character = any(c.name.casefold() == name.casefold() for c in uow.characters.all())
        if taken:
            raise TavernError(f"a group named {name!r} exists already; give this one another name")
        if character:
            raise TavernError(f"a character is named {name!r}; give the group another name "
                              "(`tavern chat NAME` would open the character)")

    def new_playthrough(self, group: str | int, *, user_name: str | None = None) -> PlaythroughView:
        """Another playthrough of the group (a new chat with the same cast). Raises NotFound."""
        found = self.group(group)
        playthrough = self.playthroughs.new_playthrough(found.members[0].character_id, user_name=user_name,
                                                        member=True)
        playthrough = self._greet(playthrough, [m.character_id for m in found.members[1:]])
        with self.ctx.store.unit_of_work() as uow:
            uow.groups.attach(playthrough.id, found.id)
        return playthrough

    def _change(self, query: str | int, change: str, character: str | None = None) -> GroupView:
        """Apply one cast change ("add", "remove", "mute", "unmute") to the group `query` names."""
        member = self.library.find_character(character).id if character is not None else None
        with self.ctx.store.unit_of_work() as uow:
            record = self._match(uow.groups.all(), query)
            cast = list(record.members)
            index = next((i for i, m in enumerate(cast) if m.character_id == member), None)
            if change == "add":
                if index is not None:
                    raise TavernError(f"{character!r} is in the group already")
                cast.append(GroupMemberRecord(member or 0))
            elif index is None:
                raise TavernError(f"{character!r} is not a member of {record.name!r}")
            elif change == "remove":
                if len(cast) == 1:
                    raise TavernError("a group keeps at least one member")
                del cast[index]
            else:
                cast[index] = replace(cast[index], muted=change == "mute")
            uow.groups.update(replace(record, members=tuple(cast)))
        return self.group(record.id)

    def add_member(self, group: str | int, character: str) -> GroupView:
        """Add a character at the end of the cast. Raises NotFound, TavernError (a member already)."""
        return self._change(group, "add", character)

    def remove_member(self, group: str | int, character: str) -> GroupView:
        """Remove a member (its replies stay in the chats). Raises NotFound, TavernError."""
        return self._change(group, "remove", character)

    def set_muted(self, group: str | int, character: str, muted: bool) -> GroupView:
        """Mute a member (it never replies on its own; it can still be asked) or unmute it."""
        return self._change(group, "mute" if muted else "unmute", character)

    def set_strategy(self, group: str | int, strategy: str) -> GroupView:
        """Change the turn order ("natural", "list", "manual", "pooled"). Raises ValueError, NotFound."""
        parsed = int(Strategy.parse(strategy))
        with self.ctx.store.unit_of_work() as uow:
            record = self._match(uow.groups.all(), group)
            uow.groups.update(replace(record, strategy=parsed))
        return self.group(record.id)

    # --- playing -----------------------------------------------------------------------------

    def turn_state(self, playthrough_id: int) -> tuple[GroupView, list[Said], str]:
        """(the group, the chat as the turn order reads it, the round's seed). Runs SQL: call it in
        a worker. Raises TavernError when the playthrough plays no group."""
        group = self.group_of(playthrough_id)
        if group is None:
            raise TavernError(f"playthrough {playthrough_id} is not a group chat")
        view = self.playthroughs.playthrough(playthrough_id)
        messages = self.playthroughs.messages(playthrough_id, last=TURN_WINDOW)
        # Seeded by where the round starts, so the same round played again picks the same members.
        seed = f"{view.session_id}:{messages[-1].ref[1] if messages else 0}"
        return group, said(messages, group.members[0].character_id), seed

    async def play_round(self, playthrough_id: int, text: str = "", *,
                         allow_secrets: bool = False) -> AsyncGenerator[MemberTurn | LineQueued | Any, None]:
        """One line from the person (or none: the members go on by themselves), then one step per
        member the group's turn order picks, each a normal step with its own trace; every reply
        is history for the next member. Yields a `MemberTurn` before each member's step, then
        that step's updates (`StepRunner.send` / `generate`); `LineQueued` when nobody replies.

        Raises:
            TavernError: not a group chat; as `StepRunner.send` (nothing is lost: a refused line
                stays queued). asyncio.CancelledError: the round stops; the member's partial reply
                is kept and the members after it do not speak.
        """
        if self._steps is None or self._inbox is None:
            raise TavernError("this service cannot run steps")
        group, chat, seed = await asyncio.to_thread(self.turn_state, playthrough_id)
        ids = self.next_speakers(group, chat, text, seed=seed)
        if not ids:
            if text.strip():
                await asyncio.to_thread(self._inbox().add, playthrough_id, text, allow_secrets=allow_secrets)
                yield LineQueued(text)
            return
        names = {m.character_id: m.name for m in group.members}
        for position, member in enumerate(ids, start=1):
            yield MemberTurn(member, names[member], position, len(ids))
            if position == 1 and text:
                steps = self._steps().send(playthrough_id, text, allow_secrets=allow_secrets, speaker=member)
            else:
                steps = self._steps().generate(playthrough_id, speaker=member)
            async with aclosing(steps) as updates:
                async for update in updates:
                    yield update

    def upcoming(self, playthrough_id: int) -> tuple[GroupView | None, list[str] | None]:
        """(the playthrough's group, the names of the members an empty line would have speak
        next). The names are None in natural order (a random draw: no guess to show) and in
        manual order. Runs SQL: call it in a worker."""
        group = self.group_of(playthrough_id)
        if group is None or group.strategy not in ("list", "pooled"):
            return group, None
        _group, chat, seed = self.turn_state(playthrough_id)
        names = {m.character_id: m.name for m in group.members}
        return group, [names[i] for i in self.next_speakers(group, chat, "", seed=seed)]

    async def play_queued(self, playthrough_id: int) -> AsyncGenerator[MemberTurn | LineQueued | Any, None]:
        """A round answering the lines waiting in the inbox (typed while another round ran): the
        members the turn order picks for them, the first taking the lines as its input (`speak`);
        `LineQueued` when nobody would reply. Raises as `play_round`."""
        if self._inbox is None:
            raise TavernError("this service cannot run steps")
        inbox = self._inbox()

        def plan() -> tuple[str, list[int]]:
            group, chat, seed = self.turn_state(playthrough_id)
            text = "\n".join(item.text for item in inbox.pending(playthrough_id))
            return text, self.next_speakers(group, chat, text, seed=seed)

        text, ids = await asyncio.to_thread(plan)
        if not ids:
            yield LineQueued(text)
            return
        for member in ids:
            async with aclosing(self.speak(playthrough_id, member)) as updates:
                async for update in updates:
                    yield update

    async def speak(self, playthrough_id: int, character: str | int) -> AsyncGenerator[MemberTurn | Any, None]:
        """One member replies now, whatever the turn order (SillyTavern's "speak now", a manual
        group's way forward, a muted member too); lines waiting in the inbox are its input.

        Raises:
            TavernError: not a group chat, or the character is not a member. NotFound: no such
                character. Step errors: as `play_round`.
        """
        if self._steps is None or self._inbox is None:
            raise TavernError("this service cannot run steps")
        group, _chat, _seed = await asyncio.to_thread(self.turn_state, playthrough_id)
        member = next((m for m in group.members if str(character).strip().casefold()
                       in (str(m.character_id), m.name.casefold())), None)
        if member is None:
            raise TavernError(f"{character!r} is not a member of {group.name!r} "
                              f"(members: {', '.join(m.name for m in group.members)})")
        waiting = bool(await asyncio.to_thread(self._inbox().pending, playthrough_id))
        yield MemberTurn(member.character_id, member.name, 1, 1)
        async with aclosing(self._steps().generate(playthrough_id, speaker=member.character_id,
                                                   claim=waiting)) as updates:
            async for update in updates:
                yield update

    # --- turn order ---------------------------------------------------------------------------

    def next_speakers(self, group: GroupView, chat: Sequence[Said], user_text: str = "",
                      seed: int | str | None = None) -> list[int]:
        """The character ids that reply, in order, to `user_text` after `chat` (oldest first), by
        the group's turn order (`group_order.speakers`), seeded by `seed` so a round played again
        picks the same members."""
        cast = [Member(str(m.character_id), m.name, m.talkativeness, m.muted) for m in group.members]
        rng = random.Random(seed)
        keys = speakers(Strategy.parse(group.strategy), cast, chat, user_text,
                        allow_self_responses=group.allow_self_responses, rng=rng)
        return [int(key) for key in keys]


@dataclass(frozen=True)
class GroupSetting:
    """What a group playthrough's step reads of its group.

    Attributes:
        cast: the member names the macros read. members: (character record, muted) in order.
        mode: 0 swap, 1 join, 2 join with muted members. join_prefix / join_suffix: as `GroupRecord`.
    """

    cast: GroupCast
    members: tuple[tuple[CharacterRecord, bool], ...]
    mode: int = 0
    join_prefix: str = ""
    join_suffix: str = ""


def group_setting(uow: UnitOfWork, playthrough_id: int) -> GroupSetting | None:
    """The group a playthrough plays, as its steps read it, read in `uow`; None for a
    one-character playthrough."""
    group_id = uow.groups.group_of(playthrough_id) if playthrough_id > 0 else None
    if group_id is None:
        return None
    record = uow.groups.get(group_id)
    members = tuple((uow.characters.get(m.character_id), m.muted) for m in record.members)
    cast = GroupCast(tuple(c.name for c, _muted in members), frozenset(c.name for c, muted in members if muted))
    return GroupSetting(cast, members, record.generation_mode, record.join_prefix, record.join_suffix)


JOINED_FIELDS = (("description", "Description"), ("personality", "Personality"), ("scenario", "Scenario"),
                 ("mes_example", "Example Messages"))
"""The card fields join mode joins, with the name `<FIELDNAME>` stands for (`getGroupCharacterCards`)."""

_FIELDNAME = re.compile(r"<FIELDNAME>", re.IGNORECASE)


def joined_card(setting: GroupSetting, speaker_id: int, cards: dict[int, dict[str, Any]], user: str) -> dict[str, str]:
    """Join mode's card fields (SillyTavern `getGroupCharacterCards`): for each member in order
    (a muted one only when it speaks, or in mode 2), each field trimmed, its names filled in as
    that member's, between the group's join prefix and suffix (`<FIELDNAME>` replaced by the
    field's name, one line apart); the members' texts joined one per line, empty ones left out.

    Args:
        cards: each member's card `data` by character id.
    Returns:
        {"description", "personality", "scenario", "mes_example"} → the joined text.
    """
    parts: dict[str, list[str]] = {key: [] for key, _label in JOINED_FIELDS}
    for character, muted in setting.members:
        if muted and character.id != speaker_id and setting.mode != 2:
            continue
        data = cards[character.id]
        for key, label in JOINED_FIELDS:
            value = str(data.get(key) or "").strip()
            if not value:
                continue
            prefix = substitute_names(_FIELDNAME.sub(label, setting.join_prefix).strip(), character.name, user)
            suffix = substitute_names(_FIELDNAME.sub(label, setting.join_suffix).strip(), character.name, user)
            text = substitute_names(value, character.name, user)
            parts[key].append(f"{prefix + chr(10) if prefix else ''}{text}{chr(10) + suffix if suffix else ''}")
    return {key: "\n".join(texts) for key, texts in parts.items()}


def said(messages: Sequence[MessageView], first_member: int) -> list[Said]:
    """The turn order's view of a chat: each message's speaker (a reply without a recorded
    member is the first member's: the greeting, or a reply from before the group)."""
    out = []
    for message in messages:
        if message.role == "assistant":
            member = message.character_id if message.character_id is not None else first_member
            out.append(Said(str(member), message.speaker, message.content))
        elif message.role == "user":
            out.append(Said(None, message.speaker, message.content, is_user=True))
        else:
            out.append(Said(None, message.speaker, message.content, is_system=True))
    return out


def _mode(mode: str) -> int:
    try:
        return MODES[mode.strip().lower()]
    except KeyError:
        raise TavernError(f"unknown card mode {mode!r} (swap or join)") from None
