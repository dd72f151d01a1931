"""Provides the plain view types the service returns (no database objects leave the service)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The outcome of importing one file.

    Attributes:
        path: the file as given.
        kind: "character", "world_book", "group" (then `id` is the group) or "chat" (then `id` is
            the new playthrough).
        id: the stored id, None when the import failed.
        error: why it failed (names the file, field and reason), None on success.
        duplicate: the same bytes were imported before; `id` is the earlier one and nothing new was stored.
        needs_character: a chat whose character is not in the library (or not named): importing
            it again with `character=` (the TUI offers the character list) can succeed.
    """

    path: str
    kind: str
    id: int | None = None
    name: str | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()
    duplicate: bool = False
    needs_character: bool = False

    @property
    def ok(self) -> bool:
        """True when the file is in the database now."""
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        """The `tavern import --json` object: kind, id, name, path, error, warnings, duplicate."""
        return {"kind": self.kind, "id": self.id, "name": self.name, "path": self.path, "error": self.error,
                "warnings": list(self.warnings), "duplicate": self.duplicate}


@dataclass(frozen=True, slots=True)
class CharacterView:
    """A character as lists show it."""

    id: int
    name: str
    spec: str
    creator: str
    tags: tuple[str, ...]
    greetings: int
    book_entries: int | None
    source_name: str
    created_at: datetime
    description: str = ""
    archived: bool = False
    """Archived: hidden from lists (nothing deleted; issue 20 item 5)."""
    revision: int = 0
    """The card revision in use (0: as imported; each edit one more)."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for `--json` output."""
        return {"id": self.id, "name": self.name, "spec": self.spec, "creator": self.creator, "tags": list(self.tags),
                "greetings": self.greetings, "book_entries": self.book_entries, "source_name": self.source_name,
                "created_at": self.created_at.isoformat(), "archived": self.archived, "revision": self.revision}


CARD_TEXT_FIELDS = ("name", "description", "personality", "scenario", "first_mes", "mes_example", "creator_notes",
                    "system_prompt", "post_history_instructions", "creator", "character_version")
"""The card's text fields in V2 spec order ([CCv2] spec_v2.md): what the card view shows and an
edit may change."""

CARD_LIST_FIELDS = ("alternate_greetings", "tags")
"""The card's list-of-text fields an edit may change."""

PROMPT_FIELDS = ("description", "personality", "scenario", "first_mes", "mes_example", "system_prompt",
                 "post_history_instructions", "alternate_greetings")
"""The fields that reach a request (spec_v2: `creator_notes`, `tags`, `creator` and
`character_version` are never put in prompts; the card view marks the others "not sent")."""


