"""Provides the types every step of the SillyTavern prompt build reads: what goes in
(`PromptInputs`, `HistoryMessage`, the chat's `AuthorsNote` and card-field overrides) and the
request's parts (`PromptPart`, `ROLES`).

Rule sources: SillyTavern 1.18 `openai.js` (the prompt collection), `authors-note.js`
(`chat_metadata` note settings) and `getCharacterCardFieldsLazy` (chat overrides of card fields);
format-digest §c.4. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tavern_tui.assembly.macros import MacroContext
from tavern_tui.formats.presets import ParsedPreset
from tavern_tui.lore.result import Buckets
from tavern_tui.text.tokens import DEFAULT_COUNTER

__all__ = [
    "CHAT_OVERRIDE_KEYS", "NOTE_BEFORE_PROMPT", "NOTE_IN_CHAT", "NOTE_IN_PROMPT", "ROLES", "AuthorsNote",
    "HistoryMessage", "PromptInputs", "PromptPart", "chat_overrides_from_metadata",
]

ROLES = ("system", "user", "assistant")
CHAT_OVERRIDE_KEYS = ("scenario", "mes_example", "system_prompt")
"""`chat_metadata` keys that override the card's field of the same name for one chat."""
# extension_prompt_types (script.js): NONE -1, IN_PROMPT 0 (end of main), IN_CHAT 1, BEFORE_PROMPT 2.
NOTE_IN_PROMPT, NOTE_IN_CHAT, NOTE_BEFORE_PROMPT = 0, 1, 2


@dataclass(frozen=True)
class PromptPart:
    """One message of the request and where it came from.

    Attributes:
        role: "system", "user" or "assistant".
        content: the text sent.
        source: "preset" | "marker" | "persona" | "policy" | "new_chat" | "group_nudge" | "examples" | "history" |
            "input" | "injection" | "world_info" | "authors_note" | "continue" | "impersonate" |
            "send_if_empty" | "prefill". In-chat messages are "injection" (or "world_info" when
            they hold world info @depth only); the Author's Note is "injection" when in the chat
            and "authors_note" when it is its own message before/after `main`.
        identifier: the preset prompt identifier or marker name ("main", "charDescription",
            "dialogueExamples", …); "worldInfoDepth" for world info @depth, "charDepthPrompt" for
            the card's depth prompt, "authorsNote" for the Author's Note; an injection merging
            several sources joins them with "+" (preset prompts first, then the extension
            prompts in ST's key order: authorsNote, charDepthPrompt, worldInfoDepth).
        ref: the event of a history/input part.
        name: the OpenAI `name` field (examples; names_behavior COMPLETION), None when unset.
        spans: its parts (`assembly.attribution`), offsets into `content`; () = not yet
            attributed. Metadata only: not compared, never sent.
    """

    role: str
    content: str
    source: str
    identifier: str = ""
    ref: tuple[int, int] | None = None
    name: str | None = None
    spans: tuple[dict[str, Any], ...] = field(default=(), compare=False)


@dataclass(frozen=True)
class HistoryMessage:
    """One chat message as the prompt builder reads it.

    Attributes:
        role: "user", "assistant" or "system".
        content: the text.
        ref: (session, seq) of the event holding it.
        name: the speaker's display name (used by names_behavior).
        is_input: the message being sent this step (the claimed input).
        pinned: a summary node: never dropped to fit (issue 16).
    """

    role: str
    content: str
    ref: tuple[int, int] | None = None
    name: str = ""
    is_input: bool = False
    pinned: bool = False


def chat_overrides_from_metadata(meta: dict[str, Any] | None) -> dict[str, str]:
    """The chat's overrides of card fields (`chat_metadata.scenario`, `.mes_example`,
    `.system_prompt`): every key of `CHAT_OVERRIDE_KEYS` holding a non-empty string.

    SillyTavern uses `chat_metadata.X || card.X` (`getCharacterCardFieldsLazy`), so an empty
    string does not override; a whitespace-only one does (and then trims to nothing).
    """
    meta = meta if isinstance(meta, dict) else {}
    return {key: meta[key] for key in CHAT_OVERRIDE_KEYS if isinstance(meta.get(key), str) and meta[key]}


