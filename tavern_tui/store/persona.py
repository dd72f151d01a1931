"""Provides the persona, belief and strategy repositories. They flush, never commit.

Rules: seed 002 (ADR-0079). A persona revision is only ever added (the newest is the document,
the rest its history); a write that expects an older version than the newest is a conflict
and writes nothing. Beliefs return as `tavern_tui.persona.model.Belief` records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tavern_tui.errors import Conflict, NotFound
from tavern_tui.persona.model import Belief, PersonaDocument, PersonaEntry, Support, principal_for
from tavern_tui.store.models import (
    BeliefDecline,
    BeliefRow,
    BeliefSupport,
    ConsolidationMark,
    Persona,
    PersonaRevision,
    StrategyRow,
)
from tavern_tui.store.times import as_utc


def _document(row: PersonaRevision) -> PersonaDocument:
    entries = tuple(PersonaEntry.from_json(e) for e in json.loads(row.entries))
    return PersonaDocument(row.principal, row.version, row.name, entries, row.reason, as_utc(row.created_at),
                           row.lorebook)


class PersonaRepository:
    """Persona revisions of each principal: the current document, its history, and new revisions."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def current(self, principal: str) -> PersonaDocument:
        """The newest revision, or the empty version-0 document when none was written."""
        row = self._session.scalars(
            select(PersonaRevision).where(PersonaRevision.principal == principal)
            .order_by(PersonaRevision.version.desc()).limit(1)).first()
        return _document(row) if row is not None else PersonaDocument(principal)

    def at(self, principal: str, version: int) -> PersonaDocument:
        """One revision (version 0 = the empty document).

        Raises:
            NotFound: no such version.
        """
        if version == 0:
            return PersonaDocument(principal)
        row = self._session.scalars(select(PersonaRevision).where(
            PersonaRevision.principal == principal, PersonaRevision.version == version)).first()
        if row is None:
            raise NotFound(f"persona has no version {version}")
        return _document(row)

    def history(self, principal: str) -> list[PersonaDocument]:
        """Every revision, newest first."""
        rows = self._session.scalars(select(PersonaRevision).where(PersonaRevision.principal == principal)
                                     .order_by(PersonaRevision.version.desc()))
        return [_document(r) for r in rows]

    # -- the personas (issue 20 item 6) ----------------------------------------------------

    def personas(self) -> list[tuple[int, str, bool, dict]]:
        """Every persona as (id, principal, is default, data), oldest first."""
        rows = self._session.scalars(select(Persona).where(Persona.principal.is_not(None)).order_by(Persona.id))
        return [(r.id, str(r.principal), bool(r.is_default), json.loads(r.data or "{}")) for r in rows]

    def add_persona(self, name: str, data: dict | None = None) -> tuple[int, str]:
        """A new persona row; returns (id, principal) (`principal_for(id)`)."""
        now = datetime.now(UTC)
        row = Persona(name=name, description="", data=json.dumps(data or {}, ensure_ascii=False),
                      created_at=now, updated_at=now)
        self._session.add(row)
        self._session.flush()
        row.principal = principal_for(row.id)
        self._session.flush()
        return row.id, row.principal

    def set_data(self, persona_id: int, data: dict) -> None:
        """Merge `data` into a persona's data JSON. Raises NotFound."""
        row = self._session.get(Persona, persona_id)
        if row is None:
            raise NotFound(f"no persona {persona_id}")
        row.data = json.dumps({**json.loads(row.data or "{}"), **data}, ensure_ascii=False)
        row.updated_at = datetime.now(UTC)
        self._session.flush()

    def set_default(self, persona_id: int) -> None:
        """Make this persona the default (and no other).

        Raises:
            NotFound: no such persona.
        """
        row = self._session.get(Persona, persona_id)
        if row is None or row.principal is None:
            raise NotFound(f"no persona {persona_id}")
        self._session.execute(update(Persona).where(Persona.id != persona_id).values(is_default=False))
        row.is_default = True
        row.updated_at = datetime.now(UTC)
        self._session.flush()

    def write(self, document: PersonaDocument, expected_version: int) -> PersonaDocument:
        """Add `document` as the next revision, if the newest stored version is still `expected_version`.

        Args:
            document: the new revision (its `version` must be `expected_version + 1`).

        Raises:
            Conflict: the newest version is not `expected_version` (nothing written).
        """
        current = self._session.scalar(select(func.max(PersonaRevision.version))
                                       .where(PersonaRevision.principal == document.principal)) or 0
        if current != expected_version or document.version != expected_version + 1:
            raise Conflict("the persona", expected_version, current)
        row = PersonaRevision(principal=document.principal, version=document.version, name=document.name,
                              lorebook=document.lorebook, reason=document.reason or "edit",
                              entries=json.dumps([e.to_json() for e in document.entries], ensure_ascii=False),
                              created_at=datetime.now(UTC))
        self._session.add(row)
        try:
            self._session.flush()
        except IntegrityError as exc:  # another writer took the version between our read and insert
            raise Conflict("the persona", expected_version, expected_version + 1) from exc
        return _document(row)


