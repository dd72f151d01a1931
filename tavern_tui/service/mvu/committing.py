"""Provides `MvuCommits`: the MVU records a playthrough commits: the initial record before the first
generation, a settled reply's update (after the person's messages' own), a state tool's commands. Each is
one `state/commit` naming its base, appended by compare-and-set and recomputed on a base that moved.

Rules: `mvu.records` and the package's docstring (`service.mvu`): the append is a compare-and-set on the
session's state commits (`append_if_unchanged`), and a stale read is recomputed, never merged; MVU runs a
sent message's commands too (`MESSAGE_SENT`); a state tool's commands are run as a reply's; a value holding
the configured API key is refused as on every other write surface.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from typing import Any

from tavern_tui.engine.events import Event, EventKind, NewEvent
from tavern_tui.engine.log import surface_of
from tavern_tui.engine.state import STATE_KIND
from tavern_tui.errors import StoreBusy, TavernError
from tavern_tui.mvu import MVU_PART, commit_part, extract_commands, mvu_head, update_variables
from tavern_tui.mvu.jsutil import clone
from tavern_tui.mvu.records import counted_messages, shown_commits
from tavern_tui.mvu.update import Refusal, UpdateOutcome
from tavern_tui.service.mvu.material import MvuPart, expander, has_material
from tavern_tui.service.mvu.views import CAS_TRIES, MIN_REPLY, MvuView
from tavern_tui.service.secrets import configured_secrets
from tavern_tui.text.secret_values import holds_secret

logger = logging.getLogger(__name__)


class MvuCommits(MvuPart):
    """Commits MVU records (`MvuService`'s committing half; the configured API key is refused)."""

    def ensure_initialised(self, playthrough_id: int) -> bool:
        """Commit the initial record when the head has MVU material and no record yet (before a generation).
        Returns whether a record was committed now."""
        for _attempt in range(CAS_TRIES):
            # A retry reads again: another writer committed meanwhile, its variables may be in the macros now.
            due = self._due_init(playthrough_id)
            if due is None:
                return False
            session_id, events, (message, result) = due
            # What could not be read ([InitVar] entries that failed or were refused, e.g. a YAML
            # alias bomb) is kept with the record, so the state pane and the trace say why it is short.
            refused = [{"command": "initial variables", "reason": error} for error in result.errors]
            refused += [r.to_json() for r in result.greeting.refused] if result.greeting else []
            part = commit_part(message, None, result.record, init=True,
                               changes=[c.to_json() for c in result.greeting.changes] if result.greeting else [],
                               refused=refused)
            if self.append(session_id, events, part) is not None:
                return True
        raise StoreBusy("the MVU state of this chat kept changing while it was initialised; try again")

    def needs_initialising(self, playthrough_id: int) -> bool:
        """Whether `ensure_initialised` would commit an initial record now (reads only): a request
        built ahead of the step is only kept when the step would not write one first."""
        return self._due_init(playthrough_id) is not None

    def _due_init(self, playthrough_id: int) -> tuple[int, list[Event], Any] | None:
        """(the head session, its surface events, the planned initial record) when one is due, else None."""
        material = self.material.material(playthrough_id)
        view, books, _primary, greetings, _macros = material
        if not has_material(books, greetings):
            return None  # no state to start: a long chat's surface (the costly read) is not read for nothing
        events = self.surface_events(view.session_id)
        surface = surface_of(events)
        if mvu_head(events, counted_messages(events, [m.ref for m in surface])).record is not None:
            return None
        planned = self.material.planned_init(playthrough_id, surface, material)
        return None if planned is None else (view.session_id, events, planned)

    def append(self, session_id: int, events: list[Event], part: dict[str, Any],
               origin: str = "reply") -> list[Event] | None:
        """The compare-and-set: append only if no state commit landed in the session since `events` were read."""
        own = [e.seq for e in events if e.session_id == session_id]
        event = NewEvent(STATE_KIND, None, {"origin": origin, MVU_PART: part})
        return self.ctx.store.events.append_if_unchanged(session_id, [event], STATE_KIND, max(own, default=0))

    def commit_reply(self, playthrough_id: int, session_id: int, message: Event) -> MvuView | None:
        """Run a settled assistant reply's commands on the record before it and commit the result (one
        `state/commit` naming its base). None when there is no MVU state or the reply is too short.

        First, each of the person's messages before the reply that holds commands and has no record yet gets
        its own commit (origin "user"), in order: MVU runs a sent message's commands too (`MESSAGE_SENT`), so
        the reply builds on them. A commit whose base moved meanwhile (another writer's state commit in the
        session) is refused by the store and recomputed on the new base.

        Raises:
            StoreBusy: the base kept moving `CAS_TRIES` times.
        """
        if message.kind != EventKind.ASSISTANT_MESSAGE or not self.has_commits(session_id):
            return None
        text = str(message.body.get("content") or "")
        _view, _books, _primary, _greetings, macros = self.material.material(playthrough_id)
        expand = expander(macros)
        for _ in range(CAS_TRIES * 4):
            events = self.surface_events(session_id)
            surface = surface_of(events)
            visible = counted_messages(events, [m.ref for m in surface])
            user = self._uncommitted_user(events, surface, message.ref, expand)
            if user is not None:
                base = mvu_head(events, visible, before=user.ref)
                if base.record is None:
                    return None
                outcome = self._update(user.content, base.record, expand)
                part = commit_part(user.ref, base.commit, outcome.record,
                                   changes=[c.to_json() for c in outcome.changes],
                                   refused=[r.to_json() for r in outcome.refused])
                if self.append(session_id, events, part, origin="user") is None:
                    logger.info("MVU commit on a stale base in session %s: recomputed", session_id)
                continue
            if len(text) < MIN_REPLY:
                return None
            base = mvu_head(events, visible, before=message.ref)
            if base.record is None:
                return None
            outcome = self._update(text, base.record, expand)
            changes = [c.to_json() for c in outcome.changes]
            refused = [r.to_json() for r in outcome.refused]
            part = commit_part(message.ref, base.commit, outcome.record, changes=changes, refused=refused)
            appended = self.append(session_id, events, part)
            if appended is not None:
                return MvuView(playthrough_id, outcome.record, True, message.ref, changes, refused, appended[0].ref)
            logger.info("MVU commit on a stale base in session %s: recomputed", session_id)
        raise StoreBusy("the MVU state of this chat kept changing while a reply was applied; try again")

    def _update(self, text: str, record: dict[str, Any], expand: Any) -> UpdateOutcome:
        """`update_variables`, refusing the whole update when its result holds the configured API key (a reply
        that echoed it, a tool call, a macro): MVU state is stored, printed and sent to the model like any
        variable, so the key is refused here as on every other write surface. A refused command holding the
        key is named by a marker (refusals are stored and a tool's are sent back to the model)."""
        outcome = update_variables(text, record, substitute=expand)
        secrets = configured_secrets(self.ctx.settings, self.ctx.provider)
        if not secrets:
            return outcome
        withheld = "(a command holding the configured API key)"
        refused = [Refusal(withheld, r.reason) if holds_secret(r.command, secrets) else r for r in outcome.refused]
        if not outcome.changes or not holds_secret(json.dumps(
                [outcome.record, [c.to_json() for c in outcome.changes]], ensure_ascii=False), secrets):
            return replace(outcome, refused=refused)
        why = "a value holds the configured API key; nothing of this update is stored"
        refused += [Refusal(withheld if holds_secret(c.full_match, secrets) else c.full_match, why)
                    for c in outcome.commands]
        return UpdateOutcome(record=clone(record), changed=False, commands=[], refused=refused)

    @staticmethod
    def _uncommitted_user(events: list[Event], surface: list[Any], before: tuple[int, int],
                          expand: Any) -> Any | None:
        """The first of the person's messages after the latest record and before `before` that holds commands
        and has no record of its own, or None."""
        refs = [m.ref for m in surface]
        commits = shown_commits(events, refs)
        if before not in refs:
            return None
        end = refs.index(before)
        start = max((i for i, ref in enumerate(refs[:end]) if ref in commits), default=None)
        if start is None:
            return None  # nothing initialised before it: no MVU state to build on
        for message in surface[start + 1:end]:
            # An imported chat's lines are records of another client's play: their commands never run here.
            if message.role == "user" and message.ref not in commits and not message.body.get("imported") \
                    and extract_commands(expand(message.content)):
                return message
        return None

    def commit_commands(self, playthrough_id: int, text: str) -> MvuView:
        """Run MVU commands written by a state tool (`mvu_update`, issue 19) on the record at the head and commit
        the result, exactly as an update block in a reply is run and committed (`update_variables`: the same
        command parsing, schema checks and refusals; `append`: the same compare-and-set, recomputed on a base
        that moved). The commit (origin "tool") belongs to the newest message on the surface, the reply that
        asked for the tool, chained after that message's own commit if it has one (`mvu.records`). Nothing is
        committed when no command changed anything.

        Returns:
            The record after, its `changes` and `refused` (each skipped command with MVU's reason); `committed`
            False when nothing changed (no command found, or all refused).

        Raises:
            TavernError: the playthrough has no MVU state.
            StoreBusy: the base kept moving `CAS_TRIES` times.
        """
        view = self.playthroughs.playthrough(playthrough_id)
        _view, _books, _primary, _greetings, macros = self.material.material(playthrough_id)
        for _ in range(CAS_TRIES):
            events = self.surface_events(view.session_id)
            surface = surface_of(events)
            visible = {m.ref for m in surface}
            head = mvu_head(events, counted_messages(events, visible))
            if head.record is None:
                raise TavernError("this chat has no MVU state (its card has no [InitVar] entries or <initvar> "
                                  "greeting)")
            messages = [e for e in events if e.ref in visible
                        and e.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.USER_MESSAGE)]
            outcome = self._update(text, head.record, expander(macros))
            changes = [c.to_json() for c in outcome.changes]
            refused = [r.to_json() for r in outcome.refused]
            if not changes:
                return MvuView(playthrough_id, head.record, False, head.message, changes, refused)
            target = messages[-1].ref
            part = commit_part(target, head.commit, outcome.record, changes=changes, refused=refused)
            if self.append(view.session_id, events, part, origin="tool") is not None:
                return MvuView(playthrough_id, outcome.record, True, target, changes, refused)
            logger.info("MVU tool commit on a stale base in session %s: recomputed", view.session_id)
        raise StoreBusy("the MVU state of this chat kept changing while a tool updated it; try again")