@dataclass(frozen=True, slots=True)
class CardView:
    """A character's whole card as the card view shows it (`tavern card`, the TUI card screen).

    Attributes:
        fields: every text field of `CARD_TEXT_FIELDS` (the card's values, "" when empty).
        alternate_greetings, tags: the card's lists.
        book: the embedded lorebook's name and entry count, None when the card has none.
        extensions: the keys under `data.extensions` (kept verbatim, shown by name).
        other: other keys of `data` (V3 fields such as `nickname`, `group_only_greetings`, …).
        revisions: (revision, reason, when) of every stored revision, oldest first.
    """

    character: CharacterView
    spec_version: str
    container: str
    fields: dict[str, str]
    alternate_greetings: tuple[str, ...]
    tags: tuple[str, ...]
    book: tuple[str, int] | None
    extensions: tuple[str, ...]
    other: dict[str, Any]
    revisions: tuple[tuple[int, str, datetime], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern card --json`: every field by its card name, plus `id`,
        `revision`, `archived`, `spec`, `book` and `revisions`."""
        return {"id": self.character.id, "revision": self.character.revision, "archived": self.character.archived,
                "spec": self.character.spec, "spec_version": self.spec_version, "container": self.container,
                "source_name": self.character.source_name, **self.fields,
                "alternate_greetings": list(self.alternate_greetings), "tags": list(self.tags),
                "book": None if self.book is None else {"name": self.book[0], "entries": self.book[1]},
                "extensions": list(self.extensions), "other": self.other,
                "revisions": [{"revision": r, "reason": why, "created_at": at.isoformat()}
                              for r, why, at in self.revisions]}


@dataclass(frozen=True, slots=True)
class PlaythroughView:
    """A playthrough as lists show it; `session_id` is its active head session."""

    id: int
    character_id: int
    character_name: str
    user_name: str
    session_id: int
    created_at: datetime
    updated_at: datetime
    message_count: int = 0
    strategy: str = "compat"
    """The applied assembly strategy ("compat" when none was applied)."""
    preset_id: int | None = None
    """The bound preset; None = SillyTavern's built-in default."""
    chat_title: str = ""
    """The chat's title: the one given (`tavern rename`), else its first line, else its date."""
    archived: bool = False
    """Archived: hidden from lists (nothing deleted)."""
    played_count: int = 0
    """Messages played: `message_count` plus those summaries stand in for (each original once)."""
    summarised_count: int = 0
    """Of `played_count`, the messages now folded into a summary."""
    imported_user: str = ""
    """An imported chat's own name for the person (its old lines keep it); "" when not imported."""
    ooc: bool = False
    """Out-of-character talk is on: the roleplay policy (`rp:policy`) is not sent (`tavern ooc`)."""

    @property
    def title(self) -> str:
        """"<character> #<id>", the label lists use."""
        return f"{self.character_name} #{self.id}"

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern sessions --json`."""
        return {"id": self.id, "character_id": self.character_id, "character": self.character_name,
                "user_name": self.user_name, "session_id": self.session_id, "messages": self.message_count,
                "strategy": self.strategy, "preset_id": self.preset_id, "title": self.chat_title,
                "archived": self.archived, "played": self.played_count, "summarised": self.summarised_count,
                "imported_user_name": self.imported_user or None, "ooc": self.ooc,
                "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat()}


@dataclass(frozen=True, slots=True)
class MessageView:
    """One message of a playthrough's surface, ready to display.

    Attributes:
        ref: (session_id, seq) of the event holding it.
        origin: the effective origin ("customer", "agent", "engine", "operator").
        natural: True when the origin is the role's natural producer (not marked in the UI).
        partial: a reply cut off by cancel or error (`assistant/attempt`).
        error: the provider error that cut it off, if any.
        speaker: the display name (character, person, or "System").
        summary: for a summary node, `{"covers", "first", "last", "from", "to", "targets"}`
            (issue 16: what it replaced); None otherwise.
        tool_calls: an assistant message's tool calls, as sent (`[{"id", "type", "function":
            {"name", "arguments"}}]`; issue 19).
        tool_result: a `tool/result`'s facts: `{"toolCallId", "name", "arguments", "status",
            "summary", "reason"}`; None for other messages.
        display: what the transcript shows when regex scripts change it (issue 18: `markdownOnly`
            scripts, status bars as readable text); None = `content` as it is. `content` stays
            the raw text (edits and exports use it).
        character_id: the character who wrote a group chat's reply (None: the playthrough's own).
    """

    ref: tuple[int, int]
    role: str
    origin: str
    natural: bool
    kind: str
    source: str | None
    content: str
    speaker: str
    created_at: datetime
    reasoning: str = ""
    partial: bool = False
    error: str | None = None
    error_category: str | None = None
    summary: dict[str, Any] | None = None
    tool_calls: tuple[dict[str, Any], ...] = ()
    tool_result: dict[str, Any] | None = None

    @property
    def tool_line(self) -> str:
        """A tool result's one-line form, name then summary: `roll_dice 2d6+1 → [3, 5] + 1 = 9`
        ("" for other messages)."""
        if self.tool_result is None:
            return ""
        result = self.tool_result
        summary = result.get("summary") or ": ".join(str(v) for v in (result.get("status"), result.get("reason")) if v)
        return f"{self.tool_result.get('name', '')} {summary}".strip()

    display: str | None = None
    character_id: int | None = None

    @property
    def shown(self) -> str:
        """The text the transcript shows (`display`, else `content`)."""
        return self.display if self.display is not None else self.content

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern show --json` (with `tool_calls` and `tool_result` when set)."""
        row = {"session_id": self.ref[0], "seq": self.ref[1], "role": self.role, "origin": self.origin,
               "kind": self.kind, "source": self.source, "speaker": self.speaker, "content": self.content,
               "reasoning": self.reasoning, "partial": self.partial, "error": self.error,
               "error_category": self.error_category,
               "created_at": self.created_at.isoformat()}
        if self.character_id is not None:
            row["character_id"] = self.character_id
        if self.tool_calls:
            row["tool_calls"] = [dict(c) for c in self.tool_calls]
        if self.tool_result is not None:
            row["tool_result"] = dict(self.tool_result)
        return row


@dataclass(frozen=True, slots=True)
class WorldBookView:
    """A stored world book as lists show it.

    Attributes:
        bindings: where it is bound, e.g. ("global",), ("character:3", "playthrough:7").
    """

    id: int
    name: str
    entries: int
    source_name: str
    created_at: datetime
    bindings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON form for `--json` output."""
        return {"id": self.id, "name": self.name, "entries": self.entries, "source_name": self.source_name,
                "bindings": list(self.bindings), "created_at": self.created_at.isoformat()}


