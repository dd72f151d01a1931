"""Provides `ConsolidationMixin`: learning beliefs from the person's own messages
(`consolidate`, `consolidate_with_model`), folding them into the store, and topping up the
nominations; and `ConsolidationReport`, what one run did.

Rules: seed 002 (ADR-0079) and seed 001, as DESIGN.md "Persona and nominations" maps them:
consolidation reads customer-origin messages only, after a step settles; it is idempotent (a
consolidation mark per session, one support row per belief and message); a superseded belief's
affirmed entry is flagged stale, never edited (decision 7).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from tavern_tui.engine.events import EventKind, is_customer, parse_origin
from tavern_tui.engine.stream import ChatRequest, TextDelta
from tavern_tui.errors import FormatError, NotFound, ProviderError
from tavern_tui.persona.corroborate import RELATIONS, same_belief
from tavern_tui.persona.model import LOCAL_PRINCIPAL
from tavern_tui.persona.nominate import NominationRules, blockers, select_nominations
from tavern_tui.service.persona.base import _default_of, _now
from tavern_tui.service.persona.registry import RegistryMixin

if TYPE_CHECKING:
    from tavern_tui.store.store import UnitOfWork

logger = logging.getLogger("tavern_tui.service.persona")


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    """What one consolidation run did.

    Attributes:
        messages: customer-origin messages read.
        added: new beliefs; supported: new supports of existing beliefs;
        superseded: beliefs a newer one in the same slot replaced;
        nominated: ids of beliefs nominated by this run.
    """

    messages: int = 0
    added: int = 0
    supported: int = 0
    superseded: int = 0
    nominated: tuple[int, ...] = ()


def _texts(unread: dict[int, list[Any]]) -> list[tuple[tuple[int, int], str]]:
    """(ref, text) of the customer-origin messages among unread events."""
    return [(event.ref, text) for events in unread.values() for event in events
            if (text := _customer_text(event)) is not None]


def _customer_text(event: Any) -> str | None:
    """The text of a message the person wrote (seed 001 `customer?`), else None. An edit the
    person made of their own message counts (its replacement keeps role user, origin customer)."""
    if event.kind == EventKind.USER_MESSAGE:
        return event.content if is_customer(event.role, event.origin) else None
    if event.kind == EventKind.SURFACE_REPLACED:
        message = event.body.get("message")
        if isinstance(message, dict) and message.get("role") == "user" and \
                is_customer("user", parse_origin(message.get("origin"))) and \
                isinstance(content := message.get("content"), str):
            return content
    return None


def _writer(event: Any, by_id: dict[int, str]) -> str | None:
    """The principal of the persona a user message names in its `persona` field (None: none)."""
    body = event.body if isinstance(event.body, dict) else {}
    if event.kind == EventKind.SURFACE_REPLACED and isinstance(body.get("message"), dict):
        body = body["message"]
    persona = body.get("persona")
    return by_id.get(persona) if isinstance(persona, int) else None


class ConsolidationMixin(RegistryMixin):
    """Learning beliefs from the person's messages, and topping up the nominations.

    Attributes:
        nomination_rules: the bounds nominations are selected under (`persona.nominate`).
    """

    nomination_rules: NominationRules = NominationRules()

    def consolidate(self, playthrough_id: int | None = None) -> ConsolidationReport:
        """Learn beliefs from the person's messages not read before (one playthrough's sessions,
        or every session), then top up the nominations. Reads customer-origin messages only:
        never engine context, impersonations, operator edits or the model's text (seed 001).
        Idempotent: a second run reads nothing new and changes nothing. Uses the deterministic
        extractor (`consolidate_with_model` adds the model's).
        """
        from tavern_tui.persona.extract import extract_beliefs
        unread = self._unread(playthrough_id)
        return self._fold(unread, {ref: extract_beliefs(text) for ref, text in _texts(unread)})

    async def consolidate_with_model(self, playthrough_id: int | None = None) -> ConsolidationReport:
        """`consolidate`, where each new message is also read by the configured model: it is
        asked for JSON (`EXTRACTION_PROMPT`), and only answers that validate are used
        (`parse_model_beliefs`: known fields and values, quotes found in the message). The
        deterministic extractor's candidates come first; a model answer that fails (provider
        error, bad JSON) is logged and that message keeps the deterministic reading only.
        """
        from tavern_tui.persona.extract import extract_beliefs
        from tavern_tui.persona.model_extract import parse_model_beliefs
        unread = await asyncio.to_thread(self._unread, playthrough_id)
        found: dict[tuple[int, int], list[Any]] = {}
        for ref, text in _texts(unread):
            candidates = extract_beliefs(text)
            keys = {c.key for c in candidates}
            try:
                answer = await self._ask_model(text)
                candidates += [c for c in parse_model_beliefs(answer, text) if c.key not in keys]
            except (ProviderError, FormatError) as exc:
                logger.warning("model belief extraction failed for message %s:%s: %s", *ref, exc)
            found[ref] = candidates
        return await asyncio.to_thread(self._fold, unread, found)

    async def _ask_model(self, text: str) -> str:
        from tavern_tui.persona.model_extract import EXTRACTION_PROMPT
        request = ChatRequest([{"role": "system", "content": EXTRACTION_PROMPT}, {"role": "user", "content": text}],
                              config={"temperature": 0})
        parts = []
        async for event in self.ctx.provider.stream(request):
            if isinstance(event, TextDelta):
                parts.append(event.text)
        return "".join(parts)

    def _unread(self, playthrough_id: int | None) -> dict[int, list[Any]]:
        """Events of the sessions (one playthrough's, or all) past each consolidation mark."""
        log = self.ctx.store.events
        if playthrough_id is not None:
            with self.ctx.store.unit_of_work() as uow:
                root = uow.playthroughs.get(playthrough_id).root_session_id  # (NotFound when there is none)
            session_ids = [link.id for link in log.playthrough_sessions(playthrough_id, root)
                           if link.playthrough_id == playthrough_id]
        else:
            session_ids = log.all_session_ids()
        kinds = [str(EventKind.USER_MESSAGE), str(EventKind.SURFACE_REPLACED)]
        with self.ctx.store.unit_of_work() as uow:
            marks = uow.beliefs.marks(session_ids)
        # Read before the write transaction: SQLite allows one writer, and the log reads apart.
        # Only the sessions with events past their mark are read (after a reply, the head alone:
        # an imported chat's swipes are hundreds of sessions, a read each was ~0.3 s per reply).
        newest = log.newest_seqs(session_ids, kinds)
        return {sid: log.own_events(sid, kinds=kinds, after=marks.get(sid, 0))
                if newest.get(sid, 0) > marks.get(sid, 0) else [] for sid in session_ids}

    def _writers(self, unread: dict[int, list[Any]]) -> tuple[dict[int, str], dict[int, str]]:
        """({persona id: principal}, {session id: the principal of the persona its playthrough
        plays as now}): whose beliefs a message's are when it does not name its persona (written
        before there were several, or imported)."""
        views = self.personas()
        by_id = {v.id: v.principal for v in views}
        default = _default_of(views).principal
        fallback: dict[int, str] = {}
        for sid in unread:
            playthrough = self.ctx.store.events.playthrough_of(sid) if unread[sid] else None
            try:
                fallback[sid] = self.playthrough_persona(playthrough).principal if playthrough else default
            except NotFound:
                fallback[sid] = default
        return by_id, fallback

    def _fold(self, unread: dict[int, list[Any]],
              found: dict[tuple[int, int], list[Any]]) -> ConsolidationReport:
        """Store what was found in the unread messages and move the marks, in one transaction.
        Each message's beliefs are the persona's it was written under (issue 20 item 6: its
        `persona` field; else its playthrough's persona)."""
        messages = added = supported = superseded = 0
        by_id, fallback = self._writers(unread)
        with self.ctx.store.unit_of_work() as uow:
            for sid, events in unread.items():
                for event in events:
                    if event.ref not in found:
                        continue
                    messages += 1
                    principal = _writer(event, by_id) or fallback[sid]
                    for candidate in found[event.ref]:
                        a, s, x = self._learn(uow, candidate, event.session_id, event.seq, principal)
                        added, supported, superseded = added + a, supported + s, superseded + x
                if events:
                    uow.beliefs.set_mark(sid, events[-1].seq)
            nominated: tuple[int, ...] = ()
            for principal in dict.fromkeys(by_id.values()):
                nominated += self._top_up(uow, principal)
        return ConsolidationReport(messages, added, supported, superseded, nominated)

    def _learn(self, uow: UnitOfWork, candidate: Any, session_id: int, seq: int,
               principal: str = LOCAL_PRINCIPAL) -> tuple[int, int, int]:
        """Fold one candidate into the store: support the active belief with its key (or, for a
        preference, one that `persona.corroborate.same_belief` says is the same in other words;
        its statement stays), or add a new one (superseding active beliefs of the same slot with
        another key)."""
        existing = uow.beliefs.active_by_key(principal, candidate.key)
        if existing is None and candidate.key.partition(":")[0] in RELATIONS:
            # The same preference in other words (persona.corroborate): support the earlier one.
            existing = next((b for b in uow.beliefs.all(principal)
                             if b.status == "active" and same_belief(b.key, candidate.key)), None)
        if existing is not None:
            fresh = uow.beliefs.support(existing.id, session_id, seq, candidate.quote)
            updates: dict[str, Any] = {}
            if candidate.confidence > existing.confidence:
                updates["confidence"] = candidate.confidence
            if candidate.kind == "direct" and existing.kind != "direct":
                updates["kind"] = "direct"
            if updates:
                uow.beliefs.set(existing.id, **updates)
            return 0, int(fresh), 0
        new_id = uow.beliefs.add(principal, statement=candidate.statement, key=candidate.key,
                                 slot=candidate.slot, kind=candidate.kind, category=candidate.category,
                                 confidence=candidate.confidence, sensitivity=candidate.sensitivity,
                                 durable=candidate.durable)
        uow.beliefs.support(new_id, session_id, seq, candidate.quote)
        superseded = 0
        for old in uow.beliefs.active_in_slot(principal, candidate.slot):
            if old.id == new_id or old.key == candidate.key:
                continue
            uow.beliefs.set(old.id, status="superseded", superseded_by=new_id, nominated=False)
            superseded += 1
            if old.promoted and old.entry_id is not None:
                self._flag_stale(uow, old.entry_id, principal)
        return 1, 0, superseded

    @staticmethod
    def _flag_stale(uow: UnitOfWork, entry_id: int, principal: str = LOCAL_PRINCIPAL) -> None:
        """Flag an affirmed entry stale for the owner's review: a new revision with the same
        text (ADR-0079 decision 7: never edit the owner's text)."""
        doc = uow.personas.current(principal)
        entry = doc.entry(entry_id)
        if entry is None or entry.stale:
            return
        entries = [replace(e, stale=True, updated_at=_now()) if e.id == entry_id else e for e in doc.entries]
        uow.personas.write(doc.with_entries(entries, "belief_superseded"), doc.version)

    def _top_up(self, uow: UnitOfWork, principal: str = LOCAL_PRINCIPAL) -> tuple[int, ...]:
        """Withdraw a persona's nominations that are no longer eligible; nominate up to the bound."""
        rules = self.nomination_rules
        declined = uow.beliefs.declined_keys(principal)
        beliefs = uow.beliefs.all(principal)
        for belief in beliefs:
            if belief.nominated and blockers(belief, rules, declined):
                uow.beliefs.set(belief.id, nominated=False)
        beliefs = [replace(b, nominated=False) if b.nominated and blockers(b, rules, declined) else b
                   for b in beliefs]
        picked = select_nominations(beliefs, rules, declined)
        for belief in picked:
            uow.beliefs.set(belief.id, nominated=True)
        return tuple(b.id for b in picked)
