"""Provides the plain view types the service returns (no database objects leave the service)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The outcome of importing one file.

    Attributes:
        path: the file as given.
        kind: "character" (world books and presets come later).
        id: the stored id, None when the import failed.
        error: why it failed (names the file, field and reason), None on success.
        duplicate: the same bytes were imported before; `id` is the earlier one and nothing new was stored.
    """

    path: str
    kind: str
    id: int | None = None
    name: str | None = None
    error: str | None = None
    warnings: tuple[str, ...] = ()
    duplicate: bool = False

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

    def to_json(self) -> dict[str, Any]:
        """JSON form for `--json` output."""
        return {"id": self.id, "name": self.name, "spec": self.spec, "creator": self.creator, "tags": list(self.tags),
                "greetings": self.greetings, "book_entries": self.book_entries, "source_name": self.source_name,
                "created_at": self.created_at.isoformat()}


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

    @property
    def title(self) -> str:
        """"<character> #<id>", the label lists use."""
        return f"{self.character_name} #{self.id}"

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern sessions --json`."""
        return {"id": self.id, "character_id": self.character_id, "character": self.character_name,
                "user_name": self.user_name, "session_id": self.session_id, "messages": self.message_count,
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

    def to_json(self) -> dict[str, Any]:
        """JSON form for `tavern show --json`."""
        return {"session_id": self.ref[0], "seq": self.ref[1], "role": self.role, "origin": self.origin,
                "kind": self.kind, "source": self.source, "speaker": self.speaker, "content": self.content,
                "reasoning": self.reasoning, "partial": self.partial, "error": self.error,
                "error_category": self.error_category,
                "created_at": self.created_at.isoformat()}


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