@dataclass(frozen=True, slots=True)
class VariantView:
    """One message variant of a playthrough's timeline (the branch-tree pane, `tavern tree`).

    Attributes:
        ref: (session_id, seq) of the event holding it.
        parent: the ref of the message before it on its branch; None for a first message.
        depth: its position in the conversation (0 = the first message).
        position: (n, m): the n-th of m siblings (variants with the same parent).
        active: on the path the chat shows.
        preview: the start of its text (an edit's text when the active path shows it edited).
        edited / deleted: the active path shows it replaced by an edit, or deleted.
        children: how many variants continue from it.
        branches: playthroughs started from here ("new playthrough from here").
        summarised: the active path shows it folded into a summary (its preview stays its own text).
        summary_of: on a summary node (listed once, after the last message it covers; its ref is
            the summary's, its parent that last message): the first and last message numbers it
            covers, counted from 1.
    """

    ref: tuple[int, int]
    parent: tuple[int, int] | None
    depth: int
    role: str
    origin: str
    source: str | None
    kind: str
    position: tuple[int, int]
    active: bool
    preview: str
    children: int
    edited: bool = False
    deleted: bool = False
    partial: bool = False
    branches: tuple[int, ...] = ()
    summarised: bool = False
    summary_of: tuple[int, int] | None = None
    speaker: str | None = None
    """A group member's name on its reply (None: the role's usual name)."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern tree --json`."""
        return {"session_id": self.ref[0], "seq": self.ref[1],
                "parent": list(self.parent) if self.parent else None, "depth": self.depth, "role": self.role,
                "origin": self.origin, "source": self.source, "kind": self.kind,
                "sibling": self.position[0], "siblings": self.position[1],
                "siblings_refs": None, "active": self.active, "preview": self.preview, "children": self.children,
                "edited": self.edited, "deleted": self.deleted, "partial": self.partial,
                "branches": list(self.branches), "summarised": self.summarised,
                "summary_of": list(self.summary_of) if self.summary_of else None,
                **({"speaker": self.speaker} if self.speaker else {})}


