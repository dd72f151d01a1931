"""Provides the inputs of an activation: `ScanMessage`, `ActivationContext` and `SourcedBook`.

SillyTavern builds these in `Generate` (public/script.js: the chat without hidden messages,
`Name: mes` when names are included, reversed) and passes the character/persona fields as
`globalScanData` (`WIGlobalScanData` in world-info.js) with `trigger` = the generation type.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.lore.eval_budget import EvalBudget
from tavern_tui.lore.model import WorldBook
from tavern_tui.lore.timed import TimedState

#: Where a book comes from (SillyTavern `getSortedEntries`): chat lore first, then persona lore,
#: then global and character lore combined by `world_info_character_strategy`. A book bound to the
#: playthrough's preset ("preset", not a SillyTavern source) is scanned as global lore is.
SOURCES = ("chat", "persona", "global", "character", "preset")

#: Extra text sources an entry can opt into, in SillyTavern's buffer order (`WorldInfoBuffer.get`):
#: (context attribute, entry flag).
EXTRA_SOURCES = (
    ("persona_description", "match_persona_description"),
    ("character_description", "match_character_description"),
    ("character_personality", "match_character_personality"),
    ("character_depth_prompt", "match_character_depth_prompt"),
    ("scenario", "match_scenario"),
    ("creator_notes", "match_creator_notes"),
)


@dataclass(frozen=True)
class ScanMessage:
    """One visible chat message (hidden/system-hidden messages are left out by the caller).

    Attributes:
        name: the speaker's display name (the `Name: ` prefix).
        text: the message text as sent.
        ref: an opaque pointer reported back in decisions, e.g. (session id, seq).
    """

    name: str
    text: str
    ref: Any = None


@dataclass(frozen=True)
class SourcedBook:
    """A world book tagged with where it comes from: "chat", "persona", "global", "character" or
    "preset" (bound to the preset in use; activated as global lore).

    `activate` takes these (a bare `WorldBook` counts as "global"). A book name given under
    several sources is scanned once, under the first of global > chat > persona > character
    that holds it (SillyTavern skips a chat/persona/character book already selected globally,
    a persona book equal to the chat book, a character book equal to the chat or persona book).
    """

    book: WorldBook
    source: str = "global"

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"book source must be one of {SOURCES}, got {self.source!r}")


@dataclass(frozen=True)
class ActivationContext:
    """What one activation scans and filters on.

    Attributes:
        messages: the chat, oldest first, without the input.
        input: the text being sent this step, scanned as the newest message (named
            `user_name`), as in SillyTavern where it is already in the chat when the scan runs.
            None or "" = no new message (continue, regenerate, …).
        char_name, user_name: for `{{char}}` / `{{user}}` in keys and content.
        persona_description … creator_notes: extra sources, scanned only by entries that opt in
            (`match_*`); empty ones are skipped.
        injections: prompts flagged for world-info scanning (e.g. the Author's Note with
            "allow WI scan"); appended to every entry's buffer (SillyTavern `addInject`).
        character_file: the current character's file name without extension (character filter
            `names`).
        character_tags: the character's tag ids (character filter `tags`); None = unknown,
            the tag filter is then not applied (SillyTavern without a tag key).
        generation_type: "normal", "continue", "impersonate", "swipe", "regenerate", "quiet".
        chat_length: messages in the chat including the input, for delay and timed effects
            (SillyTavern `chat.length`). None = len(messages) + (1 if input else 0); pass it when
            `messages` is only the tail of the chat.
        timed_state: sticky/cooldown windows from the previous step of this branch.
        expand_key: the macro engine for keys that still hold a macro once `{{char}}`/`{{user}}` are
            filled (SillyTavern substitutes every key before matching; issue 17); it must not change
            variables. None = names only.
        deadline: the build's whole evaluation budget (`lore.eval_budget.EvalBudget`): key macros
            and regex searches stop when it is used up. None = only their own limits.
    """

    messages: Sequence[ScanMessage] = ()
    input: str | None = None
    char_name: str = ""
    user_name: str = ""
    persona_description: str = ""
    character_description: str = ""
    character_personality: str = ""
    character_depth_prompt: str = ""
    scenario: str = ""
    creator_notes: str = ""
    injections: Sequence[str] = ()
    character_file: str = ""
    character_tags: Sequence[str] | None = None
    generation_type: str = "normal"
    chat_length: int | None = None
    timed_state: TimedState = field(default_factory=TimedState)
    expand_key: Callable[[str], str] | None = field(default=None, compare=False)
    deadline: EvalBudget | None = field(default=None, compare=False)

    @property
    def effective_chat_length(self) -> int:
        """`chat_length`, or the number of messages plus the input."""
        if self.chat_length is not None:
            return self.chat_length
        return len(self.messages) + (1 if self.input else 0)
