"""Provides the repositories of what surrounds playing: composer drafts, regex scripts and their
allowances, and opening drafts (a playthrough not begun yet; its first send prepares one, which
is the draft's until that send is admitted).
They flush, never commit, and return plain records (see `store.repositories`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from tavern_tui.engine.events import NewEvent, body_hash, canonical_json
from tavern_tui.errors import NotFound
from tavern_tui.store.models import (
    Character,
    ComposerDraft,
    EventRow,
    OpeningDraft,
    Playthrough,
    RegexAllowance,
    RegexScriptRow,
    SessionRow,
    WorldBook,
)
from tavern_tui.store.records import PlaythroughRecord
from tavern_tui.store.repositories import BindingRepository, PlaythroughRepository
from tavern_tui.store.times import as_utc


class DraftRepository:
    """Composer drafts: one unsent text per playthrough."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def get(self, playthrough_id: int) -> str:
        """The playthrough's draft ("" when none)."""
        row = self._session.get(ComposerDraft, playthrough_id)
        return row.text if row is not None else ""

    def put(self, playthrough_id: int, text: str) -> None:
        """Replace the draft; an empty text removes it."""
        row = self._session.get(ComposerDraft, playthrough_id)
        if not text:
            if row is not None:
                self._session.delete(row)
        elif row is None:
            self._session.add(ComposerDraft(playthrough_id=playthrough_id, text=text, updated_at=datetime.now(UTC)))
        else:
            row.text, row.updated_at = text, datetime.now(UTC)
        self._session.flush()


class RegexRepository:
    """Global regex scripts and the per-character allowance of card scripts."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def scripts(self) -> list[tuple[int, str, str, str]]:
        """Every global script as (id, name, data JSON, source file name), in run order."""
        rows = self._session.scalars(select(RegexScriptRow).order_by(RegexScriptRow.id))
        return [(r.id, r.name, r.data, r.source_name) for r in rows]

    def add(self, name: str, data: str, source_name: str) -> int:
        """Store one global script (at the end of the run order); returns its id."""
        row = RegexScriptRow(name=name, data=data, source_name=source_name, created_at=datetime.now(UTC))
        self._session.add(row)
        self._session.flush()
        return row.id

    def remove(self, script_id: int) -> None:
        """Delete a global script.

        Raises:
            NotFound: no such script.
        """
        row = self._session.get(RegexScriptRow, script_id)
        if row is None:
            raise NotFound(f"no regex script {script_id}")
        self._session.delete(row)
        self._session.flush()

    def allowed(self, character_sha256: str) -> bool:
        """Whether the card with this file hash may run its regex scripts."""
        return self._session.get(RegexAllowance, character_sha256) is not None

    def set_allowed(self, character_sha256: str, allowed: bool) -> None:
        """Allow (or withdraw) a card's regex scripts."""
        row = self._session.get(RegexAllowance, character_sha256)
        if allowed and row is None:
            self._session.add(RegexAllowance(character_sha256=character_sha256, allowed_at=datetime.now(UTC)))
        elif not allowed and row is not None:
            self._session.delete(row)
        self._session.flush()


@dataclass(frozen=True, slots=True)
class OpeningRecord:
    """A stored opening draft (`models.OpeningDraft`): `strategy` is the snapshot as a dict,
    `lore` the chat-lore book ids in order."""

    id: int
    character_id: int
    greeting_index: int
    preset_id: int | None
    strategy: dict
    lore: tuple[int, ...]
    user_name: str
    created_at: datetime
    updated_at: datetime
    persona_id: int | None = None
    line: str = ""
    """The first line typed into the draft and not sent yet."""


def _opening(row: OpeningDraft) -> OpeningRecord:
    strategy = json.loads(row.strategy or "{}")
    lore = json.loads(row.lore or "[]")
    return OpeningRecord(row.id, row.character_id, row.greeting_index, row.preset_id,
                         strategy if isinstance(strategy, dict) else {},
                         tuple(int(b) for b in lore if isinstance(b, int)) if isinstance(lore, list) else (),
                         row.user_name or "", as_utc(row.created_at), as_utc(row.updated_at), row.persona_id,
                         row.line or "")