@dataclass(frozen=True, slots=True)
class TimelineView:
    """A playthrough's tree of message variants, depth-first (children oldest first).

    Attributes:
        head_session_id: the active session.
        path: refs of the active path, first message first.
        siblings: ref → refs of it and its siblings, oldest first.
    """

    playthrough_id: int
    head_session_id: int
    variants: list[VariantView]
    path: list[tuple[int, int]]
    siblings: dict[tuple[int, int], list[tuple[int, int]]]

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern tree --json`: the head, the active path and every variant."""
        variants = []
        for variant in self.variants:
            item = variant.to_json()
            item["siblings_refs"] = [list(r) for r in self.siblings.get(variant.ref, [variant.ref])]
            variants.append(item)
        return {"playthrough_id": self.playthrough_id, "head_session_id": self.head_session_id,
                "path": [list(r) for r in self.path], "variants": variants}


@dataclass(frozen=True, slots=True)
class SwipeView:
    """The swipe counter of the chat's last message.

    Attributes:
        ref: the message swipes act on (None when the chat is empty).
        position: (n, m) shown as `n/m`; for a greeting, m counts the card's greetings.
        greeting: the last message is the opening greeting (swipes move among greetings).
        can_generate: swiping right past the last sibling generates a new reply.
    """

    ref: tuple[int, int] | None
    position: tuple[int, int]
    greeting: bool = False
    can_generate: bool = False

    @property
    def label(self) -> str:
        """"n/m", or "" when there is nothing to swipe."""
        return f"{self.position[0]}/{self.position[1]}" if self.ref is not None else ""


@dataclass(frozen=True, slots=True)
class PresetView:
    """An imported chat-completion preset as lists show it.

    Attributes:
        order_source: which prompt order is used: "100001", "100000" or "default".
        enabled: how many prompts that order sends.
    """

    id: int
    name: str
    prompts: int
    order_source: str
    enabled: int
    source_name: str
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        """JSON form for `--json` output."""
        return {"id": self.id, "name": self.name, "prompts": self.prompts, "order_source": self.order_source,
                "enabled": self.enabled, "source_name": self.source_name, "created_at": self.created_at.isoformat()}


@dataclass(frozen=True, slots=True)
class TraceView:
    """One recorded provider request (history, never a preview).

    Attributes:
        id: "session:seq" of its `trace/request` event.
        attempts: one per HTTP attempt: `{"status", "category", "config", "omitted", …}`
            (several after retries; empty when the provider keeps no attempt list).
        usage: prompt/completion tokens as the provider reported them, or None.
        latency_ms: submit to first streamed text, or None.
        reply: "session:seq" of the reply (or attempt) it produced, or None.
        outcome: "ok", "failed", "stopped", "open", or "retried (<status>)" for a request the
            provider refused before a retry.
        attempt: 1 for the first request of a step, n for its n-th (a retry's own record).
        retry_of: the first record's id, for a retry.
        omitted: call-config fields this request left out → the provider's reason.
        assembled_tokens: the request's own token count when it was assembled (its context
            fit's `used`: the app's estimate or tokenizer, not the provider's), or None.
        speaker: the group member the request was written for (its reply's `name`); None
            outside a group chat, and while the reply is not stored yet.
    """

    id: str
    session_id: int
    submitted_at: str
    provider: str
    model: str
    strategy: str
    generation: str
    messages: int
    config: dict[str, Any]
    attempts: list[dict[str, Any]]
    usage: dict[str, Any] | None
    latency_ms: int | None
    reply: str | None
    outcome: str
    attempt: int = 1
    retry_of: str | None = None
    omitted: dict[str, str] = field(default_factory=dict)
    assembled_tokens: int | None = None
    speaker: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern trace list --json`."""
        return {"id": self.id, "session_id": self.session_id, "submitted_at": self.submitted_at,
                "provider": self.provider, "model": self.model, "strategy": self.strategy,
                "generation": self.generation, "messages": self.messages, "config": self.config,
                "attempts": self.attempts, "usage": self.usage, "latency_ms": self.latency_ms, "reply": self.reply,
                "outcome": self.outcome, "attempt": self.attempt, "retry_of": self.retry_of, "omitted": self.omitted,
                "speaker": self.speaker}


@dataclass(frozen=True, slots=True)
class InboxItemView:
    """One pending inbox item as the chat and `tavern inbox` show it (DESIGN.md "The inbox").

    Attributes:
        id: the item's stable id (kept across edits; `tavern inbox edit/cancel` take it).
        position: 1-based place in claim order (steers first).
        target: "next-turn" (queued) or "next-step" (a steer).
        origin: who wrote it ("customer" for the person).
    """

    id: str
    position: int
    target: str
    text: str
    queued_at: datetime
    origin: str = "customer"

    @property
    def steer(self) -> bool:
        """True for a next-step item."""
        return self.target == "next-step"

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern inbox --json`."""
        return {"id": self.id, "position": self.position, "target": self.target, "text": self.text,
                "queued_at": self.queued_at.isoformat(), "origin": self.origin}