class BeliefRepository:
    """Beliefs, their supporting messages, durable declines and consolidation marks."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _records(self, rows: Sequence[BeliefRow]) -> list[Belief]:
        if not rows:
            return []
        ids = [r.id for r in rows]
        supports: dict[int, list[Support]] = {i: [] for i in ids}
        for s in self._session.scalars(select(BeliefSupport).where(BeliefSupport.belief_id.in_(ids))
                                       .order_by(BeliefSupport.id)):
            supports[s.belief_id].append(Support(s.session_id, s.seq, s.quote))
        principals = {r.principal for r in rows}
        declined = {(p, k) for p, k in self._session.execute(select(BeliefDecline.principal, BeliefDecline.key)
                                                             .where(BeliefDecline.principal.in_(principals))).all()}
        return [Belief(r.id, r.statement, r.key, r.slot, r.kind, r.category, r.confidence, r.sensitivity, r.durable,
                       tuple(supports[r.id]), r.status, r.superseded_by, r.promoted, r.entry_id, r.nominated,
                       (r.principal, r.key) in declined, as_utc(r.created_at), as_utc(r.updated_at))
                for r in rows]

    def get(self, belief_id: int) -> Belief:
        """One belief.

        Raises:
            NotFound: no such belief.
        """
        row = self._session.get(BeliefRow, belief_id)
        if row is None:
            raise NotFound(f"no belief {belief_id}")
        return self._records([row])[0]

    def principal_of(self, belief_id: int) -> str:
        """Whose belief it is (the persona principal its messages were written under).

        Raises:
            NotFound: no such belief.
        """
        principal = self._session.scalar(select(BeliefRow.principal).where(BeliefRow.id == belief_id))
        if principal is None:
            raise NotFound(f"no belief {belief_id}")
        return str(principal)

    def all(self, principal: str) -> list[Belief]:
        """Every belief of the principal, oldest first."""
        return self._records(list(self._session.scalars(
            select(BeliefRow).where(BeliefRow.principal == principal).order_by(BeliefRow.id))))

    def nominated(self, principal: str) -> list[Belief]:
        """The outstanding nominations, oldest first."""
        return self._records(list(self._session.scalars(
            select(BeliefRow).where(BeliefRow.principal == principal, BeliefRow.nominated.is_(True))
            .order_by(BeliefRow.id))))

    def active_by_key(self, principal: str, key: str) -> Belief | None:
        """The active belief with this canonical key, if any."""
        row = self._session.scalars(select(BeliefRow).where(
            BeliefRow.principal == principal, BeliefRow.key == key, BeliefRow.status == "active")).first()
        return self._records([row])[0] if row is not None else None

    def active_in_slot(self, principal: str, slot: str) -> list[Belief]:
        """Active beliefs in a slot (a newer one with another key supersedes them)."""
        return self._records(list(self._session.scalars(select(BeliefRow).where(
            BeliefRow.principal == principal, BeliefRow.slot == slot, BeliefRow.status == "active"))))

    def add(self, principal: str, *, statement: str, key: str, slot: str, kind: str, category: str,
            confidence: float, sensitivity: str, durable: bool) -> int:
        """Store a new active belief; returns its id."""
        now = datetime.now(UTC)
        row = BeliefRow(principal=principal, statement=statement, key=key, slot=slot, kind=kind, category=category,
                        confidence=confidence, sensitivity=sensitivity, durable=durable, status="active",
                        promoted=False, nominated=False, created_at=now, updated_at=now)
        self._session.add(row)
        self._session.flush()
        return row.id

    def support(self, belief_id: int, session_id: int, seq: int, quote: str) -> bool:
        """Record a supporting message; False when that message already supports the belief."""
        exists = self._session.scalar(select(BeliefSupport.id).where(
            BeliefSupport.belief_id == belief_id, BeliefSupport.session_id == session_id, BeliefSupport.seq == seq))
        if exists is not None:
            return False
        self._session.add(BeliefSupport(belief_id=belief_id, session_id=session_id, seq=seq, quote=quote,
                                        created_at=datetime.now(UTC)))
        self._session.flush()
        return True

    def set(self, belief_id: int, **values: object) -> None:
        """Update fields of a belief (status, superseded_by, confidence, kind, durable, promoted,
        entry_id, nominated); `updated_at` moves.

        Raises:
            NotFound: no such belief.
        """
        done = self._session.execute(update(BeliefRow).where(BeliefRow.id == belief_id)
                                     .values(**values, updated_at=datetime.now(UTC)))
        if done.rowcount == 0:
            raise NotFound(f"no belief {belief_id}")

    def by_entry(self, principal: str, entry_ids: Iterable[int]) -> list[Belief]:
        """Promoted beliefs linked to these persona entries."""
        ids = list(entry_ids)
        if not ids:
            return []
        return self._records(list(self._session.scalars(select(BeliefRow).where(
            BeliefRow.principal == principal, BeliefRow.entry_id.in_(ids)))))

    def decline(self, principal: str, key: str, belief_id: int) -> None:
        """Remember a decline of this key (idempotent)."""
        exists = self._session.scalar(select(BeliefDecline.id).where(
            BeliefDecline.principal == principal, BeliefDecline.key == key))
        if exists is None:
            self._session.add(BeliefDecline(principal=principal, key=key, belief_id=belief_id,
                                            created_at=datetime.now(UTC)))
            self._session.flush()

    def declined_keys(self, principal: str) -> set[str]:
        """Every key the principal declined."""
        return set(self._session.scalars(select(BeliefDecline.key).where(BeliefDecline.principal == principal)))

    def marks(self, session_ids: Iterable[int]) -> dict[int, int]:
        """The last seq consolidation read in each of these sessions (absent = none read)."""
        ids = list(session_ids)
        if not ids:
            return {}
        rows = self._session.execute(select(ConsolidationMark.session_id, ConsolidationMark.seq)
                                     .where(ConsolidationMark.session_id.in_(ids))).all()
        return {int(sid): int(seq) for sid, seq in rows}

    def set_mark(self, session_id: int, seq: int) -> None:
        """Record that consolidation has read `session_id` up to `seq`."""
        row = self._session.get(ConsolidationMark, session_id)
        if row is None:
            self._session.add(ConsolidationMark(session_id=session_id, seq=seq))
        elif seq > row.seq:
            row.seq = seq
        self._session.flush()


@dataclass(frozen=True, slots=True)
class StrategyRecord:
    """One saved strategy version as stored: name, version (from 1), base placement and its
    options (the service turns it into an `assembly.strategies.StrategySpec`; the store knows no
    assembly types)."""

    name: str
    version: int
    base: str
    options: dict[str, Any]


class StrategyRepository:
    """Saved strategy versions (the built-in ones are not stored)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    @staticmethod
    def _spec(row: StrategyRow) -> StrategyRecord:
        return StrategyRecord(row.name, row.version, row.base, json.loads(row.options))

    def latest(self) -> list[StrategyRecord]:
        """The newest version of every saved strategy, by name."""
        newest = (select(StrategyRow.name, func.max(StrategyRow.version).label("v"))
                  .group_by(StrategyRow.name).subquery())
        rows = self._session.scalars(select(StrategyRow).join(
            newest, (StrategyRow.name == newest.c.name) & (StrategyRow.version == newest.c.v))
            .order_by(StrategyRow.name))
        return [self._spec(r) for r in rows]

    def get(self, name: str, version: int | None = None) -> StrategyRecord | None:
        """One version (None = the newest), or None when there is no such strategy/version."""
        query = select(StrategyRow).where(StrategyRow.name == name)
        query = query.where(StrategyRow.version == version) if version is not None else \
            query.order_by(StrategyRow.version.desc()).limit(1)
        row = self._session.scalars(query).first()
        return self._spec(row) if row is not None else None

    def add(self, spec: StrategyRecord, expected_version: int) -> StrategyRecord:
        """Store `spec` (its version is ignored) as the next version of its name.

        Raises:
            Conflict: the newest stored version is not `expected_version` (0 = a new name).
        """
        current = self._session.scalar(select(func.max(StrategyRow.version))
                                       .where(StrategyRow.name == spec.name)) or 0
        if current != expected_version:
            raise Conflict(f"strategy {spec.name!r}", expected_version, current)
        row = StrategyRow(name=spec.name, version=current + 1, base=spec.base,
                          options=json.dumps(spec.options, sort_keys=True), created_at=datetime.now(UTC))
        self._session.add(row)
        try:
            self._session.flush()
        except IntegrityError as exc:  # another writer took the version between our read and insert
            raise Conflict(f"strategy {spec.name!r}", expected_version, current + 1) from exc
        return self._spec(row)
