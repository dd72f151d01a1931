"""Provides repositories for resources and playthroughs. They flush, never commit.

Each repository takes an ORM `Session` bound by `Store.unit_of_work()`, which owns the
transaction; repositories return plain records, never ORM objects, so nothing above the store
holds a live database object.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tavern_tui.errors import AlreadyStored, Conflict, NotFound, StoreError
from tavern_tui.store.models import (
    Character,
    CharacterRevision,
    Playthrough,
    Preset,
    SessionRow,
    WorldBookBinding,
)
from tavern_tui.store.records import PlaythroughRecord
from tavern_tui.store.times import as_utc


@dataclass(frozen=True, slots=True)
class CharacterRecord:
    """A stored character card; `data` is the normalised card as canonical JSON text."""

    id: int
    name: str
    spec: str
    spec_version: str
    source_name: str
    original_sha256: str
    data: str
    created_at: datetime
    revision: int = 0
    """The card revision `data` is (0: as imported; issue 20 item 5)."""
    archived_at: datetime | None = None
    """When it was archived (hidden from lists, nothing deleted); None: not archived."""


@dataclass(frozen=True, slots=True)
class CharacterRevisionRecord:
    """One stored revision of a card: its number, name, normalised card JSON, why and when."""

    character_id: int
    revision: int
    name: str
    data: str
    reason: str
    created_at: datetime


def _character(row: Character) -> CharacterRecord:
    return CharacterRecord(row.id, row.name, row.spec, row.spec_version, row.source_name, row.original_sha256,
                           row.data, as_utc(row.created_at), row.revision or 0,
                           as_utc(row.archived_at) if row.archived_at is not None else None)


def _playthrough(row: Playthrough) -> PlaythroughRecord:
    return PlaythroughRecord(row.id, row.character_id, row.title, row.user_name, row.root_session_id,
                             row.head_session_id, as_utc(row.created_at), as_utc(row.updated_at), row.meta or "{}",
                             row.preset_id, row.strategy,
                             as_utc(row.archived_at) if row.archived_at is not None else None, row.opening_draft)


class CharacterRepository:
    """Characters: add, find by file hash or name, list."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def add(self, *, name: str, spec: str, spec_version: str, source_name: str, original: bytes,
            original_sha256: str, data: str) -> CharacterRecord:
        """Insert a character and return it (flushed, not committed)."""
        row = Character(name=name, spec=spec, spec_version=spec_version, source_name=source_name, original=original,
                        original_sha256=original_sha256, data=data, created_at=datetime.now(UTC))
        self._session.add(row)
        flush_unique(self._session, "character", original_sha256)
        return _character(row)

    def by_sha256(self, digest: str) -> CharacterRecord | None:
        """The character imported from a file with these exact bytes, if any."""
        row = self._session.scalars(select(Character).where(Character.original_sha256 == digest)).first()
        return _character(row) if row else None

    def get(self, character_id: int) -> CharacterRecord:
        """One character. Raises NotFound."""
        row = self._session.get(Character, character_id)
        if row is None:
            raise NotFound(f"no character with id {character_id}")
        return _character(row)

    def original(self, character_id: int) -> bytes:
        """The exact bytes of the imported file. Raises NotFound."""
        row = self._session.get(Character, character_id)
        if row is None:
            raise NotFound(f"no character with id {character_id}")
        return row.original

    def by_name(self, name: str) -> list[CharacterRecord]:
        """Characters whose name equals `name`, case-insensitively, newest first."""
        query = select(Character).where(func.lower(Character.name) == name.lower()).order_by(Character.id.desc())
        return [_character(row) for row in self._session.scalars(query)]

    def names(self) -> list[str]:
        """Every character's name (for "did you mean" hints), without loading the records."""
        return list(self._session.scalars(select(Character.name).distinct()))

    def all(self) -> list[CharacterRecord]:
        """Every character, by name."""
        query = select(Character).order_by(Character.name, Character.id)
        return [_character(row) for row in self._session.scalars(query)]

    def count(self) -> int:
        """How many characters are stored."""
        return int(self._session.scalar(select(func.count()).select_from(Character)) or 0)

    def _row(self, character_id: int) -> Character:
        row = self._session.get(Character, character_id)
        if row is None:
            raise NotFound(f"no character with id {character_id}")
        return row

    def set_archived(self, character_id: int, archived: bool) -> CharacterRecord:
        """Archive a character (now) or bring it back; nothing else changes. Raises NotFound."""
        row = self._row(character_id)
        if archived and row.archived_at is None:
            row.archived_at = datetime.now(UTC)
        elif not archived:
            row.archived_at = None
        self._session.flush()
        return _character(row)

    def revise(self, character_id: int, *, name: str, data: str, reason: str,
               expected_revision: int | None = None) -> CharacterRecord:
        """Store a new revision of the card (`data`: normalised card JSON) and make it the one
        steps read; the first edit also keeps revision 0 (the card as imported). The original
        bytes never change.

        Raises:
            NotFound: no such character.
            Conflict: `expected_revision` is given and is not the current one (another edit won).
        """
        row = self._row(character_id)
        current = row.revision or 0
        if expected_revision is not None and expected_revision != current:
            raise Conflict(f"character {character_id}'s card", expected_revision, current)
        now = datetime.now(UTC)
        if current == 0 and self._session.scalar(select(func.count()).select_from(CharacterRevision)
                                                 .where(CharacterRevision.character_id == character_id)) == 0:
            self._session.add(CharacterRevision(character_id=character_id, revision=0, name=row.name, data=row.data,
                                                reason="imported", created_at=as_utc(row.created_at)))
        self._session.add(CharacterRevision(character_id=character_id, revision=current + 1, name=name, data=data,
                                            reason=reason, created_at=now))
        row.name, row.data, row.revision = name, data, current + 1
        self._session.flush()
        return _character(row)

    def revisions(self, character_id: int) -> list[CharacterRevisionRecord]:
        """Every stored revision of the card, oldest first (empty when it was never edited)."""
        query = (select(CharacterRevision).where(CharacterRevision.character_id == character_id)
                 .order_by(CharacterRevision.revision))
        return [CharacterRevisionRecord(r.character_id, r.revision, r.name, r.data, r.reason, as_utc(r.created_at))
                for r in self._session.scalars(query)]