@dataclass
class PromptInputs:
    """Everything `build_prompt` reads.

    Attributes:
        preset: the parsed chat-completion preset.
        card: normalised card `data` (description, personality, scenario, mes_example,
            system_prompt, post_history_instructions, first_mes, creator_notes,
            character_version, extensions.depth_prompt {prompt, depth, role}).
        char, user: the names for macros and example parsing.
        persona: the persona description ("" = none).
        lore: activated world info.
        history: the chat, oldest first, the input(s) (`is_input`) last.
        generation: normal | regenerate | swipe | continue | impersonate | quiet.
        continue_text: for continue, the reply being extended (not in `history`).
        macros: base macro context (time, rng, variables, chat id …); names, card fields,
            persona, examples, `original` and the chat-state fields are filled in here.
        count: the token counter for budgeting (text → tokens); the default is the shared,
            cached estimate `tokens.DEFAULT_COUNTER`; pass `tokens.make_counter(path)` for a
            tokenizer file.
        authors_note: the chat's Author's Note (`AuthorsNote.from_chat_metadata`); None = no
            note at all (AN-top / AN-bottom world info is then left out, with an adjustment).
        chat_overrides: the chat's overrides of card fields (`chat_overrides_from_metadata`):
            a non-empty "scenario" / "mes_example" / "system_prompt" replaces the card's
            field everywhere (marker, examples, macros, main override).
        user_message_count: user messages in the whole chat as SillyTavern counts them for the
            note's interval (hidden ones too, the input included); None = the user messages of
            `history`.
        strict_budget: mandatory prompts over the budget raise `PromptTooLarge` (SillyTavern);
            False (native strategies, which send the history whole) names it as an adjustment.
        context_limit: the request's token limit (`assembly.fit.ContextLimit.limit`), which
            replaces openai_max_context − openai_max_tokens as the budget; None = the preset's.
        history_offset: oldest chat messages left out before the build because they cannot fit
            whatever happens (`assembly.preset.cut_unfittable`); counted as dropped, and
            `{{lastMessageId}}` still counts them.
        policy: the roleplay policy ("" = none, or out-of-character talk is on): its own system
            part, identifier `RP_POLICY`, just before the chat history (`assembly.policy`).
        group: a group chat (SillyTavern `selected_group`): the chat opens with
            `new_group_chat_prompt`, ends with `group_nudge_prompt` (not for an impersonation),
            and names_behavior DEFAULT prefixes every message not the person's with its name.
    """

    preset: ParsedPreset
    card: dict[str, Any]
    char: str
    user: str
    persona: str = ""
    lore: Buckets = field(default_factory=Buckets)
    history: list[HistoryMessage] = field(default_factory=list)
    generation: str = "normal"
    continue_text: str = ""
    macros: MacroContext | None = None
    count: Callable[[str], int] = DEFAULT_COUNTER
    authors_note: AuthorsNote | None = None
    chat_overrides: dict[str, str] = field(default_factory=dict)
    user_message_count: int | None = None
    strict_budget: bool = True
    context_limit: int | None = None
    history_offset: int = 0
    policy: str = ""
    group: bool = False



@dataclass(frozen=True)
class AuthorsNote:
    """The chat's Author's Note (SillyTavern `authors-note.js`, stored in `chat_metadata`).

    Attributes:
        prompt: the note text (`note_prompt`); macros are expanded when it is sent. May be
            empty: world info with the AN-top / AN-bottom positions is still sent in its place.
        interval: insert the note every `interval` user messages (`note_interval`; 1 = always).
        depth: for IN_CHAT, the in-chat depth (`note_depth`; 0 = after the last message).
        position: `note_position`, SillyTavern `extension_prompt_types`: 0 IN_PROMPT = its own
            message right after `main`, 1 IN_CHAT = injected at `depth`, 2 BEFORE_PROMPT = its own
            message right before `main`.
        role: `note_role`, `extension_prompt_roles`: 0 system, 1 user, 2 assistant.
    """

    prompt: str
    interval: int = 1
    depth: int = 4
    position: int = NOTE_IN_CHAT
    role: int = 0

    @classmethod
    def from_chat_metadata(cls, meta: dict[str, Any] | None) -> AuthorsNote | None:
        """The note of a chat from its `chat_metadata` (`note_prompt`, `note_interval`,
        `note_depth`, `note_position`, `note_role`).

        Missing (or null) keys take SillyTavern's defaults (`loadSettings`: "" / 1 / 4 / 1 IN_CHAT /
        0 system; the user's default note is a client setting we do not have). Numbers may be
        ints, integral floats or numeric strings; anything else takes the default. A negative
        depth counts as its absolute value (ST's input handler); an unknown role is system.

        Returns:
            None when the note is disabled: interval ≤ 0 (ST `setFloatingPrompt` sets the
            extension prompt to NONE) or a position other than 0/1/2 (−1 NONE; ST never sends
            it). Otherwise a note — also when its text is empty, as SillyTavern still sends the
            AN-top / AN-bottom world info then.
        """
        meta = meta if isinstance(meta, dict) else {}
        prompt = meta.get("note_prompt")
        interval = _meta_int(meta.get("note_interval"), 1)
        depth = abs(_meta_int(meta.get("note_depth"), 4))
        position = _meta_int(meta.get("note_position"), NOTE_IN_CHAT)
        role = _meta_int(meta.get("note_role"), 0)
        if interval <= 0 or position not in (NOTE_IN_PROMPT, NOTE_IN_CHAT, NOTE_BEFORE_PROMPT):
            return None
        return cls(prompt=prompt if isinstance(prompt, str) else "", interval=interval, depth=depth,
                   position=position, role=role if role in (0, 1, 2) else 0)

    def messages_until(self, user_messages: int) -> int:
        """SillyTavern's countdown for the note (`messagesTillInsertion`, shown in the AN panel);
        0 = it is inserted now, −1 = off. For n > interval ST shows n mod interval, which is not
        the number of messages left (n = 4, interval 3 shows 1; the next insertion is at 6).

        `user_messages` counts the chat's messages sent by the user (`is_user`, hidden ones too,
        the message being sent included) — ST `setFloatingPrompt`: `chat.filter(m => m.is_user)`,
        run in `Generate` after the input was added. Interval 1 always inserts; with no user
        message yet (and interval > 1) or interval ≤ 0 the note is off. Otherwise ST's formula:
        n ≥ interval ⇒ n mod interval, else interval − n.
        """
        n = 1 if self.interval == 1 else user_messages
        if n <= 0 or self.interval <= 0:
            return -1
        return n % self.interval if n >= self.interval else self.interval - n

    def inserted(self, user_messages: int) -> bool:
        """True when SillyTavern inserts the note with `user_messages` user messages in the chat
        (`messages_until(...) == 0`; e.g. interval 3 inserts at 3, 6, 9 …)."""
        return self.messages_until(user_messages) == 0


def _meta_int(value: Any, default: int) -> int:
    """A chat_metadata number: int, integral float or numeric string; else `default`."""
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else default
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return default
        return int(number) if number.is_integer() else default
    return default
