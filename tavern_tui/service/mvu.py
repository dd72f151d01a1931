"""Provides `MvuService` (`tavern.mvu`): MVU state records of a playthrough, initialised and committed.

Rules: issue 18 item 1, `tavern_tui.mvu` (the pure rules) and `mvu.records` (how records live in the log).
A card with no MVU material ([InitVar] entries, greeting `<initvar>`) never gets a record. The first record is
committed before the first generation (`ensure_initialised`, from the step's prelude), attached to the greeting
shown; each settled assistant reply then commits one record computed from the record before it, as one
`state/commit` (origin "reply") naming its base: the append is a compare-and-set on the session's state commits
(`append_if_unchanged`), and a stale read is recomputed, never merged. Previews read `head` (computed, never
committed). A swipe is a fork before the reply, so it computes from the message before it; switching swipes
moves the head, and the record follows.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tavern_tui.assembly.macros import MacroContext, substitute_readonly
from tavern_tui.assembly.memo import per_list
from tavern_tui.engine.events import Event, EventKind, NewEvent
from tavern_tui.engine.log import surface_of
from tavern_tui.engine.state import STATE_KIND
from tavern_tui.engine.step import OPENING_SOURCE
from tavern_tui.errors import StoreBusy, TavernError
from tavern_tui.mvu import (
    MVU_PART,
    InitBook,
    commit_part,
    extract_commands,
    generate_schema,
    has_mvu_material,
    initial_record,
    mvu_head,
    snapshot_variables,
    update_variables,
)
from tavern_tui.mvu.jsutil import clone
from tavern_tui.mvu.records import mvu_commits
from tavern_tui.mvu.schema import clean_up_metadata
from tavern_tui.mvu.update import Refusal, UpdateOutcome, message_after_update
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.lore import WorldInfoService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.secrets import configured_secrets
from tavern_tui.service.variables import VariableService
from tavern_tui.text.secret_values import holds_secret

__all__ = ["MIN_REPLY", "MvuBound", "MvuService", "MvuView", "apply_text", "card_books", "init_from_card",
           "parse_text", "stat_hash"]

logger = logging.getLogger(__name__)

MIN_REPLY = 5
"""Assistant messages shorter than this are not read for commands (update_variables.ts:1431)."""
CAS_TRIES = 8
"""How often a reply's commit is recomputed on a base that moved before giving up."""


