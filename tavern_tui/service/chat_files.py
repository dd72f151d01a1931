"""Provides `ChatFileService`: SillyTavern chat import and export.

Rules: format-digest §d (SillyTavern 1.18 chat JSONL) and DESIGN.md "Message origin":
`is_user` → customer, other speakers → agent, `is_system` → engine (shown, never sent). Each
message's swipes become sibling variants (forks before it), the saved `swipe_id` on the active
path; export writes the active path back with every sibling as a swipe.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tavern_tui.engine.events import EventKind, NewEvent, Origin, parse_origin
from tavern_tui.engine.log import HIDDEN_KEY, SYSTEM_PROMPT_SOURCE, SurfaceMessage, derive_messages
from tavern_tui.engine.state import VARIABLES_PART, StagedWrites, local_variables_of
from tavern_tui.engine.step import OPENING_SOURCE
from tavern_tui.engine.timeline import Ref, Timeline
from tavern_tui.errors import FormatError, NotFound, OriginError, SecretRefused
from tavern_tui.formats.chatlog import ChatLine, ParsedChat, format_send_date, parse_chat_jsonl, write_chat_jsonl
from tavern_tui.service.context import ServiceContext
from tavern_tui.service.library import LibraryService
from tavern_tui.service.playthroughs import PlaythroughService
from tavern_tui.service.secrets import configured_secrets, refuse_configured
from tavern_tui.service.strategies import StrategyService
from tavern_tui.service.timeline import TimelineService
from tavern_tui.store.store import PlannedSession
from tavern_tui.text.names import substitute_names
from tavern_tui.views import ImportResult

ST_KEY = "st"
"""Body key holding the fields of an imported chat line this app has no use for (kept for export)."""

_LINE_FIELDS = ("name", "is_user", "is_system", "send_date", "mes", "swipes", "swipe_id", "swipe_info", "extra")


ORIGIN_FIELD = "origin"
"""Key in a chat line's `extra` that declares the message's origin (seed 001) when it is not the
role's natural producer; written on export, validated on import (SillyTavern keeps unknown
`extra` keys)."""


def _declared_origin(line: ChatLine, file: str) -> Origin | None:
    """The origin a line declares in `extra.origin`, None when absent.

    Raises:
        FormatError: a value outside the closed set, naming the file, line and allowed values.
    """
    value = line.extra.get(ORIGIN_FIELD) if isinstance(line.extra, dict) else None
    try:
        return parse_origin(value)
    except OriginError as exc:
        raise FormatError(file, str(exc), f"line {line.line_no}: extra.{ORIGIN_FIELD}") from exc


def _event_for(line: ChatLine, swipe: int, origin: Origin | None = None) -> NewEvent:
    """The event one swipe of an imported line becomes (`origin`: the line's declared origin)."""
    info = line.swipe_info[swipe] if swipe < len(line.swipe_info) else {}
    body: dict[str, Any] = {
        "content": line.swipes[swipe], "name": line.name,
        "send_date": info.get("send_date", line.send_date),
        # The shown swipe's extra is the message's own; another swipe's is its swipe_info's.
        "extra": (line.extra if swipe == line.swipe_id else info.get("extra")) or {},
        "swipe_info": info, ST_KEY: {k: v for k, v in line.raw.items() if k not in _LINE_FIELDS},
        "imported": {"line": line.line_no, "swipe": swipe, "had_swipes": line.had_swipes,
                     "had_extra": "extra" in line.raw, "had_swipe_info": line.had_swipe_info},
    }
    reasoning = body["extra"].get("reasoning") if isinstance(body["extra"], dict) else None
    if isinstance(reasoning, str) and reasoning:
        body["reasoning"] = reasoning
    if line.is_system:
        body[HIDDEN_KEY] = True
        return NewEvent(EventKind.SYSTEM_MESSAGE, "system", body, Origin.ENGINE, "chat-import")
    if line.is_user:
        return NewEvent(EventKind.USER_MESSAGE, "user", body, origin)
    return NewEvent(EventKind.ASSISTANT_MESSAGE, "assistant", body, origin)


def plan_chat(chat: ParsedChat, file: str = "chat") -> tuple[list[PlannedSession], list[tuple[str, NewEvent]]]:
    """Sessions and events for an imported chat: the chosen swipes in one root session (message
    i at seq i+1), each other swipe in a fork ending just before its message. Events come in
    swipe order, so siblings keep the file's swipe order. A header with `chat_metadata.variables`
    (SillyTavern's local macro variables) first gets an import `state/commit` at seq 1, before
    every message, so each fork sees them (the messages then start at seq 2).

    Raises:
        FormatError: a line declares an unknown origin (names the file and line).
    """
    sessions = [PlannedSession("root")]
    events: list[tuple[str, NewEvent]] = []
    variables = chat.chat_metadata.get("variables")
    if isinstance(variables, dict) and variables:
        staged = StagedWrites()
        staged.stage(VARIABLES_PART, {"local": {"set": {str(k): v for k, v in variables.items()}}})
        commit = staged.event("import")
        assert commit is not None
        events.append(("root", commit))
    offset = len(events)
    for index, line in enumerate(chat.messages):
        origin = _declared_origin(line, file)
        for swipe in range(len(line.swipes)):
            if swipe == line.swipe_id:
                events.append(("root", _event_for(line, swipe, origin)))
            else:
                key = f"m{index}s{swipe}"
                sessions.append(PlannedSession(key, "root", index + offset))
                events.append((key, _event_for(line, swipe, origin)))
    return sessions, events


class ChatFileService:
    """SillyTavern chat import and export (`tavern.chat_files`).

    Args:
        ctx: the shared settings, store and provider.
        library: the characters a chat is with.
        playthroughs: the playthrough an export reads.
        strategies: the default strategy an imported chat starts with.
        timeline: the variant tree whose siblings become swipes.
    """

    def __init__(self, ctx: ServiceContext, library: LibraryService, playthroughs: PlaythroughService,
                 strategies: StrategyService, timeline: TimelineService) -> None:
        self.ctx = ctx
        self.library = library
        self.playthroughs = playthroughs
        self.strategies = strategies
        self.timeline = timeline

    def import_chat_bytes(self, payload: bytes, name: str, *, character: str | None = None) -> ImportResult:
        """Import a SillyTavern chat (.jsonl) as a new playthrough, in one transaction.

        The character is `character` (id or name), else the header's `character_name`, else
        the name of the first message the person did not write; it must be imported already.

        Returns:
            An ImportResult of kind "chat" whose id is the new playthrough (`duplicate` with the
            earlier one when these exact bytes were imported before); `error` names the file and
            line (malformed line) or the missing character.
        """
        try:
            # By value, in any encoding, anywhere in the file (issue 23 item 3): nothing is stored.
            refuse_configured(payload.decode("utf-8", "replace"),
                              configured_secrets(self.ctx.settings, self.ctx.provider), name)
        except SecretRefused as exc:
            return ImportResult(name, "chat", error=str(exc))
        try:
            chat = parse_chat_jsonl(payload, name)
        except FormatError as exc:
            return ImportResult(name, "chat", error=str(exc))
        try:
            record = self._chat_character(chat, name, character)
        except NotFound as exc:
            return ImportResult(name, "chat", error=str(exc), needs_character=True)
        try:
            sessions, events = plan_chat(chat, name)
        except (FormatError, NotFound) as exc:
            return ImportResult(name, "chat", error=str(exc))
        return self.store_chat(chat, payload, name, (record.id, record.name), sessions, events)

    def store_chat(self, chat: ParsedChat, payload: bytes, name: str, character: tuple[int, str],
                   sessions: list[PlannedSession], events: list[tuple[str, NewEvent]], *,
                   group_id: int | None = None, label: str | None = None) -> ImportResult:
        """Store a parsed chat's planned sessions and events (`plan_chat`) as a new playthrough of
        `character` (id, name), playing group `group_id` when given, in one transaction; the
        same bytes imported before store nothing (`duplicate`). `label` names the result
        (default the character's name). Used by the solo and the group chat import."""
        label = label or character[1]
        digest = hashlib.sha256(payload).hexdigest()
        with self.ctx.store.unit_of_work() as uow:
            earlier = uow.playthroughs.by_source_digest(digest)
        if earlier is not None:
            return ImportResult(name, "chat", earlier.id, f"{label} #{earlier.id}", warnings=tuple(chat.warnings),
                                duplicate=True)
        user = chat.user_name or next((m.name for m in chat.messages if m.is_user and m.name), None) \
            or self.ctx.settings.user_name
        meta = json.dumps({"source": Path(name).name, "sha256": digest, "header": chat.header}, ensure_ascii=False)
        # Last played when its newest message was sent (SillyTavern lists chats by it), not now;
        # a date in the future (a clock gone wrong) counts as now.
        sent = [m.sent_at for m in chat.messages if m.sent_at is not None]
        played_at = min(max(sent), datetime.now(UTC)) if sent else None
        created = self.ctx.store.import_playthrough(character_id=character[0], user_name=user, title=Path(name).stem,
                                                 meta=meta, sessions=sessions, events=events, head="root",
                                                 played_at=played_at, group_id=group_id)
        # A new opening, as `PlaythroughService.new_playthrough`.
        self.strategies.apply_strategy(created.id, self.ctx.settings.default_strategy)
        return ImportResult(name, "chat", created.id, f"{label} #{created.id}", warnings=tuple(chat.warnings))

    def _chat_character(self, chat: ParsedChat, file: str, given: str | None) -> Any:
        wanted = given or chat.character_name or next(
            (m.name for m in chat.messages if not m.is_user and not m.is_system and m.name), None)
        if not wanted:
            raise NotFound(f"{file}: the chat does not say which character it is with; pass --character NAME")
        try:
            return self.library.find(wanted, "characters", "character")
        except NotFound:
            hint = "import its card first" if given else "import its card first, or pass --character NAME"
            raise NotFound(f"{file}: no character named {wanted!r}; {hint}") from None

    def export_chat(self, playthrough_id: int) -> str:
        """The playthrough's active path as SillyTavern chat JSONL, every sibling variant of a
        message as one of its swipes (the shown one as `swipe_id`); the greeting's swipes are
        the card's greetings. Imported chats keep their header and unknown fields.

        Raises:
            NotFound: no such playthrough.
        """
        header, pairs = self.export_lines(playthrough_id)
        return write_chat_jsonl(header, [line for _message, line in pairs])

    def export_lines(self, playthrough_id: int) -> tuple[dict[str, Any], list[tuple[SurfaceMessage, ChatLine]]]:
        """What `export_chat` writes: the header (None-free dict) and each message with its line
        (the group chat export adds each reply's speaker). Raises NotFound."""
        view = self.playthroughs.playthrough(playthrough_id)
        with self.ctx.store.unit_of_work() as uow:
            record = uow.playthroughs.get(playthrough_id)
            card = self.library.card(uow.characters.get(view.character_id))
        timeline, _members = self.timeline.variant_tree(playthrough_id, bodies=True)
        meta = json.loads(record.meta or "{}")
        header = meta.get("header") or {"user_name": view.user_name, "character_name": card.name,
                                        "create_date": format_send_date(view.created_at), "chat_metadata": {}}
        # chat_metadata.variables = the local variables at the head (kept as imported, then as changed).
        local = local_variables_of(self.ctx.store.events.surface_events(view.session_id))
        metadata = found if isinstance(found := header.get("chat_metadata"), dict) else {}
        if local or "variables" in metadata:
            header = {**header, "chat_metadata": {**metadata, "variables": local}}
        pairs: list[tuple[SurfaceMessage, ChatLine]] = []
        greetings = [substitute_names(g, card.name, view.user_name) for g in card.greetings]
        for message in derive_messages(self.ctx.store.events, view.session_id):
            if message.source == SYSTEM_PROMPT_SOURCE:
                continue
            pairs.append((message, self._chat_line(len(pairs) + 2, message, timeline, view.user_name, card.name,
                                                   greetings)))
        return header, pairs

    def _chat_line(self, line_no: int, message: SurfaceMessage, timeline: Timeline, user: str, char: str,
                   greetings: list[str]) -> ChatLine:
        raw_ref = _original_ref(message.ref, timeline)
        body = message.body
        swipes, infos, chosen = [message.content], [_info(body, message)], 0
        if message.source == OPENING_SOURCE and len(greetings) > 1:
            index = body.get("greeting_index", 0)
            chosen = index if isinstance(index, int) and 0 <= index < len(greetings) else 0
            swipes = list(greetings)
            swipes[chosen] = message.content
            infos = [dict(infos[0]) for _ in swipes]
        elif raw_ref is not None:
            role = timeline.variants[raw_ref].row.role
            siblings = [s for s in timeline.siblings(raw_ref) if timeline.variants[s].row.role == role]
            chosen = siblings.index(raw_ref)
            swipes, infos = [], []
            for sibling in siblings:
                sibling_body = timeline.variants[sibling].row.body or {}
                swipes.append(message.content if sibling == raw_ref else str(sibling_body.get("content") or ""))
                infos.append(_info(body if sibling == raw_ref else sibling_body, message))
        imported = found if isinstance(found := body.get("imported"), dict) else {}
        extra = dict(body.get("extra") or {}) if isinstance(body.get("extra"), dict) else {}
        if body.get("reasoning") and "reasoning" not in extra:
            extra["reasoning"] = body["reasoning"]
        if message.origin is not None and message.role != "system":
            extra[ORIGIN_FIELD] = message.origin.value
        written = body.get("name") if isinstance(body.get("name"), str) else body.get("speaker")
        name = written if isinstance(written, str) and written else (user if message.role == "user" else char)
        send_date = infos[chosen].get("send_date")
        raw = dict(body.get(ST_KEY) or {})
        if imported.get("had_extra", True):
            raw["extra"] = extra  # SillyTavern writes `extra` on every message it makes
        return ChatLine(line_no, name, message.role == "user", bool(body.get(HIDDEN_KEY)) or message.role == "system",
                        swipes, chosen, infos, send_date, None, extra, raw,
                        bool(imported.get("had_swipes")) or len(swipes) > 1,
                        had_swipe_info=bool(imported.get("had_swipe_info", True)))


def _info(body: dict[str, Any], message: SurfaceMessage) -> dict[str, Any]:
    """A swipe's `swipe_info`: the imported one, else its send date and extra."""
    info = body.get("swipe_info")
    if isinstance(info, dict) and info:
        return dict(info)
    return {"send_date": body.get("send_date") or format_send_date(message.created_at), "gen_started": None,
            "gen_finished": None, "extra": dict(body.get("extra") or {}) if isinstance(body.get("extra"), dict) else {}}


def _original_ref(ref: Ref, timeline: Timeline) -> Ref | None:
    """The variant a surface message stands for: itself, or what an edit replaced."""
    seen = 0
    while ref not in timeline.variants and seen < 100:
        replaced = next((r for r in timeline.replacements.values() if r.ref == ref), None)
        if replaced is None or not replaced.targets:
            return None
        ref = replaced.targets[0]
        seen += 1
    return ref if ref in timeline.variants else None
