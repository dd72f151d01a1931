"""Reads and writes SillyTavern group files: a group's definition (`data/<user>/groups/<id>.json`)
and its chats (`group chats/<chat_id>.jsonl`).

Rules: SillyTavern `src/endpoints/groups.js` (`/create` writes `{id, name, members, avatar_url,
allow_self_responses, activation_strategy, generation_mode, disabled_members, chat_metadata, fav,
chat_id, chats, auto_mode_delay, generation_mode_join_prefix, generation_mode_join_suffix}`,
indented by 4; members and disabled members are card avatar file names) and
`public/scripts/group-chats.js` (a reply's speaker is its `original_avatar`, falling back to the
character whose `name` it bears, as `activateSwipe` does for chats saved before that field; a
group chat file is messages only, or since 1.13 a header line first). A group chat's lines are
read by `chatlog.parse_chat_jsonl`, which accepts both. Pure: bytes in, objects out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.errors import FormatError
from tavern_tui.formats.chatlog import ChatLine, ParsedChat, parse_chat_jsonl, write_chat_jsonl
from tavern_tui.formats.jsontypes import load_json_object, type_name

GENERATION_MODES = {0: "swap", 1: "join", 2: "join"}
"""`group_generation_mode`: SWAP 0; APPEND 1 and APPEND_DISABLED 2 both join the members' cards
(2 keeps muted members' cards in, 1 only the speaker's among the muted)."""

AUTO_MODE_DELAY = 5
"""Seconds between auto-mode turns when the file sets none (`DEFAULT_AUTO_MODE_DELAY`)."""


@dataclass
class STGroup:
    """A SillyTavern group definition.

    Attributes:
        id: the group's id (ST: creation time in ms, as a string).
        name: the group's name.
        members: the members' card avatar file names ("seraphina.png"), in the group's order.
        disabled_members: the muted members' avatar file names.
        activation_strategy: 0 natural, 1 list, 2 manual, 3 pooled (`group_activation_strategy`).
        generation_mode: 0 swap, 1 join (append), 2 join including muted members.
        allow_self_responses: a member may answer its own reply (natural order).
        join_prefix / join_suffix: `generation_mode_join_prefix/suffix` around each member's
            card field in join mode (`<FIELDNAME>` stands for the field's name).
        chat_id: the chat the group has open; chats: every chat's id (file name without .jsonl).
        auto_mode_delay: seconds between auto-mode turns. fav: starred.
        raw: the whole object as read; `write_group` starts from it so unknown fields survive.
    """

    id: str
    name: str
    members: list[str]
    disabled_members: list[str] = field(default_factory=list)
    activation_strategy: int = 0
    generation_mode: int = 0
    allow_self_responses: bool = False
    join_prefix: str = ""
    join_suffix: str = ""
    chat_id: str = ""
    chats: list[str] = field(default_factory=list)
    auto_mode_delay: float = AUTO_MODE_DELAY
    fav: bool = False
    raw: dict = field(default_factory=dict)

    @property
    def join(self) -> bool:
        """Whether the members' cards are joined into one (generation mode 1 or 2)."""
        return self.generation_mode in (1, 2)


def _strings(obj: Mapping[str, Any], key: str, file: str) -> list[str]:
    value = obj.get(key, [])
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise FormatError(file, f"must be a list of strings (card file names), not a {type_name(value)}", key)
    return list(value)


def _number(obj: Mapping[str, Any], key: str, default: float, file: str, allowed: range | None = None) -> float:
    value = obj.get(key, default)
    if value is None:
        return default
    if isinstance(value, str) and value.strip().lstrip("-").replace(".", "", 1).isdigit():
        value = float(value)  # Number("1") in SillyTavern's reader
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FormatError(file, f"must be a number, not a {type_name(value)}", key)
    if allowed is not None and value not in allowed:
        raise FormatError(file, f"is {value!r}; SillyTavern knows {allowed.start}..{allowed.stop - 1}", key)
    return value


def parse_group(data: bytes, file: str) -> STGroup:
    """Parse a SillyTavern group definition (`groups/<id>.json`).

    Raises:
        FormatError: not a JSON object (see `load_json_object`); no `members` list (not a group
            file); `members`/`disabled_members`/`chats` not lists of strings; `name`, `id` or
            `chat_id` not text; `activation_strategy` outside 0..3 or `generation_mode` outside
            0..2 (the field named each time).
    """
    obj = load_json_object(data, file)
    if "members" not in obj:
        raise FormatError(file, "not a SillyTavern group: no members list")
    members = _strings(obj, "members", file)
    texts = {}
    for key in ("id", "name", "chat_id", "generation_mode_join_prefix", "generation_mode_join_suffix"):
        value = obj.get(key, "")
        if isinstance(value, int | float) and not isinstance(value, bool) and key in ("id", "chat_id"):
            value = str(value)  # ids are Date.now() strings; a hand-made file may hold the number
        if value is not None and not isinstance(value, str):
            raise FormatError(file, f"must be text, not a {type_name(value)}", key)
        texts[key] = value or ""
    group_id = texts["id"] or file.rsplit("/", 1)[-1].removesuffix(".json")
    chats = _strings(obj, "chats", file)
    return STGroup(
        id=group_id,
        name=texts["name"] or "New Group",
        members=members,
        disabled_members=_strings(obj, "disabled_members", file),
        activation_strategy=int(_number(obj, "activation_strategy", 0, file, range(4))),
        generation_mode=int(_number(obj, "generation_mode", 0, file, range(3))),
        allow_self_responses=bool(obj.get("allow_self_responses", False)),
        join_prefix=texts["generation_mode_join_prefix"],
        join_suffix=texts["generation_mode_join_suffix"],
        chat_id=texts["chat_id"] or (chats[-1] if chats else group_id),
        chats=chats or [texts["chat_id"] or group_id],
        auto_mode_delay=_number(obj, "auto_mode_delay", AUTO_MODE_DELAY, file),
        fav=bool(obj.get("fav", False)),
        raw=obj,
    )


def write_group(group: STGroup) -> str:
    """The group as SillyTavern writes it (`JSON.stringify(group, null, 4)`): the fields it reads
    from `group`, over whatever else the file it came from held."""
    out = dict(group.raw)
    out.update({
        "id": group.id, "name": group.name, "members": list(group.members),
        "avatar_url": out.get("avatar_url", "img/ai4.png"),
        "allow_self_responses": group.allow_self_responses,
        "activation_strategy": group.activation_strategy, "generation_mode": group.generation_mode,
        "disabled_members": list(group.disabled_members), "chat_metadata": out.get("chat_metadata", {}),
        "fav": group.fav, "chat_id": group.chat_id, "chats": list(group.chats),
        "auto_mode_delay": group.auto_mode_delay,
        "generation_mode_join_prefix": group.join_prefix, "generation_mode_join_suffix": group.join_suffix,
    })
    return json.dumps(out, ensure_ascii=False, indent=4)


def speaker_of(line: ChatLine, names: Mapping[str, str]) -> str | None:
    """The avatar file name of the member who wrote `line`: its `original_avatar`, else the member
    whose name it bears (`names`: avatar → name, as `activateSwipe` matches a chat saved before
    `original_avatar`); None for the person's and system lines or an unknown name."""
    if line.is_user or line.is_system:
        return None
    avatar = line.raw.get("original_avatar")
    if isinstance(avatar, str) and avatar:
        return avatar
    return next((key for key, name in names.items() if name == line.name), None)


def parse_group_chat(data: bytes, file: str) -> ParsedChat:
    """A group chat file: as `chatlog.parse_chat_jsonl` (a file of messages only is read without
    the "no chat header" warning, since SillyTavern wrote group chats so before 1.13)."""
    chat = parse_chat_jsonl(data, file)
    chat.warnings = [w for w in chat.warnings if "no chat header" not in w]
    return chat


def group_chat_line(name: str, text: str, *, avatar: str | None, is_user: bool = False,
                    swipes: list[str] | None = None, swipe_id: int = 0, send_date: str | None = None) -> ChatLine:
    """A message line of a group chat: a member's reply carries `original_avatar` (its speaker);
    `swipes` default to `[text]`."""
    shown = swipes or [text]
    raw: dict[str, Any] = {"name": name, "is_user": is_user, "is_system": False}
    if avatar is not None:
        raw["original_avatar"] = avatar
    return ChatLine(line_no=0, name=name, is_user=is_user, is_system=False, swipes=list(shown),
                    swipe_id=swipe_id, send_date=send_date, raw=raw, had_swipes=swipes is not None)


def write_group_chat(lines: list[ChatLine], chat_metadata: Mapping[str, Any] | None = None) -> str:
    """A group chat file as SillyTavern 1.13+ writes it: a header line, then one line a message."""
    header = {"chat_metadata": dict(chat_metadata or {}), "user_name": "unused", "character_name": "unused"}
    return write_chat_jsonl(header, lines)