@dataclass(frozen=True)
class MvuView:
    """The MVU record at a playthrough's head.

    Attributes:
        record: `{stat_data, schema, display_data, delta_data, initialized_lorebooks}`, None = no MVU state.
        committed: False when it is the initial record computed for display only (nothing initialised yet).
        message: ref of the message it belongs to; changes / refused: what the reply that made it changed
            (`mvu.Change.to_json`) and which of its commands were refused and why.
    """

    playthrough_id: int
    record: dict[str, Any] | None
    committed: bool = False
    message: tuple[int, int] | None = None
    changes: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    commit: tuple[int, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """`{"playthrough", "record", "committed", "message", "changes", "refused"}`."""
        return {"playthrough": self.playthrough_id, "record": self.record, "committed": self.committed,
                "message": list(self.message) if self.message else None, "changes": list(self.changes),
                "refused": list(self.refused)}


def stat_hash(record: dict[str, Any] | None) -> str | None:
    """sha256 (hex) of a record's `stat_data` as canonical JSON (keys sorted, no spaces, UTF-8); None for none."""
    if record is None:
        return None
    text = json.dumps(record.get("stat_data"), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class MvuBound:
    """The MVU state one request is built from.

    Attributes:
        snapshot: the message variables macros and templates read (`snapshot_variables`; {} = no MVU state).
        texts: message ref → the text MVU would have stored back for it (`message_after_update`: the status
            placeholder appended, `<status_current_variable>` blocks removed) for the assistant messages it has
            read; the log keeps the raw text, requests and the transcript use this one.
        facts: what the trace records (`{"commit", "message", "committed", "stat_data_sha256", "pending"}`),
            None when there is no MVU state.
    """

    snapshot: dict[str, Any] = field(default_factory=dict)
    texts: dict[tuple[int, int], str] = field(default_factory=dict)
    facts: dict[str, Any] | None = None


class MvuService:
    """Reads and commits MVU records.

    Args:
        ctx: the store. library, lore: the card and its books. playthroughs: heads. variables: the macro
            variables macros in [InitVar] contents and replies are expanded with.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 lore: WorldInfoService, variables: VariableService) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self.lore = lore
        self.variables = variables
        # playthrough → (log version, head): previews rebuild the prompt on every keystroke, and the log's
        # version changes with every append (a binding changed meanwhile shows at the next event)
        self._heads: dict[int, tuple[Any, MvuView]] = {}
        self._texts: dict[int, tuple[Any, dict[tuple[int, int], str]]] = {}

    # -- material ----------------------------------------------------------------------------------------
    def _material(self, playthrough_id: int) -> tuple[Any, list[InitBook], str | None, list[str], MacroContext]:
        view = self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work(write=False) as uow:
            character = uow.characters.get(view.character_id)
        card = self.library.card(character)
        books = self.lore.effective_books(view.id, character, card)
        # MVU's order (variable_init.ts:222-237): global books, the character's primary, its additional ones.
        embedded = [b for b in books if b.source == "character"][-1:] if card.data.get("character_book") else []
        ordered = ([b for b in books if b.source == "global"] + embedded
                   + [b for b in books if b.source == "character" and b not in embedded])
        init_books = [InitBook(b.book.name, tuple((e.comment, e.content) for e in b.book.entries)) for b in ordered]
        primary = embedded[0].book.name if embedded else None
        macros = replace(self.variables.macro_context(view.session_id, f"playthrough-{playthrough_id}"),
                         user=view.user_name, char=view.character_name)
        return view, init_books, primary, list(card.greetings), macros

    @staticmethod
    def _expander(macros: MacroContext) -> Any:
        return lambda text: substitute_readonly(text, macros)

    # -- reading -----------------------------------------------------------------------------------------
    def surface_events(self, session_id: int) -> list[Event]:
        """The session's surface, plus the MVU commits its ancestors made just after the fork point for a message
        on it (a reply's record is committed after the reply, so a fork at that reply inherits it), each placed
        after that ancestor's last event on the surface."""
        log = self.ctx.store.events
        events = log.surface_events(session_id)
        cut = {sid: upto for sid, upto in log.ancestry(session_id) if upto is not None}
        if not cut:
            return events
        messages = {e.ref for e in events if e.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.USER_MESSAGE)}
        inherited: dict[int, list[Event]] = {}
        for event in log.events_of_kind([STATE_KIND], list(cut)):
            part = event.body.get(MVU_PART)
            if event.seq > (cut[event.session_id] or 0) and isinstance(part, dict) \
                    and tuple(part.get("message") or ()) in messages:
                inherited.setdefault(event.session_id, []).append(event)
        if not inherited:
            return events
        last = {e.session_id: i for i, e in enumerate(events)}
        out: list[Event] = []
        for i, event in enumerate(events):
            out.append(event)
            if last.get(event.session_id) == i:
                out += inherited.pop(event.session_id, [])
        return out

    def head(self, playthrough_id: int, view: Any = None) -> MvuView:
        """The record at the head: the committed one, else the initial record computed now (not committed),
        else None (no MVU material). `view`: the playthrough's `PlaythroughView` when the caller has just
        read it (a step's assembly), saving the read.

        Raises:
            NotFound: no such playthrough.
        """
        view = view if view is not None else self.playthroughs.playthrough(playthrough_id)
        key = (self.ctx.store.events.version(), view.session_id)  # a swipe to a known sibling moves only the head
        cached = self._heads.get(playthrough_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        head = self._head(playthrough_id, view)
        self._heads[playthrough_id] = (key, head)
        return head

    def _head(self, playthrough_id: int, view: Any) -> MvuView:
        events = self.surface_events(view.session_id)
        snapshot = getattr(self.ctx.store.events, "surface_snapshot", None)
        if snapshot is not None:
            # The inherited commits are no messages: the surface is the log's own, which the step derives
            # too (`assembly.memo.per_list` on the log's shared tuple: derived once for both).
            shared = snapshot(view.session_id)
            surface = per_list(shared, "surface_of", lambda: surface_of(shared))
        else:
            surface = surface_of(events)
        found = mvu_head(events, {m.ref for m in surface})
        if found.record is not None:
            part = found.part or {}
            return MvuView(playthrough_id, found.record, True, found.message, list(part.get("changes") or []),
                           list(part.get("refused") or []), found.commit)
        planned = self._planned_init(playthrough_id, surface)
        if planned is None:
            return MvuView(playthrough_id, None)
        message, result = planned
        return MvuView(playthrough_id, result.record, False, message,
                       [c.to_json() for c in result.greeting.changes] if result.greeting else [],
                       [r.to_json() for r in result.greeting.refused] if result.greeting else [])

    def snapshot(self, playthrough_id: int, view: Any = None) -> dict[str, Any]:
        """The bound snapshot a step of the playthrough reads (`mvu.snapshot_variables` of the head record);
        `view` as for `head`."""
        return snapshot_variables(self.head(playthrough_id, view).record)

    def display_texts(self, playthrough_id: int) -> dict[tuple[int, int], str]:
        """`message_texts` of the playthrough's head session; {} without MVU state (no read of the log then)."""
        if self.head(playthrough_id).record is None:
            return {}
        return self.message_texts(self.playthroughs.playthrough(playthrough_id).session_id)

    def message_texts(self, session_id: int) -> dict[tuple[int, int], str]:
        """`MvuBound.texts` for a session's surface: each assistant message a reply commit names (kept per log
        version: a transcript asks on every redraw)."""
        key = (self.ctx.store.events.version(), session_id)
        cached = self._texts.get(session_id)
        if cached is not None and cached[0] == key:
            return cached[1]
        texts = self._message_texts(session_id)
        self._texts[session_id] = (key, texts)
        return texts

    def _message_texts(self, session_id: int) -> dict[tuple[int, int], str]:
        events = self.surface_events(session_id)
        surface = surface_of(events)
        commits = mvu_commits(events, {m.ref for m in surface})
        out: dict[tuple[int, int], str] = {}
        for message in surface:
            head = commits.get(message.ref)
            if message.role == "assistant" and head is not None and not (head.part or {}).get("init"):
                text = message_after_update(message.content)
                if text != message.content:
                    out[message.ref] = text
        return out

    def bound(self, playthrough_id: int, pending: Sequence[str] = ()) -> MvuBound:
        """The state a request is built from: the head record, then the commands of `pending` (the person's
        messages this step sends, in order) applied to it, as MVU applies a sent message's commands before the
        generation (`MESSAGE_SENT` → `handleVariablesInMessage`, user messages included). Computed, never
        committed here (the reply's commit commits them first)."""
        view = self.playthroughs.playthrough(playthrough_id)
        head = self.head(playthrough_id)
        if head.record is None:
            return MvuBound()
        record = head.record
        applied: list[dict[str, Any]] = []
        if any(pending):
            macros = self._material(playthrough_id)[4]
            for index, text in enumerate(pending):
                outcome = update_variables(text, record, substitute=self._expander(macros))
                if outcome.commands:
                    record = outcome.record
                    applied.append({"input": index, "changes": [c.to_json() for c in outcome.changes],
                                    "refused": [r.to_json() for r in outcome.refused]})
        facts = {"commit": list(head.commit) if head.commit else None,
                 "message": list(head.message) if head.message else None, "committed": head.committed,
                 "stat_data_sha256": stat_hash(record), "pending": applied}
        return MvuBound(snapshot_variables(record), self.message_texts(view.session_id), facts)

    def _planned_init(self, playthrough_id: int, surface: list[Any]) -> tuple[tuple[int, int], Any] | None:
        _view, books, primary, greetings, macros = self._material(playthrough_id)
        if not has_mvu_material(books, greetings):
            return None
        shown = [m for m in surface if m.role in ("user", "assistant")]
        if not shown:
            return None  # MVU needs a message to hold the record (initCheck: "需要有开场白")
        expand = self._expander(macros)
        if len(shown) == 1 and shown[0].source == OPENING_SOURCE:
            result = initial_record(books, shown[0].content, primary_book=primary, substitute=expand)
        else:  # more than the greeting: loaded onto the last message, no greeting commands (:192-195)
            result = initial_record(books, "", primary_book=primary, substitute=expand, check_material=False)
        return (shown[-1].ref, result) if result is not None else None

    # -- committing --------------------------------------------------------------------------------------
    def ensure_initialised(self, playthrough_id: int) -> bool:
        """Commit the initial record when the head has MVU material and no record yet (before a generation).
        Returns whether a record was committed now."""
        view = self.playthroughs.playthrough(playthrough_id)
        for _ in range(CAS_TRIES):
            events = self.surface_events(view.session_id)
            surface = surface_of(events)
            if mvu_head(events, {m.ref for m in surface}).record is not None:
                return False
            planned = self._planned_init(playthrough_id, surface)
            if planned is None:
                return False
            message, result = planned
            # What could not be read ([InitVar] entries that failed or were refused, e.g. a YAML
            # alias bomb) is kept with the record, so the state pane and the trace say why it is short.
            refused = [{"command": "initial variables", "reason": error} for error in result.errors]
            refused += [r.to_json() for r in result.greeting.refused] if result.greeting else []
            part = commit_part(message, None, result.record, init=True,
                               changes=[c.to_json() for c in result.greeting.changes] if result.greeting else [],
                               refused=refused)
            if self._append(view.session_id, events, part) is not None:
                return True
        raise StoreBusy("the MVU state of this chat kept changing while it was initialised; try again")

    def _append(self, session_id: int, events: list[Event], part: dict[str, Any],
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
        if message.kind != EventKind.ASSISTANT_MESSAGE:
            return None
        text = str(message.body.get("content") or "")
        _view, _books, _primary, _greetings, macros = self._material(playthrough_id)
        expand = self._expander(macros)
        for _ in range(CAS_TRIES * 4):
            events = self.surface_events(session_id)
            surface = surface_of(events)
            visible = {m.ref for m in surface}
            user = self._uncommitted_user(events, surface, message.ref, expand)
            if user is not None:
                base = mvu_head(events, visible, before=user.ref)
                if base.record is None:
                    return None
                outcome = self._update(user.content, base.record, expand)
                part = commit_part(user.ref, base.commit, outcome.record,
                                   changes=[c.to_json() for c in outcome.changes],
                                   refused=[r.to_json() for r in outcome.refused])
                if self._append(session_id, events, part, origin="user") is None:
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
            appended = self._append(session_id, events, part)
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
        visible = {m.ref for m in surface}
        commits = mvu_commits(events, visible)
        refs = [m.ref for m in surface]
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
        command parsing, schema checks and refusals; `_append`: the same compare-and-set, recomputed on a base
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
        _view, _books, _primary, _greetings, macros = self._material(playthrough_id)
        for _ in range(CAS_TRIES):
            events = self.surface_events(view.session_id)
            surface = surface_of(events)
            visible = {m.ref for m in surface}
            head = mvu_head(events, visible)
            if head.record is None:
                raise TavernError("this chat has no MVU state (its card has no [InitVar] entries or <initvar> "
                                  "greeting)")
            messages = [e for e in events if e.ref in visible
                        and e.kind in (EventKind.ASSISTANT_MESSAGE, EventKind.USER_MESSAGE)]
            outcome = self._update(text, head.record, self._expander(macros))
            changes = [c.to_json() for c in outcome.changes]
            refused = [r.to_json() for r in outcome.refused]
            if not changes:
                return MvuView(playthrough_id, head.record, False, head.message, changes, refused)
            target = messages[-1].ref
            part = commit_part(target, head.commit, outcome.record, changes=changes, refused=refused)
            if self._append(view.session_id, events, part, origin="tool") is not None:
                return MvuView(playthrough_id, outcome.record, True, target, changes, refused)
            logger.info("MVU tool commit on a stale base in session %s: recomputed", view.session_id)
        raise StoreBusy("the MVU state of this chat kept changing while a tool updated it; try again")


# -- file tools (`tavern mvu …`): no store -------------------------------------------------------------------

def card_books(card: Any) -> tuple[list[InitBook], str | None]:
    """A parsed card's embedded book as MVU reads it (its entries' comment and content, in file order), and
    that book's name (the character's primary book)."""
    book = card.data.get("character_book")
    if not isinstance(book, dict):
        return [], None
    name = str(book.get("name") or card.name)
    entries = found if isinstance(found := book.get("entries"), list) else []
    return [InitBook(name, tuple((str(e.get("comment") or ""), str(e.get("content") or ""))
                                 for e in entries if isinstance(e, dict)))], name


def init_from_card(path: Path, greeting: int = 0, *, user: str = "User") -> dict[str, Any]:
    """`tavern mvu init`: the initial record of a card file started on greeting `greeting` (0 = `first_mes`,
    n = `alternate_greetings[n-1]`, SillyTavern's swipe order), macros expanded with `user` and the card's name.

    Returns:
        `{"card", "greeting", "record" (None: no MVU material), "changes", "refused", "errors"}`.

    Raises:
        TavernError: the file cannot be read as a card, or no such greeting.
    """
    from tavern_tui.formats.cards import parse_card

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TavernError(f"{path}: cannot read: {exc}") from None
    card = parse_card(data, str(path))
    greetings = [card.data.get("first_mes") or "", *(card.data.get("alternate_greetings") or [])]
    if not 0 <= greeting < len(greetings):
        raise TavernError(f"{path}: no greeting {greeting} (the card has {len(greetings)}: 0 to {len(greetings) - 1})")
    books, primary = card_books(card)
    macros = MacroContext(user=user, char=card.name)
    result = None
    if has_mvu_material(books, [str(g) for g in greetings]):
        result = initial_record(books, str(greetings[greeting]), primary_book=primary,
                                substitute=lambda text: substitute_readonly(text, macros), check_material=False)
    return {"card": card.name, "greeting": greeting, "record": result.record if result else None,
            "changes": [c.to_json() for c in result.greeting.changes] if result and result.greeting else [],
            "refused": [r.to_json() for r in result.greeting.refused] if result and result.greeting else [],
            "errors": list(result.errors) if result else []}


def parse_text(text: str) -> list[dict[str, Any]]:
    """`tavern mvu parse`: the commands found in a reply text, in order: `{"type", "path", "args", "reason"}`
    (names as written; `path` as the command will use it)."""
    return [c.to_json() for c in extract_commands(text)]


def apply_text(state: Any, text: str) -> dict[str, Any]:
    """`tavern mvu apply`: a reply text applied to a record `{stat_data, schema, …}`.

    Returns:
        `{"record", "changed", "changes", "refused"}`.

    Raises:
        TavernError: `state` is not an object with `stat_data` (MVU state needs `stat_data` and `schema`;
            a missing schema is generated from the data, as initialisation would).
    """
    if not isinstance(state, dict) or not isinstance(state.get("stat_data"), dict):
        raise TavernError("the state must be a JSON object with a stat_data object ({\"stat_data\": {…}, "
                          "\"schema\": {…}})")
    record = clone(state)
    if not isinstance(record.get("schema"), dict):  # as initialisation does: schema from the marks, then clean
        record["schema"] = generate_schema(clone(record["stat_data"]))
        clean_up_metadata(record["stat_data"])
    outcome = update_variables(text, record)
    return {"record": outcome.record, "changed": outcome.changed, "changes": [c.to_json() for c in outcome.changes],
            "refused": [r.to_json() for r in outcome.refused]}
