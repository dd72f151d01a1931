"""Provides the turn order of a group chat: which members reply to a line, and in what order.

The rules are SillyTavern's (`public/scripts/group-chats.js`, `generateGroupWrapper` and the
`activate*` functions), with its strategy numbers (`group_activation_strategy`):

- **natural** (0): the members named in the activation text reply first (for each word of the
  text, in order, the first member whose name has that word), then every member that wins a
  talkativeness roll (members in shuffled order; `roll <= talkativeness`, 0.5 when unset); if
  nobody did, one member at random from those with talkativeness above 0 (all, if none).
  Without new input, the author of the last reply is left out, unless `allow_self_responses`.
- **list** (1): every unmuted member, once each, in the group's order.
- **manual** (2): nobody replies to the person's line; a turn asked without one (`tavern group
  speak`, auto mode) goes to one member at random.
- **pooled** (3): one member who has not replied since the person last spoke, at random; when
  all have, one at random other than the last reply's author.

Words are JavaScript's `\\b\\w+\\b` over ASCII word characters, lower-cased (`extractAllWords`):
a name in another script is never matched by a mention, as in SillyTavern. Randomness comes
from the `random.Random` the caller passes, so a caller that seeds it from the line (the
session and the line's position) gets the same order when the round is played again.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum

TALKATIVENESS_DEFAULT = 0.5
"""A member whose card sets no talkativeness (SillyTavern's `talkativeness_default`)."""

_WORD = re.compile(r"\b\w+\b", re.ASCII)


class Strategy(IntEnum):
    """How a group picks who replies (SillyTavern's `group_activation_strategy` values)."""

    NATURAL = 0
    LIST = 1
    MANUAL = 2
    POOLED = 3

    @classmethod
    def parse(cls, value: str | int) -> Strategy:
        """A strategy from its name ("natural", "list", "manual", "pooled") or number.

        Raises:
            ValueError: neither a known name nor a known number.
        """
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            return cls(int(value))
        try:
            return cls[str(value).strip().upper()]
        except KeyError:
            names = ", ".join(s.name.lower() for s in cls)
            raise ValueError(f"unknown group strategy {value!r} (one of {names})") from None


@dataclass(frozen=True, slots=True)
class Member:
    """A group member as the turn order sees it.

    Attributes:
        key: what identifies the member (SillyTavern: the card's avatar file; here any stable id).
        name: the character's name (mentions match its words).
        talkativeness: 0..1, the chance to reply unprompted under natural order (None: 0.5).
        muted: a muted member never replies on its own (`disabled_members`).
    """

    key: str
    name: str
    talkativeness: float | None = None
    muted: bool = False


@dataclass(frozen=True, slots=True)
class Said:
    """One message of the chat as the turn order reads it (oldest first in a list).

    Attributes:
        speaker: the member key of a character reply (None for the person or a system line).
        name: the name it was sent under.
        text: what it says (the activation text when no new input).
        is_user: the person's line. is_system: a system or narrator line (skipped).
    """

    speaker: str | None
    name: str
    text: str = ""
    is_user: bool = False
    is_system: bool = False


def words(text: str) -> list[str]:
    """`extractAllWords`: the ASCII words of `text`, lower-cased, in order."""
    return [word.lower() for word in _WORD.findall(text)]


def shuffled(items: Sequence[str], rng: random.Random) -> list[str]:
    """A copy of `items` in SillyTavern's `shuffle` order (Fisher-Yates from the end)."""
    out = list(items)
    index = len(out)
    while index:
        pick = int(rng.random() * index)
        index -= 1
        out[index], out[pick] = out[pick], out[index]
    return out


def _unique(keys: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(keys))


def natural_order(members: Sequence[Member], text: str, last: Said | None, *, user_input: bool,
                  allow_self_responses: bool, rng: random.Random) -> list[str]:
    """`activateNaturalOrder` over the unmuted `members`: mentioned members in word order, then
    talkativeness winners in shuffled order, else one chatty member at random; keys, unique."""
    banned = None if allow_self_responses or user_input or last is None or last.is_user else last.name
    active: list[str] = []
    for word in words(text):
        for member in members:
            if member.name != banned and word in words(member.name):
                active.append(member.key)
                break
    by_key = {m.key: m for m in members}
    chatty: list[str] = []
    for key in shuffled([m.key for m in members], rng):
        member = by_key[key]
        if member.name == banned:
            continue
        roll = rng.random()
        talk = TALKATIVENESS_DEFAULT if member.talkativeness is None else member.talkativeness
        if talk >= roll:
            active.append(key)
        if talk > 0:
            chatty.append(key)
    pool = chatty or [m.key for m in members]
    if not active and pool:
        active.append(pool[int(rng.random() * len(pool))])
    return _unique(active)


def pooled_order(members: Sequence[Member], chat: Sequence[Said], *, user_input: bool,
                 rng: random.Random) -> list[str]:
    """`activatePooledOrder`: one member key, preferring those who have not replied since the
    person's last line ([] when there are no members)."""
    keys = [m.key for m in members]
    if not keys:
        return []
    spoken: set[str] = set()
    if not user_input:
        for said in reversed(chat):
            if said.is_user:
                break
            if not said.is_system and said.speaker is not None:
                spoken.add(said.speaker)
    fresh = [k for k in keys if k not in spoken]
    if fresh:
        return [fresh[int(rng.random() * len(fresh))]]
    last = chat[-1] if chat else None
    author = last.speaker if last is not None and not last.is_user and len(keys) > 1 else None
    pool = [k for k in keys if k != author] if author else keys
    return [pool[int(rng.random() * len(pool))]]


def speakers(strategy: Strategy, members: Sequence[Member], chat: Sequence[Said], user_text: str = "", *,
             allow_self_responses: bool = False, rng: random.Random | None = None) -> list[str]:
    """Who replies, in order, to `user_text` (the person's new line; "" for a turn asked without
    one) after `chat` (oldest first, not holding the new line), under `strategy`.

    Muted members are left out first, as SillyTavern's `enabledMembers`. Returns member keys,
    each once ([] when nobody replies: every member muted, or a manual group's line).
    """
    rng = rng or random.Random()
    enabled = [m for m in members if not m.muted]
    user_input = bool(user_text)
    last = chat[-1] if chat else None
    if strategy is Strategy.NATURAL:
        text = user_text if user_input else (last.text if last is not None and not last.is_system else "")
        return natural_order(enabled, text, last, user_input=user_input,
                             allow_self_responses=allow_self_responses, rng=rng)
    if strategy is Strategy.LIST:
        return _unique([m.key for m in enabled])
    if strategy is Strategy.POOLED:
        return pooled_order(enabled, chat, user_input=user_input, rng=rng)
    if user_input or not enabled:  # manual: the person's line waits for a member to be asked
        return []
    return shuffled([m.key for m in enabled], rng)[:1]


@dataclass(frozen=True, slots=True)
class GroupCast:
    """The names a group chat's prompt macros read (SillyTavern `getGroupValue`).

    Attributes:
        names: every member's name, in the group's order. muted: the muted members' names.
    """

    names: tuple[str, ...]
    muted: frozenset[str] = frozenset()

    def group(self) -> str:
        """`{{group}}` / `{{charIfNotGroup}}`: every member's name, joined by ", "."""
        return ", ".join(self.names)

    def not_muted(self) -> str:
        """`{{groupNotMuted}}`: the members not muted, joined by ", "."""
        return ", ".join(name for name in self.names if name not in self.muted)

    def not_char(self, char: str, user: str) -> str:
        """`{{notChar}}`: everyone in the chat but the speaker: the other members, then the person."""
        return ", ".join([*(name for name in self.names if name != char), user])
