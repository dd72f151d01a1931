"""Provides the group repository: group chats' casts (`models.GroupRow`) and the playthroughs that
play them."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from tavern_tui.errors import NotFound
from tavern_tui.store.models import GroupRow, Playthrough
from tavern_tui.store.times import as_utc


@dataclass(frozen=True, slots=True)
class GroupMemberRecord:
    """One member: a character and whether it is muted (never replies on its own)."""

    character_id: int
    muted: bool = False


@dataclass(frozen=True, slots=True)
class GroupRecord:
    """A stored group (fields as `models.GroupRow`; `members` in the group's order)."""

    id: int
    name: str
    members: tuple[GroupMemberRecord, ...]
    strategy: int = 0
    generation_mode: int = 0
    allow_self_responses: bool = False
    join_prefix: str = ""
    join_suffix: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    updated_at: datetime | None = None


def _members(text: str | None) -> tuple[GroupMemberRecord, ...]:
    items = json.loads(text or "[]")
    return tuple(GroupMemberRecord(int(m["character"]), bool(m.get("muted", False)))
                 for m in items if isinstance(m, dict) and isinstance(m.get("character"), int))


def _record(row: GroupRow) -> GroupRecord:
    data = json.loads(row.data or "{}")
    return GroupRecord(row.id, row.name, _members(row.members), row.strategy, row.generation_mode,
                       bool(row.allow_self_responses), row.join_prefix or "", row.join_suffix or "",
                       data if isinstance(data, dict) else {}, as_utc(row.created_at), as_utc(row.updated_at))


def _members_json(members: tuple[GroupMemberRecord, ...] | list[GroupMemberRecord]) -> str:
    return json.dumps([{"character": m.character_id, "muted": m.muted} for m in members])


class GroupRepository:
    """Groups: add, read, change the cast and settings; the playthroughs of a group."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, record: GroupRecord) -> GroupRecord:
        """Insert a group from `record` (its id and dates are ignored); returns it as stored."""
        now = datetime.now(UTC)
        row = GroupRow(name=record.name, members=_members_json(record.members), strategy=record.strategy,
                       generation_mode=record.generation_mode, allow_self_responses=record.allow_self_responses,
                       join_prefix=record.join_prefix, join_suffix=record.join_suffix,
                       data=json.dumps(record.data, ensure_ascii=False), created_at=now, updated_at=now)
        self._session.add(row)
        self._session.flush()
        return _record(row)

    def _row(self, group_id: int) -> GroupRow:
        row = self._session.get(GroupRow, group_id)
        if row is None:
            raise NotFound(f"no group with id {group_id} (`tavern group list` shows them)")
        return row

    def get(self, group_id: int) -> GroupRecord:
        """The group. Raises NotFound."""
        return _record(self._row(group_id))

    def all(self) -> list[GroupRecord]:
        """Every group, oldest first."""
        return [_record(row) for row in self._session.scalars(select(GroupRow).order_by(GroupRow.id))]

    def update(self, record: GroupRecord) -> GroupRecord:
        """Store `record`'s name, cast and settings over the group with its id. Raises NotFound."""
        row = self._row(record.id)
        row.name, row.members, row.strategy = record.name, _members_json(record.members), record.strategy
        row.generation_mode, row.allow_self_responses = record.generation_mode, record.allow_self_responses
        row.join_prefix, row.join_suffix = record.join_prefix, record.join_suffix
        row.data = json.dumps(record.data, ensure_ascii=False)
        row.updated_at = datetime.now(UTC)
        self._session.flush()
        return _record(row)

    def attach(self, playthrough_id: int, group_id: int) -> None:
        """Make a playthrough play the group. Raises NotFound (either missing)."""
        self._row(group_id)
        row = self._session.get(Playthrough, playthrough_id)
        if row is None:
            raise NotFound(f"no playthrough with id {playthrough_id}")
        row.group_id = group_id
        self._session.flush()

    def group_of(self, playthrough_id: int) -> int | None:
        """The group a playthrough plays (None: none, or no such playthrough)."""
        row = self._session.get(Playthrough, playthrough_id)
        return None if row is None else row.group_id

    def names_by_playthrough(self) -> dict[int, str]:
        """{playthrough id: its group's name} of every group chat, in one query (what lists name a
        group chat by: `tavern sessions`, search)."""
        query = select(Playthrough.id, GroupRow.name).join(GroupRow, GroupRow.id == Playthrough.group_id)
        return {pid: name for pid, name in self._session.execute(query)}

    def playthroughs(self, group_id: int) -> list[int]:
        """The ids of the playthroughs that play the group, oldest first."""
        query = select(Playthrough.id).where(Playthrough.group_id == group_id).order_by(Playthrough.id)
        return list(self._session.scalars(query))
