"""Provides `GroupFileService`: SillyTavern group definitions and group chats, imported and exported.

Rules: SillyTavern `src/endpoints/groups.js` (a group is `groups/<id>.json`; its `members` and
`disabled_members` are card avatar file names, "Seraphina.png") and `public/scripts/group-chats.js`
with `script.js` `saveReply` (a member's reply carries `original_avatar`, its card's avatar file
name, and `name`; a group chat is `group chats/<chat id>.jsonl`, the id listed in the group's
`chats`). Here a member's avatar is matched to the character imported from that file
(`source_name`), else to the character whose name is the file's stem (case-insensitive); the
newest such import wins. An imported group remembers its SillyTavern id, each member's avatar name
and every field this app has no use for (`GroupRecord.data["st"]`), so exporting it writes them
back. A member's reply becomes an `assistant/message` event whose body holds `name` (as written)
and `character_id` (the member), as a group round's replies do.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import Any

from tavern_tui.engine.events import EventKind, NewEvent
from tavern_tui.engine.step import OPENING_SOURCE
from tavern_tui.errors import FormatError, NotFound, SecretRefused, TavernError
from tavern_tui.formats.chatlog import ChatLine, ParsedChat, write_chat_jsonl
from tavern_tui.formats.groups import (
    AUTO_MODE_DELAY,
    STGroup,
    parse_group,
    parse_group_chat,
    speaker_of,
    write_group,
    write_group_chat,
)
from tavern_tui.service.chat_files import ChatFileService, plan_chat
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.groups import GroupService
from tavern_tui.service.secrets import configured_secrets, refuse_configured
from tavern_tui.store.groups import GroupMemberRecord, GroupRecord
from tavern_tui.store.repositories import CharacterRecord
from tavern_tui.text.names import substitute_names
from tavern_tui.views import ImportResult

ST_DATA = "st"
"""`GroupRecord.data` key of an imported group's SillyTavern facts: `id` (its SillyTavern id),
`avatars` (character id as text → avatar file name) and `raw` (the definition's other fields)."""

_MODELLED = ("members", "disabled_members")
"""Definition fields rebuilt from the stored cast on export (the rest of `raw` is written back)."""

GROUP_CHAT_MARK = b'"original_avatar":'
"""A chat line key only group chats carry (`saveReply` sets it when a group is selected)."""


def is_group_chat(data: bytes) -> bool:
    """Whether a chat file's lines name their speaker's card (`original_avatar`): a group chat."""
    return GROUP_CHAT_MARK in data


def match_avatar(avatar: str, characters: Iterable[CharacterRecord]) -> CharacterRecord | None:
    """The character a SillyTavern avatar file name ("Seraphina.png") stands for: the newest
    imported from a file of that name, else the newest named as the file's stem (both
    case-insensitive, archived ones last); None when none matches."""
    ranked = sorted(characters, key=lambda c: (c.archived_at is None, c.id), reverse=True)
    wanted = avatar.casefold()
    by_file = next((c for c in ranked if c.source_name.casefold() == wanted), None)
    if by_file is not None:
        return by_file
    stem = PurePosixPath(avatar).stem.casefold()
    return next((c for c in ranked if c.name.casefold() == stem), None)


def _st(record: GroupRecord) -> dict[str, Any]:
    found = record.data.get(ST_DATA)
    return found if isinstance(found, dict) else {}


def member_avatars(record: GroupRecord, characters: Mapping[int, CharacterRecord]) -> dict[int, str]:
    """Each member's avatar file name: the one its imported definition gave, else its card's
    file name (`source_name`)."""
    stored = _st(record).get("avatars")
    stored = stored if isinstance(stored, dict) else {}
    out = {}
    for member in record.members:
        given = stored.get(str(member.character_id))
        character = characters.get(member.character_id)
        out[member.character_id] = given if isinstance(given, str) and given else (
            character.source_name if character is not None else f"{member.character_id}.png")
    return out


@dataclass(frozen=True, slots=True)
class _Cast:
    """Who may speak in an imported group chat: avatar → character id, and character id → name."""

    by_avatar: dict[str, int]
    names: dict[int, str]

    def speaker(self, line: ChatLine, characters: Sequence[CharacterRecord]) -> int | None:
        """The character who wrote `line` (see `speaker_of`); a non-member (one removed from the
        group) by its avatar or name among every character; None when nobody matches."""
        avatar = speaker_of(line, {a: self.names[i] for a, i in self.by_avatar.items()})
        if avatar is not None and avatar in self.by_avatar:
            return self.by_avatar[avatar]
        found = match_avatar(avatar, characters) if avatar else None
        if found is None and line.name:
            found = next((c for c in sorted(characters, key=lambda c: -c.id)
                          if c.name.casefold() == line.name.casefold()), None)
        return found.id if found is not None else None


class GroupFileService:
    """SillyTavern group files (`tavern.group_files`).

    Args:
        ctx: the shared settings and store. groups: the groups chats are imported into.
        chat_files: the chat import and export a group chat's lines go through.
    """

    def __init__(self, ctx: ServiceContext, groups: GroupService, chat_files: ChatFileService) -> None:
        self.ctx = ctx
        self.groups = groups
        self.chat_files = chat_files

    # --- the definition ----------------------------------------------------------------------

    def import_group_bytes(self, payload: bytes, name: str) -> ImportResult:
        """Import a SillyTavern group definition (`groups/<id>.json`) as a group, in one
        transaction, without a playthrough (its chats are imported with `import_group_chat_bytes`).

        The cast keeps the file's order; `disabled_members` are muted; strategy, card mode,
        self-responses and join prefix/suffix are taken as they are; every other field is kept
        for export. A file whose SillyTavern id was imported before stores nothing (`duplicate`).

        Returns:
            An ImportResult of kind "group" (id: the group); `error` when the file is not a
            group (names the field), has no members, names one card twice, or names a member
            that matches no character ("import its card first"): nothing is stored then.
        """
        try:
            group = parse_group(payload, name)
        except FormatError as exc:
            return ImportResult(name, "group", error=str(exc))
        with self.ctx.store.unit_of_work(write=False) as uow:
            earlier = next((r for r in uow.groups.all() if _st(r).get("id") == group.id), None)
            characters = uow.characters.all()
        if earlier is not None:
            return ImportResult(name, "group", earlier.id, earlier.name, duplicate=True)
        try:
            ids = _member_ids(group, characters, name)
        except TavernError as exc:
            return ImportResult(name, "group", error=str(exc))
        muted = set(group.disabled_members)
        raw = {k: v for k, v in group.raw.items() if k not in _MODELLED}
        record = GroupRecord(0, group.name, tuple(GroupMemberRecord(i, a in muted) for a, i in zip(group.members, ids)),
                             group.activation_strategy, group.generation_mode, group.allow_self_responses,
                             group.join_prefix, group.join_suffix,
                             {ST_DATA: {"id": group.id, "raw": raw,
                                        "avatars": {str(i): a for a, i in zip(group.members, ids)}}})
        with self.ctx.store.unit_of_work() as uow:
            stored = uow.groups.add(record)
        return ImportResult(name, "group", stored.id, stored.name)

    def export_group(self, query: str | int) -> str:
        """The group (id or name) as a SillyTavern definition (`write_group`: indented by 4):
        members and muted members as avatar file names, `chats` the chat ids of its
        playthroughs (an imported chat's file name without .jsonl; else "NAME - DATE", what
        to name its exported file in `group chats/`), `chat_id` the newest; an imported group's
        id and other fields as they were. Raises NotFound."""
        found = self.groups.group(query)
        with self.ctx.store.unit_of_work(write=False) as uow:
            record = uow.groups.get(found.id)
            characters = {c.id: c for c in uow.characters.all()}
            chats = [chat_id(uow.playthroughs.get(p), record.name) for p in uow.groups.playthroughs(found.id)]
        st = _st(record)
        raw = dict(st.get("raw") or {})
        avatars = member_avatars(record, characters)
        chats = chats or [c for c in raw.get("chats", []) if isinstance(c, str)]
        delay = raw.get("auto_mode_delay", AUTO_MODE_DELAY)
        created = record.created_at
        group_id = str(st.get("id") or (int(created.timestamp() * 1000) if created else record.id))
        return write_group(STGroup(
            id=group_id, name=record.name, members=[avatars[m.character_id] for m in record.members],
            disabled_members=[avatars[m.character_id] for m in record.members if m.muted],
            activation_strategy=record.strategy, generation_mode=record.generation_mode,
            allow_self_responses=record.allow_self_responses, join_prefix=record.join_prefix,
            join_suffix=record.join_suffix, chat_id=chats[-1] if chats else group_id, chats=chats or [group_id],
            auto_mode_delay=delay if isinstance(delay, int | float) and not isinstance(delay, bool)
            else AUTO_MODE_DELAY, fav=bool(raw.get("fav", False)), raw=raw))

    # --- its chats -----------------------------------------------------------------------------

    def import_group_chat_bytes(self, payload: bytes, name: str, *, group: str | int | None = None) -> ImportResult:
        """Import a SillyTavern group chat (.jsonl) as a new playthrough of a group, in one
        transaction: each line an event and each swipe a sibling as `ChatFileService` imports a
        chat (no greeting is added: the file's first messages are the chat's), each reply with
        `name` and `character_id` (its speaker: `original_avatar`, else the member of that name).

        Args:
            group: the group (id or name); None: the imported group whose `chats` list this
                file's name (without .jsonl).

        Returns:
            An ImportResult of kind "chat" (id: the new playthrough; `duplicate` when these bytes
            were imported before); `error` for a malformed line, a credential in the file, no
            such group / no group named, or a reply whose speaker matches no character.
        """
        try:
            refuse_configured(payload.decode("utf-8", "replace"),
                              configured_secrets(self.ctx.settings, self.ctx.provider), name)
            chat = parse_group_chat(payload, name)
            record, characters = self._chat_group(group, name)
            cast = _cast(record, characters)
            speakers = _speakers(chat, cast, characters, name)
            sessions, events = plan_chat(chat, name)
        except (SecretRefused, FormatError, NotFound, TavernError) as exc:
            return ImportResult(name, "chat", error=str(exc))
        for _key, event in events:
            line = (event.body.get("imported") or {}).get("line")
            if event.kind == EventKind.ASSISTANT_MESSAGE and line in speakers:
                _tag(event, speakers[line], cast.names)
        first = record.members[0].character_id
        result = self.chat_files.store_chat(chat, payload, name, (first, cast.names[first]), sessions, events,
                                            group_id=record.id, label=record.name)
        members = {m.character_id for m in record.members}
        strangers = sorted({c.name for c in characters if c.id in set(speakers.values()) - members})
        if strangers and result.error is None:  # kept (a member since removed?), but said
            note = (f"{', '.join(strangers)} wrote replies here but "
                    f"{'is' if len(strangers) == 1 else 'are'} not in {record.name!r}; kept under their names")
            result = replace(result, warnings=(*result.warnings, note))
        return result

    def _chat_group(self, query: str | int | None, file: str) -> tuple[GroupRecord, list[CharacterRecord]]:
        """The group a chat goes into, and every character. Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            records = uow.groups.all()
            characters = uow.characters.all()
        if query is not None:
            found = self.groups.group(query)
            return next(r for r in records if r.id == found.id), characters
        stem = Path(file).stem
        listed = [r for r in records if stem in (_st(r).get("raw") or {}).get("chats", [])]
        if len(listed) == 1:
            return listed[0], characters
        raise NotFound(f"{file}: a SillyTavern group chat (its replies name their speaker's card); pass --group GROUP "
                       "(import the group's groups/<id>.json first, or make one with `tavern group new`)")

    def export_chat(self, playthrough_id: int) -> str:
        """The playthrough as a SillyTavern chat file: a group's as a group chat (SillyTavern
        1.13+: a header line, then the messages), each reply with `name` and `original_avatar`
        (its member's avatar file name; an imported line keeps its own), swipes as
        `ChatFileService.export_chat` writes them; an imported chat keeps its header. Any other
        playthrough: `ChatFileService.export_chat`. Raises NotFound."""
        with self.ctx.store.unit_of_work(write=False) as uow:
            group_id = uow.groups.group_of(playthrough_id)
            if group_id is None:
                record = None
            else:
                record = uow.groups.get(group_id)
                characters = {c.id: c for c in uow.characters.all()}
                imported = json.loads(uow.playthroughs.get(playthrough_id).meta or "{}").get("header")
        if record is None:
            return self.chat_files.export_chat(playthrough_id)
        header, pairs = self.chat_files.export_lines(playthrough_id)
        avatars = member_avatars(record, characters)
        first = record.members[0].character_id
        own = self.groups.playthroughs.playthrough(playthrough_id)
        lines = []
        for message, line in pairs:
            if message.role == "assistant" and not line.is_system:
                speaker = message.body.get("character_id")
                speaker = speaker if isinstance(speaker, int) else first
                if message.source == OPENING_SOURCE and speaker != own.character_id and speaker in characters:
                    self._member_greetings(line, message.body, characters[speaker], own.user_name)
                avatar = avatars.get(speaker) or (characters[speaker].source_name if speaker in characters else None)
                if avatar and not isinstance(line.raw.get("original_avatar"), str):
                    line.raw["original_avatar"] = avatar
            lines.append(line)
        if imported:
            return write_chat_jsonl(header, lines)
        return write_group_chat(lines, header.get("chat_metadata") if isinstance(header.get("chat_metadata"), dict)
                                else {})


    def _member_greetings(self, line: ChatLine, body: Mapping[str, Any], member: CharacterRecord, user: str) -> None:
        """A later member's greeting swipes among its own card's greetings (`export_lines` gave it
        the playthrough's character's), the one shown at its `greeting_index`."""
        card = self.groups.library.card(member)
        greetings = [substitute_names(g, card.name, user) for g in card.greetings]
        index = body.get("greeting_index", 0)
        swipes = list(greetings) if len(greetings) > 1 else [line.mes]
        chosen = index if isinstance(index, int) and 0 <= index < len(swipes) else 0
        info = line.swipe_info[line.swipe_id] if line.swipe_id < len(line.swipe_info) else {}
        swipes[chosen] = line.mes
        line.swipes, line.swipe_id, line.swipe_info = swipes, chosen, [dict(info) for _ in swipes]
        line.had_swipes = len(swipes) > 1


def chat_id(playthrough: Any, group_name: str) -> str:
    """A playthrough's SillyTavern group chat id: its title (an imported chat's file name without
    .jsonl), else "GROUP - YYYY-MM-DD@HHhMMmSSs" from its creation (`humanizedDateTime`)."""
    if playthrough.title:
        return str(playthrough.title)
    return f"{group_name} - {playthrough.created_at:%Y-%m-%d@%Hh%Mm%Ss}"


def _member_ids(group: STGroup, characters: Sequence[CharacterRecord], file: str) -> list[int]:
    """The character each member avatar stands for (`match_avatar`), in order.

    Raises:
        TavernError: no members; members matching no character (each named, "import its card
            first"); two avatars standing for one character.
    """
    if not group.members:
        raise TavernError(f"{file}: the group {group.name!r} has no members")
    found = [match_avatar(avatar, characters) for avatar in group.members]
    missing = [a for a, c in zip(group.members, found) if c is None]
    if missing:
        listed = ", ".join(f"{a!r} (no card imported from that file, no character named "
                           f"{PurePosixPath(a).stem!r})" for a in missing)
        raise TavernError(f"{file}: member{'s' if len(missing) > 1 else ''} {listed} of group {group.name!r} "
                          f"match{'' if len(missing) > 1 else 'es'} no character; import "
                          f"{'their cards' if len(missing) > 1 else 'its card'} first, then this file again")
    ids = [c.id for c in found if c is not None]
    if len(set(ids)) != len(ids):
        raise TavernError(f"{file}: two members of {group.name!r} stand for the same character")
    return ids


def _cast(record: GroupRecord, characters: Sequence[CharacterRecord]) -> _Cast:
    """The group's members by avatar (its imported avatar name and its card's file name)."""
    by_id = {c.id: c for c in characters}
    avatars = member_avatars(record, by_id)
    by_avatar: dict[str, int] = {}
    for member in record.members:
        by_avatar[avatars[member.character_id]] = member.character_id
        if member.character_id in by_id:
            by_avatar.setdefault(by_id[member.character_id].source_name, member.character_id)
    names = {c.id: c.name for c in characters}
    return _Cast(by_avatar, names)


def _speakers(chat: ParsedChat, cast: _Cast, characters: Sequence[CharacterRecord], file: str) -> dict[int, int]:
    """Each reply's speaker: line number → character id.

    Raises:
        TavernError: replies whose speaker matches no character (line, name and avatar named).
    """
    out: dict[int, int] = {}
    unknown = []
    for line in chat.messages:
        if line.is_user or line.is_system:
            continue
        speaker = cast.speaker(line, characters)
        if speaker is None:
            avatar = line.raw.get("original_avatar")
            unknown.append(f"line {line.line_no}: {line.name!r}" + (f" ({avatar})" if isinstance(avatar, str) else ""))
        else:
            out[line.line_no] = speaker
    if unknown:
        raise TavernError(f"{file}: no character wrote {'; '.join(unknown[:5])}"
                          f"{f' and {len(unknown) - 5} more' if len(unknown) > 5 else ''}; import the card first")
    return out


def _tag(event: NewEvent, character_id: int, names: Mapping[int, str]) -> None:
    """Mark an imported reply as the member's: `character_id`, and `name` when the line had none."""
    event.body["character_id"] = character_id
    if not event.body.get("name"):
        event.body["name"] = names.get(character_id, "")
