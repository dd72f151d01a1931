"""Provides the playthrough view types: a playthrough as lists show it (`PlaythroughView`), an
opening draft not yet begun (`OpeningView`), a message search's result (`SearchResultView`), and a
group chat's cast (`GroupView`, `GroupMemberView`).

Rules: the `to_json` forms are the `--json` output of `tavern sessions`, `tavern new`/`tavern drafts`,
`tavern search` and the group commands. Plain values: no database objects leave the service
(README "Development": the layers).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


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
    opening_draft: int | None = None
    """The opening draft whose first send prepared this playthrough and is not admitted yet (it is
    the draft's, not listed, until then); None for every playthrough in the lists."""

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
class OpeningView:
    """An opening draft (issue 20 item 1): a playthrough not yet begun, with no session.

    Attributes:
        greeting_index: the chosen greeting (0 = first_mes, then alternate_greetings);
            `greeting_count` how many the card has (0: none); `greeting` its text with
            `{{char}}`/`{{user}}` filled in.
        strategy, strategy_version: the snapshot the playthrough will pin.
        preset_id/preset_name: the chosen preset (None/"": the built-in default).
        lore_ids/lore_names: the world books bound as chat lore at the first send.
        line: the first line typed into the draft and not sent yet ("" for none).
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
    line: str = ""

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
        character_name: the chat's character, or a group chat's group name.
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
