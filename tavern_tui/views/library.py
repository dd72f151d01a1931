"""Provides the library's view types: what an import did (`ImportResult`), characters and their
cards (`CharacterView`, `CardView`, the card field lists), world books (`WorldBookView`), presets
(`PresetView`), and `distinct_labels`, how lists tell apart resources that share a name.

Rules: the card fields follow the V2 card spec ([CCv2] spec_v2.md); the `to_json` forms are the
`--json` output of the library commands (`tavern import`, `tavern card`, the lists). Plain values:
no database objects leave the service (README "Development": the layers).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