@dataclass(frozen=True, slots=True)
class OpeningView:
    """An opening draft (issue 20 item 1): a playthrough not yet begun, with no session.

    Attributes:
        greeting_index: the chosen greeting (0 = first_mes, then alternate_greetings);
            `greeting_count` how many the card has (0: none); `greeting` its text with
            `{{char}}`/`{{user}}` filled in.
        strategy, strategy_version: the snapshot the playthrough will pin.
        preset_id/preset_name: the chosen preset (None/"": the built-in default).
        lore_ids/lore_names: the world books bound as chat lore at the first send.
    """

    id: int
    character_id: int
    character_name: str
    user_name: str
    greeting_index: int
    greeting_count: int
    greeting: str
    strategy: str
    strategy_version: int
    preset_id: int | None
    preset_name: str
    lore_ids: list[int]
    lore_names: list[str]
    created_at: datetime
    updated_at: datetime

    @property
    def title(self) -> str:
        """"<character> draft #<id>", the label lists use."""
        return f"{self.character_name} draft #{self.id}"

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern new --json` and `tavern drafts --json`."""
        return {"id": self.id, "draft": True, "character_id": self.character_id, "character": self.character_name,
                "user_name": self.user_name, "greeting_index": self.greeting_index,
                "greetings": self.greeting_count, "greeting": self.greeting, "strategy": self.strategy,
                "strategy_version": self.strategy_version, "preset_id": self.preset_id,
                "preset": self.preset_name or None, "lore": [{"id": i, "name": n} for i, n in
                                                            zip(self.lore_ids, self.lore_names)],
                "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat()}


@dataclass(frozen=True, slots=True)
class SearchResultView:
    """A message search found (issue 20 item 4).

    Attributes:
        ref: the message (session, seq) to open: `tavern.chats.open_result` moves the
            playthrough's head onto its branch. For an edit, the message it replaced.
        snippet: the text around the first matched word (at most ~120 characters).
        on_head: the message is on the playthrough's active path now.
    """

    playthrough_id: int
    character_id: int
    character_name: str
    chat_title: str
    ref: tuple[int, int]
    role: str
    speaker: str
    snippet: str
    archived: bool
    on_head: bool
    shown_ref: tuple[int, int] | None = None
    """The event the chat shows for it: for an edit the `surface/replaced` node (its text is the
    edited one), else `ref`."""

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern search --json`."""
        return {"playthrough": self.playthrough_id, "character_id": self.character_id,
                "character": self.character_name, "title": self.chat_title, "ref": list(self.ref),
                "role": self.role, "speaker": self.speaker, "snippet": self.snippet, "archived": self.archived,
                "on_head": self.on_head}


def distinct_labels(items: Sequence[Any]) -> dict[int, str]:
    """How lists show resources that share a name (issue 20 item 7): `{id: label}` for items
    with `id`, `name` and `source_name` (characters, world books, presets). A name no other
    item has (case-insensitively) is its own label; a shared one gets its source file and id,
    "Eldoria (eldoria.json #3)", so two books named alike can be told apart everywhere."""
    counts: dict[str, int] = {}
    for item in items:
        counts[item.name.casefold()] = counts.get(item.name.casefold(), 0) + 1
    return {item.id: item.name if counts[item.name.casefold()] < 2 else
            f"{item.name} ({item.source_name + ' ' if item.source_name else ''}#{item.id})" for item in items}


@dataclass(frozen=True, slots=True)
class GroupMemberView:
    """A group member: the character, whether it is muted, its card's talkativeness (None: unset, 0.5)."""

    character_id: int
    name: str
    muted: bool
    talkativeness: float | None

    def to_json(self) -> dict[str, Any]:
        """JSON form for `--json` output."""
        return {"character_id": self.character_id, "name": self.name, "muted": self.muted,
                "talkativeness": self.talkativeness}


@dataclass(frozen=True, slots=True)
class GroupView:
    """A group chat's cast and settings.

    Attributes:
        strategy: "natural", "list", "manual" or "pooled". mode: "swap" or "join".
        playthroughs: the ids of the playthroughs that play it, oldest first.
    """

    id: int
    name: str
    members: tuple[GroupMemberView, ...]
    strategy: str
    mode: str
    allow_self_responses: bool
    playthroughs: tuple[int, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON form for `--json` output."""
        return {"id": self.id, "name": self.name, "members": [m.to_json() for m in self.members],
                "strategy": self.strategy, "mode": self.mode, "allow_self_responses": self.allow_self_responses,
                "playthroughs": list(self.playthroughs)}