class PlaythroughRepository:
    """Playthroughs: add, get, list newest first, move the head, touch."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _row(self, playthrough_id: int) -> Playthrough:
        row = self._session.get(Playthrough, playthrough_id)
        if row is None:
            raise NotFound(f"no playthrough with id {playthrough_id}")
        return row

    def add(self, *, character_id: int, title: str, user_name: str, session_id: int,
            meta: str = "{}") -> PlaythroughRecord:
        """Insert a playthrough rooted at `session_id` (also its head); the session joins it."""
        now = datetime.now(UTC)
        row = Playthrough(character_id=character_id, title=title, user_name=user_name, root_session_id=session_id,
                          head_session_id=session_id, meta=meta, created_at=now, updated_at=now)
        self._session.add(row)
        self._session.flush()
        self.adopt([session_id], row.id)
        return _playthrough(row)

    def adopt(self, session_ids: list[int], playthrough_id: int) -> None:
        """Make sessions part of a playthrough's timeline (forks made for it)."""
        for session_id in session_ids:
            session = self._session.get(SessionRow, session_id)
            if session is None:
                raise NotFound(f"session {session_id} does not exist")
            session.playthrough_id = playthrough_id
        self._session.flush()

    def set_head(self, playthrough_id: int, session_id: int) -> PlaythroughRecord:
        """Point the playthrough at another head session (a swipe, jump or rollback) and touch it.

        Raises:
            NotFound: no such playthrough.
            StoreError: the session is not part of this playthrough.
        """
        row = self._row(playthrough_id)
        session = self._session.get(SessionRow, session_id)
        if session is None or session.playthrough_id != playthrough_id:
            raise StoreError(f"session {session_id} is not part of playthrough {playthrough_id}")
        row.head_session_id = session_id
        row.updated_at = datetime.now(UTC)
        self._session.flush()
        return _playthrough(row)

    def by_source_digest(self, digest: str) -> PlaythroughRecord | None:
        """The playthrough imported from a chat file with these exact bytes (SHA-256), if any."""
        row = self._session.scalars(select(Playthrough).where(Playthrough.meta.contains(f'"sha256": "{digest}"'))
                                    .order_by(Playthrough.id)).first()
        return _playthrough(row) if row else None

    def set_preset(self, playthrough_id: int, preset_id: int | None) -> PlaythroughRecord:
        """Bind a preset to the playthrough (None: back to the built-in default). Raises NotFound."""
        row = self._row(playthrough_id)
        if preset_id is not None and self._session.get(Preset, preset_id) is None:
            raise NotFound(f"no preset with id {preset_id}")
        row.preset_id = preset_id
        self._session.flush()
        return _playthrough(row)

    def set_meta(self, playthrough_id: int, meta: str) -> PlaythroughRecord:
        """Replace the playthrough's JSON metadata text. Raises NotFound."""
        row = self._row(playthrough_id)
        row.meta = meta
        self._session.flush()
        return _playthrough(row)

    def set_strategy(self, playthrough_id: int, strategy: str | None) -> PlaythroughRecord:
        """Record the strategy applied to the playthrough. Raises NotFound."""
        row = self._row(playthrough_id)
        row.strategy = strategy
        self._session.flush()
        return _playthrough(row)

    def children_of(self, session_ids: list[int]) -> list[tuple[int, int]]:
        """(playthrough id, root session id) of playthroughs branched off these sessions
        ("new playthrough from here"), oldest first."""
        if not session_ids:
            return []
        query = (select(Playthrough.id, Playthrough.root_session_id)
                 .join(SessionRow, SessionRow.id == Playthrough.root_session_id)
                 .where(SessionRow.parent_id.in_(session_ids)).order_by(Playthrough.id))
        return [(int(p), int(s)) for p, s in self._session.execute(query)]

    def get(self, playthrough_id: int) -> PlaythroughRecord:
        """One playthrough. Raises NotFound."""
        row = self._row(playthrough_id)
        return _playthrough(row)

    def list(self, character_id: int | None = None, limit: int | None = None, *,
             include_archived: bool = False, group_id: int | None = None) -> list[PlaythroughRecord]:
        """Playthroughs, most recently played first (then newest id first); archived ones only
        with `include_archived`. A character's (`character_id`) are its one-character chats: a
        group chat, whose character is its first member, is listed under its group (`group_id`).
        One a draft's first send prepared is not listed until that send is admitted (`opening_draft`)."""
        query = (select(Playthrough).where(Playthrough.opening_draft.is_(None))
                 .order_by(Playthrough.updated_at.desc(), Playthrough.id.desc()))
        if group_id is not None:
            query = query.where(Playthrough.group_id == group_id)
        if character_id is not None:
            query = query.where(Playthrough.character_id == character_id, Playthrough.group_id.is_(None))
        if not include_archived:
            query = query.where(Playthrough.archived_at.is_(None))
        if limit is not None:
            query = query.limit(limit)
        return [_playthrough(row) for row in self._session.scalars(query)]

    def set_title(self, playthrough_id: int, title: str) -> PlaythroughRecord:
        """Rename the playthrough ("" = the default title). Raises NotFound."""
        row = self._row(playthrough_id)
        row.title = title
        self._session.flush()
        return _playthrough(row)

    def set_archived(self, playthrough_id: int, archived: bool) -> PlaythroughRecord:
        """Archive (now) or unarchive the playthrough; nothing else changes. Raises NotFound."""
        row = self._row(playthrough_id)
        row.archived_at = datetime.now(UTC) if archived else None
        self._session.flush()
        return _playthrough(row)

    def touch(self, playthrough_id: int, when: datetime | None = None) -> PlaythroughRecord:
        """Mark the playthrough as played at `when` (default now: it sorts first); an imported
        chat was last played when its newest message was sent.

        Raises:
            NotFound: no such playthrough.
        """
        row = self._row(playthrough_id)
        row.updated_at = when or datetime.now(UTC)
        self._session.flush()
        return _playthrough(row)


