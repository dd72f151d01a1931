"""Provides the world-info entry and book model every importer produces and the activation reads.

Field names and defaults follow SillyTavern 1.18 `newWorldInfoEntryDefinition`
(public/scripts/world-info.js; format-digest §b.2), in snake_case. Unknown fields from the
file are kept in `extra` so a round trip loses nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any


class Position(IntEnum):
    """Where an activated entry's content goes (SillyTavern `world_info_position`, digest §b.3)."""

    BEFORE_CHAR = 0
    AFTER_CHAR = 1
    AN_TOP = 2
    AN_BOTTOM = 3
    AT_DEPTH = 4
    EM_TOP = 5
    EM_BOTTOM = 6
    OUTLET = 7


class SelectiveLogic(IntEnum):
    """How secondary keys combine (SillyTavern `world_info_logic`): AND_ANY=0, NOT_ALL=1, NOT_ANY=2, AND_ALL=3."""

    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


class Role(IntEnum):
    """Message role of an @depth entry (SillyTavern `extension_prompt_roles`); null in old files = system."""

    SYSTEM = 0
    USER = 1
    ASSISTANT = 2


GENERATION_TRIGGERS = ("normal", "continue", "impersonate", "swipe", "regenerate", "quiet")
"""Generation types an entry's `triggers` may name (SillyTavern constants.js); empty = all."""

DEFAULT_DEPTH = 4
DEFAULT_WEIGHT = 100


@dataclass
class CharacterFilter:
    """Limit an entry to (or, with `is_exclude`, away from) characters by file name or tag id."""

    is_exclude: bool = False
    names: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)


@dataclass
class WorldInfoEntry:
    """One world-info entry with SillyTavern 1.18 defaults (digest §b.2).

    Tri-state fields (`scan_depth`, `case_sensitive`, `match_whole_words`, `use_group_scoring`)
    are None when the global setting applies. Timed effects (`sticky`, `cooldown`, `delay`) are
    counted in messages; None or 0 is off. `delay_until_recursion` is 0 (off) or the recursion
    level at which the entry becomes eligible (True in files means 1).
    """

    uid: int | str
    key: list[str] = field(default_factory=list)
    keysecondary: list[str] = field(default_factory=list)
    comment: str = ""
    content: str = ""
    constant: bool = False
    vectorized: bool = False
    selective: bool = True
    selective_logic: SelectiveLogic = SelectiveLogic.AND_ANY
    add_memo: bool = False
    order: int = 100
    position: Position = Position.BEFORE_CHAR
    disable: bool = False
    ignore_budget: bool = False
    exclude_recursion: bool = False
    prevent_recursion: bool = False
    delay_until_recursion: int = 0
    match_persona_description: bool = False
    match_character_description: bool = False
    match_character_personality: bool = False
    match_character_depth_prompt: bool = False
    match_scenario: bool = False
    match_creator_notes: bool = False
    probability: float = 100
    use_probability: bool = True
    depth: int = DEFAULT_DEPTH
    outlet_name: str = ""
    group: str = ""
    group_override: bool = False
    group_weight: float = DEFAULT_WEIGHT
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    use_group_scoring: bool | None = None
    automation_id: str = ""
    role: Role = Role.SYSTEM
    sticky: int | None = None
    cooldown: int | None = None
    delay: int | None = None
    character_filter: CharacterFilter | None = None
    triggers: list[str] = field(default_factory=list)
    display_index: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields the file had that this model does not name (kept for export)."""

    @property
    def groups(self) -> list[str]:
        """The inclusion groups (`group` is a comma-separated list), trimmed, empty ones dropped."""
        return [g.strip() for g in self.group.split(",") if g.strip()]


@dataclass
class WorldBook:
    """A world book: entries plus book-level fields.

    Attributes:
        name: the book's name (SillyTavern keys books by file name; importers use the file stem
            when the file has no name).
        entries: in file order.
        scan_depth, token_budget, recursive_scanning: book-level V2 fields; None = absent
            (an absent scan depth means "use the global", never 0).
        source_format: "st" (SillyTavern World Info), "st+v2" (Chub hybrid), "agnai", "novelai",
            "risu", "card" (a card's `character_book`), "lorebook_v3".
        extra: book-level fields not named here (kept for export).
    """

    name: str
    entries: list[WorldInfoEntry] = field(default_factory=list)
    description: str = ""
    scan_depth: int | None = None
    token_budget: int | None = None
    recursive_scanning: bool | None = None
    source_format: str = "st"
    extra: dict[str, Any] = field(default_factory=dict)
