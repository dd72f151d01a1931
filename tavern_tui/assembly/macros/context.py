"""Provides `MacroContext`, everything a `substitute()` call reads or writes, and `MacroBudget`, the macro
work the calls sharing one context (a step) may still do. Rule source as `engine`: SillyTavern 1.18
`MacroEnvBuilder` and the macro definitions name these fields."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tavern_tui.lore.eval_budget import EvalBudget

__all__ = ["STEP_CALLS", "STEP_EXPANSION", "STEP_REPARSE", "MacroBudget", "MacroContext"]


def _default_now() -> datetime:
    return datetime.now(UTC).astimezone()


STEP_CALLS = 800_000  # macro evaluations in all `substitute()` calls sharing one context, e.g. a step (ours)
STEP_EXPANSION = 16_000_000  # characters those calls may produce in all (ours)
STEP_REPARSE = 1_000_000  # characters they may re-parse in nested blocks in all (ours): ~1 s of parsing


@dataclass(slots=True)
class MacroBudget:
    """The macro work left to every `substitute()` call sharing one `MacroContext` (copies made with
    `dataclasses.replace` share it): a step expands dozens of fields, book keys and contents, each
    under the per-call limits, so a card repeating a costly field everywhere is bounded per step
    too. Counts: macro evaluations, characters produced, characters re-parsed; and the time of the
    build (`deadline`). Ours, not ST's."""

    calls: int = STEP_CALLS
    produced: int = STEP_EXPANSION
    reparsed: int = STEP_REPARSE
    deadline: EvalBudget | None = None
    """The build's whole evaluation budget (`lore.eval_budget`): once it is used up,
    evaluation stops as at a limit here (reason `EXHAUSTED`). None: only the counts."""


@dataclass
class MacroContext:
    """Everything `substitute()` reads or writes. Source: ST 1.18 `MacroEnvBuilder` + macro definitions.

    Names/card fields are plain strings. Chat state is pre-computed by the caller in ST's form:
    `last_message_id` = index of the last message, `last_swipe_id` = number of swipes of the last message,
    `current_swipe_id` = its 1-based swipe index, `chat_length` = number of messages (None ⇒ ""). `original`
    is the text `{{original}}` stands for; it is emitted at its first occurrence per `substitute()` call only,
    and with None `{{original}}` stays as written (ST's env has no `original` function then). `now` returns the
    current time (aware; default local time); `rng` is a `random.Random` or a `() -> float in [0, 1)`, used by
    `{{random}}` and `{{roll}}`. `chat_id` (ST's chat file name; `chat_id_hash`, ST's cached
    `chat_metadata.chat_id_hash`, wins when set) and `pick_reroll_seed` seed `{{pick}}`. `local_vars`
    (= chat_metadata.variables) and
    `global_vars` are mutated in place by the variable macros; every variable a macro reads is added to
    `reads` as ("local"|"global", name). `outlets` maps a world-info outlet name to its text. `runtime` holds the
    runtime/template macros by lower-case name (`model`, `maxprompt`, `maxcontext`, `maxresponse`,
    `systemprompt`, `lastgenerationtype`, instruct sequences such as `instructuserprefix`…; missing ⇒ "").
    `dynamic` are per-call macros (ST `dynamicMacros`: `authorsNote`, `summary`…) that take no arguments and win
    over registered ones. `authors_note` (chat_metadata `note_prompt`), `char_authors_note`,
    `default_authors_note` (authors-note.js macros) and `summary` (the Summarize extension's newest summary)
    fill their macros. `lazy` maps a field name (`last_swipe_id`, `current_swipe_id`) to a function that
    gives its value the first time a macro reads it while the field is None. After a call,
    `limits_hit` names the limits that stopped evaluation (empty if none).
    """

    char: str = ""
    user: str = ""
    group: str | None = None
    """`{{group}}`/`{{charIfNotGroup}}` in a group chat (members joined by ", "); None: `char`."""
    group_not_muted: str | None = None
    """`{{groupNotMuted}}` in a group chat; None: `char`."""
    not_char: str | None = None
    """`{{notChar}}` in a group chat (the other members, then the person); None: `user`."""
    persona: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    mes_examples: str = ""
    mes_examples_raw: str = ""
    char_prompt: str = ""
    char_instruction: str = ""
    char_depth_prompt: str = ""
    creator_notes: str = ""
    char_version: str = ""
    first_message: str = ""
    alternate_greetings: list[str] = field(default_factory=list)
    original: str | None = None
    input: str = ""
    last_message: str = ""
    last_user_message: str = ""
    last_char_message: str = ""
    last_message_id: int | None = None
    last_swipe_id: int | None = None
    current_swipe_id: int | None = None
    chat_length: int | None = None
    first_included_message_id: int | None = None
    last_user_message_at: datetime | None = None
    now: Callable[[], datetime] = _default_now
    rng: random.Random | Callable[[], float] = random.random
    chat_id: str = ""
    chat_id_hash: int | None = None
    pick_reroll_seed: object | None = None
    local_vars: dict[str, object] = field(default_factory=dict)
    global_vars: dict[str, object] = field(default_factory=dict)
    reads: set[tuple[str, str]] = field(default_factory=set)
    outlets: dict[str, str] = field(default_factory=dict)
    runtime: dict[str, str] = field(default_factory=dict)
    dynamic: dict[str, str] = field(default_factory=dict)
    authors_note: str = ""
    char_authors_note: str = ""
    default_authors_note: str = ""
    summary: str = ""
    lazy: dict[str, Callable[[], object]] = field(default_factory=dict)
    limits_hit: set[str] = field(default_factory=set)
    budget: MacroBudget = field(default_factory=MacroBudget, repr=False, compare=False)
    """The work left to this context and its copies (`MacroBudget`); past it, evaluation stops as
    at a per-call limit."""
    message_vars: dict[str, object] = field(default_factory=dict)
    """The bound message variables of this step (MVU's record at the head, `mvu.snapshot_variables`; issue 18):
    what `{{get_message_variable::…}}` and `getvar` paths read (`macros.mvu_macros`)."""
    character_vars: dict[str, object] = field(default_factory=dict)
    """Tavern Helper's character variables (the card's `extensions.tavern_helper.variables`), read-only here."""
    preset_vars: dict[str, object] = field(default_factory=dict)
    """Tavern Helper's preset variables (the preset's `extensions.tavern_helper.variables`), read-only here."""
    refuse_write: Callable[[str], bool] | None = None
    """When set, a variable write whose name or value it is true for is dropped (the configured API
    key: a variable is stored, printed and read by every card) and `limits_hit` names it."""
    templates: Callable[[str, MacroContext], str] | None = None
    """When set, run on every `substitute` result holding an EJS tag `<%` (restricted templates, issue 18:
    ST-Prompt-Template runs on the prompt after SillyTavern's macros); reads and writes the variables like a
    variable macro."""