def flush_unique(session: Session, what: str, digest: str) -> None:
    """Flush a new imported resource; the unique by-hash index (migration 0010) turns a lost
    race into `AlreadyStored` (the transaction must then roll back; the caller reads the winner).

    Raises:
        AlreadyStored: a row with this `original_sha256` exists (stored by another process).
    """
    try:
        session.flush()
    except IntegrityError as exc:
        if "original_sha256" in str(exc.orig) or "unique" in str(exc.orig).lower():
            raise AlreadyStored(f"this {what} file (sha256 {digest[:12]}…) was just stored by another process") \
                from exc
        raise


class BindingRepository:
    """Which world books apply where (scope "global", "character", "playthrough", "persona", "preset")."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @staticmethod
    def _target(target_id: int | None):  # type: ignore[no-untyped-def]
        return WorldBookBinding.target_id.is_(None) if target_id is None else WorldBookBinding.target_id == target_id

    def _query(self, book_id: int, scope: str, target_id: int | None):  # type: ignore[no-untyped-def]
        return select(WorldBookBinding).where(WorldBookBinding.world_book_id == book_id,
                                              WorldBookBinding.scope == scope, self._target(target_id))

    def bind(self, book_id: int, scope: str, target_id: int | None) -> bool:
        """Bind a book; returns False when it was already bound there."""
        exists = self._session.scalars(self._query(book_id, scope, target_id)).first()
        if exists is not None:
            return False
        self._session.add(WorldBookBinding(world_book_id=book_id, scope=scope, target_id=target_id,
                                           created_at=datetime.now(UTC)))
        self._session.flush()
        return True

    def unbind(self, book_id: int, scope: str, target_id: int | None) -> bool:
        """Remove a binding; returns False when there was none."""
        row = self._session.scalars(self._query(book_id, scope, target_id)).first()
        if row is None:
            return False
        self._session.delete(row)
        self._session.flush()
        return True

    def all(self) -> list[tuple[int, str, int | None]]:
        """Every binding as (book id, scope, target id), in binding order."""
        query = select(WorldBookBinding.world_book_id, WorldBookBinding.scope, WorldBookBinding.target_id)
        return [(b, s, t) for b, s, t in self._session.execute(query.order_by(WorldBookBinding.id))]

    def books_for(self, scope: str, target_id: int | None) -> list[int]:
        """Book ids bound to one scope/target, in binding order."""
        query = select(WorldBookBinding.world_book_id).where(WorldBookBinding.scope == scope, self._target(target_id))
        return list(self._session.scalars(query.order_by(WorldBookBinding.id)))

    def books_for_many(self, targets: Sequence[tuple[str, int | None]]) -> list[list[int]]:
        """`books_for` of each (scope, target) in one query (a step reads four scopes): the book
        ids of each, in binding order, in the order of `targets`."""
        if not targets:
            return []
        query = (select(WorldBookBinding.world_book_id, WorldBookBinding.scope, WorldBookBinding.target_id)
                 .where(or_(*(and_(WorldBookBinding.scope == scope, self._target(target_id))
                              for scope, target_id in targets)))
                 .order_by(WorldBookBinding.id))
        found: dict[tuple[str, int | None], list[int]] = {}
        for book_id, scope, target_id in self._session.execute(query):
            found.setdefault((scope, target_id), []).append(book_id)
        return [list(found.get((scope, target_id), ())) for scope, target_id in targets]