class OpeningRepository:
    """Opening drafts: add, get, list newest first, change, remove."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _row(self, draft_id: int) -> OpeningDraft:
        row = self._session.get(OpeningDraft, draft_id)
        if row is None:
            raise NotFound(f"no opening draft with id {draft_id} (discarded, or already played)")
        return row

    def add(self, *, character_id: int, greeting_index: int, preset_id: int | None, strategy: dict,
            lore: list[int], user_name: str, persona_id: int | None = None) -> OpeningRecord:
        """Insert a draft; raises NotFound for an unknown character."""
        if self._session.get(Character, character_id) is None:
            raise NotFound(f"no character with id {character_id}")
        now = datetime.now(UTC)
        row = OpeningDraft(character_id=character_id, greeting_index=greeting_index, preset_id=preset_id,
                           strategy=json.dumps(strategy, ensure_ascii=False, sort_keys=True),
                           lore=json.dumps(list(lore)), user_name=user_name, persona_id=persona_id,
                           created_at=now, updated_at=now)
        self._session.add(row)
        self._session.flush()
        return _opening(row)

    def get(self, draft_id: int) -> OpeningRecord:
        """One draft. Raises NotFound."""
        return _opening(self._row(draft_id))

    def list(self, character_id: int | None = None) -> list[OpeningRecord]:
        """Drafts, most recently changed first (all, or one character's)."""
        query = select(OpeningDraft).order_by(OpeningDraft.updated_at.desc(), OpeningDraft.id.desc())
        if character_id is not None:
            query = query.where(OpeningDraft.character_id == character_id)
        return [_opening(row) for row in self._session.scalars(query)]

    def update(self, draft_id: int, *, greeting_index: int | None = None, preset_id: int | None | bool = False,
               strategy: dict | None = None, lore: list[int] | None = None,
               user_name: str | None = None, persona_id: int | None | bool = False) -> OpeningRecord:
        """Change a draft's selections (`preset_id`, `persona_id` False: unchanged; None: the
        default preset / persona). Raises NotFound."""
        row = self._row(draft_id)
        if persona_id is not False:
            row.persona_id = persona_id  # type: ignore[assignment]
        if greeting_index is not None:
            row.greeting_index = greeting_index
        if preset_id is not False:
            row.preset_id = preset_id  # type: ignore[assignment]
        if strategy is not None:
            row.strategy = json.dumps(strategy, ensure_ascii=False, sort_keys=True)
        if lore is not None:
            row.lore = json.dumps(list(lore))
        if user_name is not None:
            row.user_name = user_name
        row.updated_at = datetime.now(UTC)
        self._session.flush()
        return _opening(row)

    def set_line(self, draft_id: int, line: str) -> None:
        """Keep the unsent first line typed into a draft ("" removes it); the draft's selections
        and `updated_at` stay (typing is not changing the draft). Raises NotFound."""
        self._row(draft_id).line = line
        self._session.flush()

    def delete(self, draft_id: int) -> None:
        """Remove a draft (a playthrough its first send prepared and never admitted is given up,
        `give_up`). Raises NotFound (already discarded or played)."""
        row = self._row(draft_id)
        self.give_up(draft_id)
        self._session.delete(row)
        self._session.flush()

    def root(self, draft_id: int, *, title: str, user_name: str, meta: str, strategy: str | None,
             events: list[NewEvent], line: str = "") -> PlaythroughRecord:
        """Prepare the draft's playthrough in this transaction: a new root session, `events` in it
        in order (the opening reference, the strategy apply), the playthrough row with the
        draft's preset, `strategy` and `meta`, its chat lore bound. It stays the draft's until its
        first send is admitted (`associate`): not listed, the draft kept with `line`, the text
        being sent (seed 000: a first send prepares a real session and associates it only after
        admission). Raises NotFound when the draft is gone."""
        draft = self._row(draft_id)
        now = datetime.now(UTC)
        session_row = SessionRow(parent_id=None, fork_seq=None, created_at=now)
        self._session.add(session_row)
        self._session.flush()
        for seq, event in enumerate(events, start=1):
            text = canonical_json(event.body)
            self._session.add(EventRow(session_id=session_row.id, seq=seq, kind=str(event.kind), role=event.role,
                                       origin=event.origin.value if event.origin else None,
                                       source=event.source, body=text, body_sha256=body_hash(text), created_at=now))
        playthroughs = PlaythroughRepository(self._session)
        record = playthroughs.add(character_id=draft.character_id, title=title, user_name=user_name,
                                  session_id=session_row.id, meta=meta)
        if draft.preset_id is not None:
            playthroughs.set_preset(record.id, draft.preset_id)
        playthroughs.set_strategy(record.id, strategy)
        bindings = BindingRepository(self._session)
        for book_id in _opening(draft).lore:
            if self._session.get(WorldBook, book_id) is not None:
                bindings.bind(book_id, "playthrough", record.id)
        self._session.get_one(Playthrough, record.id).opening_draft = draft_id
        draft.line = line
        self._session.flush()
        return playthroughs.get(record.id)

    def prepared(self, draft_id: int) -> PlaythroughRecord | None:
        """The playthrough the draft's first send prepared and that was neither admitted nor
        given up; None when there is none."""
        row = self._session.scalars(select(Playthrough).where(Playthrough.opening_draft == draft_id,
                                                              Playthrough.archived_at.is_(None))).first()
        return None if row is None else PlaythroughRepository(self._session).get(row.id)

    def associate(self, playthrough_id: int) -> bool:
        """The prepared playthrough's first send was admitted: it is listed from now on and its
        draft is removed. False (nothing changed) when it was not a prepared one. Raises NotFound."""
        row = self._session.get(Playthrough, playthrough_id)
        if row is None:
            raise NotFound(f"no playthrough with id {playthrough_id}")
        if row.opening_draft is None:
            return False
        draft = self._session.get(OpeningDraft, row.opening_draft)
        if draft is not None:
            self._session.delete(draft)
        row.opening_draft, row.archived_at = None, None
        self._session.flush()
        return True

    def give_up(self, draft_id: int) -> int | None:
        """Give up the playthrough the draft's first send prepared and never admitted (a draft
        changed, sent again or discarded since): archived with its mark, so it is never listed;
        its session stays in the append-only log. Returns its id (None: there was none)."""
        prepared = self.prepared(draft_id)
        if prepared is None:
            return None
        self._session.get_one(Playthrough, prepared.id).archived_at = datetime.now(UTC)
        self._session.flush()
        return prepared.id
