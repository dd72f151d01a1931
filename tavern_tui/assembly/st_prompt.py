"""Builds the chat-completion request SillyTavern would send for a preset (issue 5 §3).

Rules: format-digest §c.4 (SillyTavern 1.18 `openai.js` `prepareOpenAIMessages` →
`preparePromptsForChatCompletion` → `populateChatCompletion`, `populationInjectionPrompts`,
`populateChatHistory`, `populateDialogueExamples`, `parseExampleIntoIndividual`,
`ChatCompletion.squashSystemMessages`; `PromptManager.js` `preparePrompt`), in ST's order:

1. The collection is `preset.enabled_prompts(generation)` (order group 100001 → 100000 →
   default; a disabled `main` is kept, empty). Markers are filled by identifier: world info
   before/after (`wi_format`, "{0}" = the text, blank format = raw, no lore = no part),
   description, personality (`personality_format`, only when the card has one), scenario
   (`scenario_format`), persona (empty = no part). `chatHistory` and `dialogueExamples` mark
   where the chat and the examples go; without them those are not sent (as in ST). Other
   markers, engine-only prompts (impersonate, quietPrompt, groupNudge, bias, …) and built-in
   (`system_prompt`) prompts other than main/nsfw/jailbreak/enhanceDefinitions are not placed by
   ST; they are skipped with an adjustment. Every prompt goes through the macro engine.
2. Card `system_prompt` replaces an enabled `main` unless it `forbid_overrides`, with
   `{{original}}` = the preset's main (macros expanded); `post_history_instructions` likewise
   replaces `jailbreak`. The chat's `chat_metadata` scenario / mes_example / system_prompt,
   when non-empty, replace the card's fields first (ST `getCharacterCardFieldsLazy`:
   `chat_metadata.X || card.X`), for the markers, the examples, the macros and the main override.
3. Relative prompts (injection_position 0) are placed in order; absolute ones (1) go into the
   chat at `injection_depth`. Empty content (after macros; whitespace counts as empty, our
   choice) is skipped.
4. Budget = openai_max_context − openai_max_tokens. Mandatory = every placed prompt, the reply
   priming ST reserves (`REPLY_PRIMING`), the new-chat line, the input, the continue and control
   prompts; over budget → `PromptTooLarge`. The chat (with its injections) is then filled
   newest→oldest while it fits, stopping at the first message that does not (the input is kept
   whatever happens); the new-chat line goes on top.
5. In-chat injections per depth: orders {100} ∪ the prompts' orders; chronologically lower order
   first and, inside one order, assistant → user → system (ST inserts system, user, assistant
   newest-first, then reverses). Same role + same order = one message, joined with "\\n". The
   card's depth prompt (`extensions.depth_prompt`) and world info @depth groups join the
   order-100 group of their role, in ST's extension-key order (depth prompt, then world info).
   Depth d is counted in the chat *with* the message being continued (non-prefill continue), as
   ST injects before it moves that message to the end.
   Author's Note (`authors-note.js` `setFloatingPrompt`, world-info.js `checkWorldInfo`): sent
   when its interval says so (`AuthorsNote.messages_until`), as AN-top world info + the note +
   AN-bottom world info; IN_CHAT it is the extension prompt "2_floating_prompt", first in the key
   order; BEFORE/IN_PROMPT it is its own message right before/after `main` (mandatory, like main).
6. Example dialogue: blocks = WI top + card blocks + WI bottom; each becomes the
   `new_example_chat_prompt` line plus its messages (system role, name example_user /
   example_assistant). Whole blocks, in order, while they fit; after the chat unless the preset
   sets `pin_examples`.
7. Continue: without `continue_prefill` the continued reply and the nudge go last (ST adds them
   at the very end, after post-history instructions); with it the reply + `continue_postfix`
   (not when it already ends with a space, as ST) is the final assistant message. Impersonate:
   the impersonation prompt is the final system message. `send_if_empty` fills in a user turn
   when the chat (after injections) ends with the assistant and there is no input.
   `assistant_prefill` (`assistant_impersonation` for impersonate) is a final assistant message
   — ST's client sends it only to Claude; we send it for every source when it is set, merged in
   front of a continue prefill ("\\n\\n") instead of a second assistant message.
8. `squash_system_messages`: consecutive system parts without a name are merged with "\\n",
   except the new-chat and example-header lines.
9. `names_behavior`: CONTENT prefixes "Name: " to user/assistant chat messages (not twice);
   COMPLETION sets the OpenAI `name` (sanitised like ST `sanitizeName`); NONE and DEFAULT (solo)
   change nothing. Continue/prefill parts are left as they are.

Chat messages also go through the macro engine (ST `preparePrompt` runs on every history
message). Token cost of a part = count(content) + count(name) + `MESSAGE_OVERHEAD`. Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_tui.assembly.basic import split_examples
from tavern_tui.assembly.macros import MacroContext, substitute, substitute_names
from tavern_tui.assembly.tokens import DEFAULT_COUNTER
from tavern_tui.errors import TavernError
from tavern_tui.formats.presets import ABSOLUTE, ParsedPreset, PresetPrompt
from tavern_tui.lore.result import Buckets

__all__ = [
    "CHAT_OVERRIDE_KEYS", "MESSAGE_OVERHEAD", "REPLY_PRIMING", "AuthorsNote", "BuiltPrompt", "HistoryMessage",
    "PromptInputs", "PromptPart", "PromptTooLarge", "build_prompt", "chat_overrides_from_metadata",
    "parse_example_block", "sanitize_name", "to_messages",
]

MESSAGE_OVERHEAD = 3  # framing tokens of one chat message (OpenAI's ~3 per message)
REPLY_PRIMING = 3  # ST reserves 3 tokens: "every reply is primed with <|start|>assistant<|message|>"

ROLES = ("system", "user", "assistant")
_FILLED_MARKERS = ("worldInfoBefore", "worldInfoAfter", "charDescription", "charPersonality", "scenario",
                   "personaDescription")
_INSTRUCTION_IDS = frozenset({"main", "charDescription", "charPersonality", "scenario"})
"""The character/system instructions the persona follows when a preset has no persona marker."""
_BUILTIN_SENT = frozenset({"main", "nsfw", "jailbreak", "enhanceDefinitions"})
# Identifiers ST uses for its own purposes; never placed from the order (control/extension prompts).
_ENGINE_PROMPTS = frozenset({"impersonate", "quietPrompt", "groupNudge", "bias", "summary", "authorsNote",
                             "vectorsMemory", "vectorsDataBank", "smartContext"})
_NAMES_NONE, _NAMES_DEFAULT, _NAMES_COMPLETION, _NAMES_CONTENT = -1, 0, 1, 2
_VALID_NAME = re.compile(r"[a-zA-Z0-9_]{1,64}")
_LAST_CHAT_MESSAGE = re.compile(r"\{\{\s*lastChatMessage\s*\}\}", re.IGNORECASE)
_DEPTH_PROMPT_ID = "charDepthPrompt"
_WI_DEPTH_ID = "worldInfoDepth"
_NOTE_ID = "authorsNote"
# SillyTavern's extension-prompt keys: prompts of one depth + role are joined in the JS default
# sort of these keys (`getExtensionPrompt`): "2_floating_prompt" < "DEPTH_PROMPT" < "customDepthWI-…".
_NOTE_KEY = "2_floating_prompt"  # authors-note.js MODULE_NAME ("deliberate, for sorting lower than memory")
_DEPTH_PROMPT_KEY = "DEPTH_PROMPT"  # script.js inject_ids.DEPTH_PROMPT
_WI_DEPTH_KEY = "customDepthWI-{depth}-{role}"  # script.js inject_ids.CUSTOM_WI_DEPTH_ROLE
# extension_prompt_types (script.js): NONE -1, IN_PROMPT 0 (end of main), IN_CHAT 1, BEFORE_PROMPT 2.
NOTE_IN_PROMPT, NOTE_IN_CHAT, NOTE_BEFORE_PROMPT = 0, 1, 2
CHAT_OVERRIDE_KEYS = ("scenario", "mes_example", "system_prompt")
"""`chat_metadata` keys that override the card's field of the same name for one chat."""


# --- public data -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HistoryMessage:
    """One chat message as the prompt builder reads it.

    Attributes:
        role: "user", "assistant" or "system".
        content: the text.
        ref: (session, seq) of the event holding it.
        name: the speaker's display name (used by names_behavior).
        is_input: the message being sent this step (the claimed input).
    """

    role: str
    content: str
    ref: tuple[int, int] | None = None
    name: str = ""
    is_input: bool = False


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


def chat_overrides_from_metadata(meta: dict[str, Any] | None) -> dict[str, str]:
    """The chat's overrides of card fields (`chat_metadata.scenario`, `.mes_example`,
    `.system_prompt`): every key of `CHAT_OVERRIDE_KEYS` holding a non-empty string.

    SillyTavern uses `chat_metadata.X || card.X` (`getCharacterCardFieldsLazy`), so an empty
    string does not override; a whitespace-only one does (and then trims to nothing).
    """
    meta = meta if isinstance(meta, dict) else {}
    return {key: meta[key] for key in CHAT_OVERRIDE_KEYS if isinstance(meta.get(key), str) and meta[key]}


@dataclass(frozen=True)
class PromptPart:
    """One message of the request and where it came from.

    Attributes:
        role: "system", "user" or "assistant".
        content: the text sent.
        source: "preset" | "marker" | "persona" | "new_chat" | "examples" | "history" | "input" |
            "injection" | "world_info" | "authors_note" | "continue" | "impersonate" |
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
    """

    role: str
    content: str
    source: str
    identifier: str = ""
    ref: tuple[int, int] | None = None
    name: str | None = None


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


@dataclass
class BuiltPrompt:
    """The request and how it was built.

    Attributes:
        parts: the request messages, in order.
        adjustments: plain sentences saying what was dropped, moved or replaced, and why.
        tokens: estimated tokens per part source (content + name + `MESSAGE_OVERHEAD` each),
            counted before squashing; the reply priming (`REPLY_PRIMING`) is not in it.
        budget: openai_max_context − openai_max_tokens.
        history_dropped: chat messages left out by the budget.
        token_counter: the counter's `name` ("estimate", "tokenizers:<path>"; "custom" for a
            plain function).
    """

    parts: list[PromptPart]
    adjustments: list[str]
    tokens: dict[str, int]
    budget: int
    history_dropped: int
    token_counter: str = "estimate"


class PromptTooLarge(TavernError):
    """The mandatory prompts alone do not fit the budget (ST: "Mandatory prompts exceed the
    context size").

    Attributes:
        needed: tokens the mandatory prompts take (with the reply priming).
        budget: openai_max_context − openai_max_tokens.
        max_context, max_tokens: the preset's figures.
    """

    def __init__(self, needed: int, budget: int, max_context: int, max_tokens: int) -> None:
        self.needed = needed
        self.budget = budget
        self.max_context = max_context
        self.max_tokens = max_tokens
        super().__init__(
            f"Mandatory prompts exceed the context size: they need {needed} tokens, the budget is {budget} "
            f"(max context {max_context} − reply {max_tokens}). Raise the context size, lower the reply "
            "length or disable prompts.")


def to_messages(parts: list[PromptPart]) -> list[dict[str, Any]]:
    """The OpenAI `messages` array: one `{"role", "content"}` per part (+ "name" when set)."""
    out: list[dict[str, Any]] = []
    for part in parts:
        message: dict[str, Any] = {"role": part.role, "content": part.content}
        if part.name:
            message["name"] = part.name
        out.append(message)
    return out


def sanitize_name(name: str) -> str:
    """An OpenAI `name`: kept when it matches `[a-zA-Z0-9_]{1,64}`; otherwise accents are
    stripped, every other character becomes "_" and it is cut to 64 (ST `sanitizeName`)."""
    if _VALID_NAME.fullmatch(name):
        return name
    plain = "".join(c for c in unicodedata.normalize("NFD", name) if not 0x300 <= ord(c) <= 0x36F)
    return re.sub(r"[^a-zA-Z0-9_]", "_", plain)[:64]


def parse_example_block(block: str, user: str, char: str) -> list[tuple[str, str]]:
    """Split one example block (names already substituted, no `<START>` line) into
    (`example_user` | `example_assistant`, text) messages, as ST `parseExampleIntoIndividual`:
    a line starting with "User:" opens a user turn, "Char:" a character turn; other lines
    continue the current turn (lines before the first speaker belong to the first turn); a turn
    switch to the same speaker does not split; the first "Name:" is removed and the text trimmed.
    Empty messages are dropped.
    """
    result: list[tuple[str, str]] = []
    lines: list[str] = []
    in_user = in_bot = False

    def add(name: str, system_name: str) -> None:
        text = "\n".join(lines).replace(name + ":", "", 1).strip()
        if text:
            result.append((system_name, text))
        lines.clear()

    for line in block.replace("\r", "").split("\n"):
        if line.startswith(user + ":"):
            if in_bot:
                add(char, "example_assistant")
            in_user, in_bot = True, False
        elif line.startswith(char + ":"):
            if in_user:
                add(user, "example_user")
            in_user, in_bot = False, True
        lines.append(line)
    if in_user:
        add(user, "example_user")
    elif in_bot:
        add(char, "example_assistant")
    return result


# --- building --------------------------------------------------------------------------------


@dataclass
class _Item:
    """A chat-area message during budgeting: kind "history" | "input" | "injection" | "anchor"."""

    part: PromptPart
    kind: str


@dataclass
class _Absolute:
    identifier: str
    role: str
    content: str
    depth: int
    order: int


def build_prompt(inputs: PromptInputs) -> BuiltPrompt:
    """Build the request SillyTavern would send for `inputs` (rules: module docstring).

    Raises:
        PromptTooLarge: the mandatory prompts need more tokens than the budget.
    """
    return _Builder(inputs).build()


class _Builder:
    def __init__(self, inputs: PromptInputs) -> None:
        self.inputs = inputs
        self.preset = inputs.preset
        self.generation = (inputs.generation or "normal").strip().lower()
        self.adjustments: list[str] = []
        self.count = inputs.count
        self.budget = self.preset.max_context - self.preset.max_tokens
        self.note_in_chat: tuple[AuthorsNote, str] | None = None  # the IN_CHAT Author's Note and its text
        self.ctx = MacroContext()
        self.ctx = self._context()

    # -- helpers ------------------------------------------------------------------------------

    def cost(self, part: PromptPart) -> int:
        return self.count(part.content) + (self.count(part.name) if part.name else 0) + MESSAGE_OVERHEAD

    def sub(self, text: str, original: str | None = None) -> str:
        if not text:
            return ""
        ctx = self.ctx if original is None else replace(self.ctx, original=original)
        return substitute(text, ctx)

    def _overridden(self, key: str) -> bool:
        """The chat overrides the card's `key` (ST: `chat_metadata[key] || card[key]`)."""
        value = self.inputs.chat_overrides.get(key) if key in CHAT_OVERRIDE_KEYS else None
        return isinstance(value, str) and bool(value)

    def _card_text(self, key: str) -> str:
        """The card's field `key`, or the chat's override of it."""
        value = self.inputs.chat_overrides[key] if self._overridden(key) else self.inputs.card.get(key)
        return value if isinstance(value, str) else ""

    def _depth_prompt(self) -> tuple[str, int, str]:
        ext = self.inputs.card.get("extensions")
        dp = ext.get("depth_prompt") if isinstance(ext, dict) else None
        if not isinstance(dp, dict):
            return "", 4, "system"
        text = dp.get("prompt") if isinstance(dp.get("prompt"), str) else ""
        depth = dp.get("depth", 4)
        if isinstance(depth, str) and depth.strip().isdigit():
            depth = int(depth.strip())
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 0:
            depth = 4
        role = dp.get("role")
        role = role.strip().lower() if isinstance(role, str) and role.strip().lower() in ROLES else "system"
        return text, depth, role

    def _context(self) -> MacroContext:
        """The macro context: base + names, card fields (macros expanded once, in ST's field
        order), persona, examples and chat state."""
        inputs = self.inputs
        base = inputs.macros or MacroContext()
        history = inputs.history
        depth_text, _, _ = self._depth_prompt()
        last_user = next((m.content for m in reversed(history) if m.role == "user"), "")
        last_char = next((m.content for m in reversed(history) if m.role == "assistant"), "")
        ctx = replace(
            base, char=inputs.char, user=inputs.user, persona=inputs.persona,
            description=self._card_text("description"), personality=self._card_text("personality"),
            scenario=self._card_text("scenario"), mes_examples=self._card_text("mes_example"),
            mes_examples_raw=self._card_text("mes_example"), char_prompt=self._card_text("system_prompt"),
            char_instruction=self._card_text("post_history_instructions"), char_depth_prompt=depth_text,
            creator_notes=self._card_text("creator_notes"), char_version=self._card_text("character_version"),
            first_message=self._card_text("first_mes"), original=None,
            input="\n".join(m.content for m in history if m.is_input),
            last_message=history[-1].content if history else "", last_user_message=last_user,
            last_char_message=last_char, last_message_id=len(history) - 1 if history else None,
            outlets=dict(inputs.lore.outlets) or base.outlets,
        )
        self.ctx = ctx  # `sub` reads it: the card fields are expanded against the raw ones
        fields = {name: self.sub(getattr(ctx, name))
                  for name in ("description", "personality", "scenario", "persona", "char_depth_prompt",
                               "first_message")}
        examples_raw = self.sub(self._card_text("mes_example"))
        blocks = split_examples(examples_raw)
        formatted = "".join(f"<START>\n{block}\n" for block in blocks)
        return replace(ctx, **fields, mes_examples=formatted, mes_examples_raw=examples_raw)

    def _active(self, identifier: str) -> PresetPrompt | None:
        """The prompt if the active order enables it for this generation type."""
        prompt = self.preset.prompts.get(identifier)
        if prompt is None:
            return None
        enabled = any(item.identifier == identifier and item.enabled for item in self.preset.order)
        triggered = not prompt.injection_trigger or self.generation in prompt.injection_trigger
        return prompt if enabled and triggered else None

    # -- markers ------------------------------------------------------------------------------

    def _world_info(self, text: str) -> str:
        if not text:
            return ""
        fmt = self.preset.wi_format
        if not fmt.strip():
            return text
        return text.join(self.sub(piece) for piece in fmt.split("{0}"))

    def _marker(self, identifier: str) -> str:
        ctx, preset, lore = self.ctx, self.preset, self.inputs.lore
        if identifier == "worldInfoBefore":
            return self._world_info(lore.before)
        if identifier == "worldInfoAfter":
            return self._world_info(lore.after)
        if identifier == "charDescription":
            return ctx.description
        if identifier == "charPersonality":
            if not ctx.personality:
                return ""
            return self.sub(preset.personality_format) if preset.personality_format else ctx.personality
        if identifier == "scenario":
            if not ctx.scenario:
                return ""
            return self.sub(preset.scenario_format) if preset.scenario_format else ctx.scenario
        return ctx.persona  # personaDescription

    def _prompt_content(self, prompt: PresetPrompt) -> str:
        """A non-marker prompt's text, with the card overrides of main / jailbreak."""
        content = self.sub(prompt.content)
        for ident, key in (("main", "system_prompt"), ("jailbreak", "post_history_instructions")):
            card_text = self._card_text(key)
            if prompt.identifier != ident or not card_text.strip():
                continue
            label = f"chat {key} override" if self._overridden(key) else f"card {key}"
            if self._active(ident) is None:
                self.adjustments.append(f"{label} not used: '{ident}' is disabled in the preset")
            elif prompt.forbid_overrides:
                self.adjustments.append(f"{label} not used: '{ident}' forbids overrides")
            else:
                self.adjustments.append(f"{label} replaced {ident} (forbid_overrides off)")
                content = self.sub(card_text, original=content)
        return content

    # -- the build ----------------------------------------------------------------------------

    def _place_persona(self, slots: list[PromptPart | str]) -> None:
        """A preset without an enabled `personaDescription` marker: the persona is its own system
        section directly after the character/system instructions (DESIGN.md, persona), i.e. after
        the last of main / charDescription / charPersonality / scenario before the chat history."""
        end = next((i for i, s in enumerate(slots) if s == "chatHistory"), len(slots))
        at = 0
        for i, slot in enumerate(slots[:end]):
            if isinstance(slot, PromptPart) and (slot.identifier in _INSTRUCTION_IDS
                                                 or (slot.source == "authors_note" and at == i)):
                at = i + 1  # a note right after `main` belongs to main's block
        slots.insert(at, PromptPart("system", self.ctx.persona, "persona", "personaDescription"))
        self.adjustments.append("persona placed after the character/system instructions: "
                                "the preset has no enabled personaDescription marker")

    def _note_text(self) -> tuple[AuthorsNote | None, str]:
        """The Author's Note sent this step and its text: world info AN-top, the note, AN-bottom
        joined with "\\n" minus one leading and one trailing newline (ST `checkWorldInfo`), macros
        expanded (ST expands extension prompts when it sends them). (None, "") when no note is
        sent; AN-top / AN-bottom world info is then left out (ST: `shouldWIAddPrompt` false)."""
        note, lore = self.inputs.authors_note, self.inputs.lore
        has_wi = any(t.strip() for t in (*lore.an_top, *lore.an_bottom))
        if note is None:
            if has_wi:
                self.adjustments.append("world info for the Author's Note left out: there is no Author's Note")
            return None, ""
        users = self.inputs.user_message_count
        if users is None:
            users = sum(1 for m in self.inputs.history if m.role == "user")
        if not note.inserted(users):
            what = "world info for the Author's Note" if has_wi else "Author's Note" if note.prompt.strip() else ""
            if what:
                self.adjustments.append(f"{what} left out: the note is inserted every {note.interval} user messages "
                                        f"and the chat has {users}")
            return None, ""
        text = "\n".join(lore.an_top) + "\n" + note.prompt + "\n" + "\n".join(lore.an_bottom)
        text = text[1:] if text.startswith("\n") else text
        text = text[:-1] if text.endswith("\n") else text
        return note, self.sub(text)

    def _place_note(self, slots: list[PromptPart | str], absolute: list[_Absolute], main_at: int | None) -> None:
        """Place the Author's Note (ST `preparePromptsForChatCompletion` / `populateChatCompletion`).

        BEFORE_PROMPT / IN_PROMPT: its own message right before / after `main` (ST inserts it
        at the start / end of main's collection; an empty or disabled main still anchors it).
        IN_CHAT: an extension prompt at its depth and role (`_extensions`). An enabled
        `authorsNote` entry in the preset's order overrides the role of a before/after note and,
        when it is In-Chat (injection_position 1), also sends the note as an in-chat prompt at
        its depth and order — for an IN_CHAT note that is a second copy, as in SillyTavern.
        """
        note, text = self._note_text()
        if note is None or not text.strip():
            return
        entry = self._active(_NOTE_ID)
        role = entry.role if entry is not None and entry.role in ROLES else ROLES[note.role]
        if note.position == NOTE_IN_CHAT:
            self.note_in_chat = (note, text)
        if entry is not None and entry.injection_position == ABSOLUTE:
            absolute.append(_Absolute(_NOTE_ID, role, text, entry.injection_depth, entry.injection_order))
            self.adjustments.append(f"Author's Note sent in-chat at depth {entry.injection_depth} (order "
                                    f"{entry.injection_order}): the preset's 'authorsNote' entry is In-Chat")
            return
        if note.position == NOTE_IN_CHAT:
            return
        if main_at is None:
            self.adjustments.append("Author's Note not sent: SillyTavern attaches it to 'main', which the preset's "
                                    "order does not place")
            return
        main_placed = (main_at < len(slots) and isinstance(slots[main_at], PromptPart)
                       and slots[main_at].identifier == "main")  # type: ignore[union-attr]
        at = main_at + (1 if note.position == NOTE_IN_PROMPT and main_placed else 0)
        slots.insert(at, PromptPart(role, text, "authors_note", _NOTE_ID))

    def build(self) -> BuiltPrompt:
        inputs, preset = self.inputs, self.preset
        slots: list[PromptPart | str] = []  # parts, or "history" / "examples" placeholders
        absolute: list[_Absolute] = []
        seen_ids: set[str] = set()
        main_at: int | None = None  # where `main` is (or would be, when empty) among the slots
        for prompt in preset.enabled_prompts(self.generation):
            ident = prompt.identifier
            if ident in ("chatHistory", "dialogueExamples"):
                if ident not in seen_ids:
                    slots.append(ident)
                seen_ids.add(ident)
                continue
            if ident == "main" and main_at is None and prompt.injection_position != ABSOLUTE:
                main_at = len(slots)
            seen_ids.add(ident)
            if ident in _FILLED_MARKERS:
                content = self._marker(ident)
                source = ("world_info" if ident.startswith("worldInfo")
                          else "persona" if ident == "personaDescription" else "marker")
                if not content.strip():
                    continue
            elif prompt.marker:
                self.adjustments.append(f"marker '{ident}' skipped: SillyTavern fills no marker of that name")
                continue
            elif ident == _NOTE_ID and inputs.authors_note is not None:
                continue  # its settings apply to the Author's Note (`_place_note`)
            elif ident in _ENGINE_PROMPTS:
                self.adjustments.append(f"prompt '{ident}' skipped: SillyTavern uses it only for its own purpose")
                continue
            elif prompt.system_prompt and ident not in _BUILTIN_SENT and prompt.injection_position != ABSOLUTE:
                self.adjustments.append(f"prompt '{ident}' skipped: SillyTavern places only its own built-in "
                                        "system prompts (main, nsfw, jailbreak, enhanceDefinitions)")
                continue
            else:
                content = self._prompt_content(prompt)
                source = "preset"
                if not content.strip():
                    if ident == "main" and self._active("main") is None:
                        self.adjustments.append("prompt 'main' skipped: disabled in the preset")
                    else:
                        self.adjustments.append(f"prompt '{ident}' skipped: empty")
                    continue
            if prompt.injection_position == ABSOLUTE:
                absolute.append(_Absolute(ident, prompt.role, content, prompt.injection_depth,
                                          prompt.injection_order))
            else:
                slots.append(PromptPart(prompt.role, content, source, ident))
        self._place_note(slots, absolute, main_at)
        if "personaDescription" not in seen_ids and self.ctx.persona.strip():
            self._place_persona(slots)
        for ident, key in (("main", "system_prompt"), ("jailbreak", "post_history_instructions")):
            if self._card_text(key).strip() and ident not in seen_ids:
                label = f"chat {key} override" if self._overridden(key) else f"card {key}"
                self.adjustments.append(f"{label} not used: the preset's order has no enabled '{ident}'")
        for key in ("scenario", "mes_example"):
            if self._overridden(key):
                self.adjustments.append(f"chat {key} override used instead of the card's {key}")

        has_history = "chatHistory" in slots
        has_examples = "dialogueExamples" in slots
        gen = self.generation
        continue_text = self.sub(inputs.continue_text) if gen == "continue" else ""
        prefill_mode = bool(continue_text) and preset.continue_prefill

        # The chat: macros, names, then in-chat injections (anchored with the continued reply).
        items = self._history_items()
        if not has_history and items:
            self.adjustments.append("chat history not sent: the preset's order has no enabled 'chatHistory'")
        anchor = None
        if continue_text and not prefill_mode:
            anchor = _Item(PromptPart("assistant", continue_text, "continue", "continueMessage"), "anchor")
            items.append(anchor)
        items = self._inject(items, absolute)
        if anchor is not None:
            items.remove(anchor)

        # Tail: continue (non-prefill), control prompts, prefill.
        tail: list[PromptPart] = []
        if continue_text and not prefill_mode:
            if has_history:
                nudge = _LAST_CHAT_MESSAGE.sub(lambda _m: continue_text.strip(), self.sub(preset.continue_nudge_prompt))
                tail.append(anchor.part)  # type: ignore[union-attr]
                if nudge.strip():
                    tail.append(PromptPart("system", nudge, "continue", "continueNudge"))
            else:
                self.adjustments.append("continued reply not sent: SillyTavern sends it with the chat history, "
                                        "which the preset leaves out")
        if gen == "impersonate":
            text = self.sub(preset.impersonation_prompt)
            if text.strip():
                tail.append(PromptPart("system", text, "impersonate", "impersonate"))
        prefill = self.sub(preset.assistant_impersonation if gen == "impersonate" else preset.assistant_prefill)
        if prefill_mode:
            text = continue_text if continue_text.endswith(" ") else continue_text + preset.continue_postfix
            if prefill.strip():
                text = prefill + "\n\n" + text
            tail.append(PromptPart("assistant", text, "prefill", "continuePrefill"))
        elif prefill.strip():
            ident = "assistantImpersonation" if gen == "impersonate" else "assistantPrefill"
            tail.append(PromptPart("assistant", prefill, "prefill", ident))

        # Mandatory prompts.
        new_chat: PromptPart | None = None
        if has_history:
            text = self.sub(preset.new_chat_prompt)
            if text.strip():
                new_chat = PromptPart("system", text, "new_chat", "newMainChat")
        inputs_kept = [it for it in items if it.kind == "input"] if has_history else []
        mandatory = [p for p in slots if isinstance(p, PromptPart)] + tail
        mandatory += [new_chat] if new_chat else []
        mandatory += [it.part for it in inputs_kept]
        needed = REPLY_PRIMING + sum(self.cost(p) for p in mandatory)
        if needed > self.budget and self.inputs.strict_budget:
            raise PromptTooLarge(needed, self.budget, preset.max_context, preset.max_tokens)
        if needed > self.budget:
            self.adjustments.append(f"the prompts need {needed} tokens, over the preset's budget of {self.budget}: "
                                    "sent whole (native delivery is not trimmed)")
        remaining = max(0, self.budget - needed)

        # Examples first when pinned, then the chat, then (unpinned) examples.
        blocks = self._example_blocks() if has_examples else []
        if not has_examples and self._example_sources():
            self.adjustments.append("examples not sent: the preset's order has no enabled 'dialogueExamples'")
        pinned = preset.settings.get("pin_examples") is True
        examples: list[PromptPart] = []
        if pinned:
            examples, remaining = self._fit_examples(blocks, remaining)

        chat: list[PromptPart] = []
        dropped = 0
        if has_history:
            chat, remaining, dropped = self._fit_history(items, remaining, inputs_kept)

        if not pinned:
            examples, remaining = self._fit_examples(blocks, remaining)

        parts: list[PromptPart] = []
        for slot in slots:
            if isinstance(slot, PromptPart):
                parts.append(slot)
            elif slot == "chatHistory":
                parts += ([new_chat] if new_chat else []) + chat
            else:
                parts += examples
        parts += tail

        tokens: dict[str, int] = {}
        for part in parts:
            tokens[part.source] = tokens.get(part.source, 0) + self.cost(part)
        if preset.squash_system_messages:
            parts = _squash(parts)
        return BuiltPrompt(parts=parts, adjustments=self.adjustments, tokens=tokens, budget=self.budget,
                           history_dropped=dropped, token_counter=str(getattr(self.count, "name", "custom")))

    # -- chat ---------------------------------------------------------------------------------

    def _history_items(self) -> list[_Item]:
        behaviour = self.preset.names_behavior
        items: list[_Item] = []
        for message in self.inputs.history:
            role = message.role if message.role in ROLES else "user"
            content = self.sub(message.content.replace("\r", ""))
            if not content.strip():
                continue
            name = None
            if role in ("user", "assistant") and message.name:
                if behaviour == _NAMES_CONTENT and not content.startswith(f"{message.name}: "):
                    content = f"{message.name}: {content}"
                elif behaviour == _NAMES_COMPLETION:
                    name = sanitize_name(message.name) or None
            source = "input" if message.is_input else "history"
            items.append(_Item(PromptPart(role, content, source, "", message.ref, name),
                               "input" if message.is_input else "history"))
        return items

    def _extensions(self) -> dict[tuple[int, str], list[tuple[str, str]]]:
        """In-chat extension prompts by (depth, role) as (identifier, text), in ST's key order
        (`getExtensionPrompt` sorts the keys: 2_floating_prompt < DEPTH_PROMPT < customDepthWI-…)."""
        keyed: dict[tuple[int, str], list[tuple[str, str, str]]] = {}
        if self.note_in_chat is not None:
            note, text = self.note_in_chat
            keyed.setdefault((note.depth, ROLES[note.role]), []).append((_NOTE_KEY, _NOTE_ID, text.strip()))
        _, depth, role = self._depth_prompt()
        if self.ctx.char_depth_prompt.strip():
            keyed.setdefault((depth, role), []).append(
                (_DEPTH_PROMPT_KEY, _DEPTH_PROMPT_ID, self.ctx.char_depth_prompt.strip()))
        for (wi_depth, wi_role), wi_text in self.inputs.lore.at_depth.items():
            try:
                role_index = int(wi_role)
                role_name = ROLES[role_index]
            except (TypeError, ValueError, IndexError):
                role_index, role_name = 0, "system"
            if isinstance(wi_text, str) and wi_text.strip():
                key = _WI_DEPTH_KEY.format(depth=int(wi_depth), role=role_index)
                keyed.setdefault((int(wi_depth), role_name), []).append((key, _WI_DEPTH_ID, wi_text.strip()))
        return {where: [(ident, text) for _, ident, text in sorted(items, key=lambda item: item[0])]
                for where, items in keyed.items()}

    def _inject(self, items: list[_Item], absolute: list[_Absolute]) -> list[_Item]:
        """Insert the in-chat prompts into the chat (ST `populationInjectionPrompts`)."""
        extensions = self._extensions()
        depths = sorted({a.depth for a in absolute} | {depth for depth, _ in extensions})
        newest_first = list(reversed(items))
        inserted = 0
        for depth in depths:
            here = [a for a in absolute if a.depth == depth]
            group: list[_Item] = []
            for order in sorted({100} | {a.order for a in here}, reverse=True):
                for role in ROLES:  # newest-first: system, user, assistant (reversed later)
                    prompts = [a for a in here if a.order == order and a.role == role]
                    ext = extensions.get((depth, role), []) if order == 100 else []
                    pieces = ["\n".join(a.content for a in prompts), "\n".join(text for _, text in ext)]
                    content = "\n".join(piece.strip() for piece in pieces if piece)
                    if not content:
                        continue
                    idents = [a.identifier for a in prompts] + [ident for ident, _ in ext]
                    source = "world_info" if all(i == _WI_DEPTH_ID for i in idents) else "injection"
                    group.append(_Item(PromptPart(role, content, source, "+".join(idents)), "injection"))
            index = depth + inserted
            newest_first[index:index] = group
            inserted += len(group)
        return list(reversed(newest_first))

    def _fit_history(self, items: list[_Item], remaining: int,
                     inputs_kept: list[_Item]) -> tuple[list[PromptPart], int, int]:
        """Fill the chat newest→oldest while it fits; the input is already paid for."""
        preset = self.preset
        kept: list[_Item] = []
        # send_if_empty: ST inserts it before walking the chat, when the chat ends with the assistant.
        filler: PromptPart | None = None
        text = preset.send_if_empty
        if text and items and items[-1].part.role == "assistant" and not inputs_kept:
            candidate = PromptPart("user", self.sub(text), "send_if_empty", "emptyUserMessageReplacement")
            if candidate.content and self.cost(candidate) <= remaining:
                filler = candidate
                remaining -= self.cost(candidate)
            elif candidate.content:
                self.adjustments.append("send_if_empty left out: the budget is full")
        full = False
        dropped_history = dropped_injections = 0
        for item in reversed(items):
            if item.kind == "input":
                kept.append(item)
                continue
            cost = self.cost(item.part)
            if not full and cost <= remaining:
                kept.append(item)
                remaining -= cost
                continue
            full = True
            if item.kind == "injection":
                dropped_injections += 1
            else:
                dropped_history += 1
        if dropped_history:
            noun = "message" if dropped_history == 1 else "messages"
            self.adjustments.append(f"{dropped_history} oldest {noun} left out: the budget of {self.budget} "
                                    "tokens is full")
        if dropped_injections:
            noun = "injection" if dropped_injections == 1 else "injections"
            self.adjustments.append(f"{dropped_injections} in-chat {noun} left out with the oldest messages: "
                                    f"the budget of {self.budget} tokens is full")
        chat = [item.part for item in reversed(kept)]
        if filler is not None:
            chat.append(filler)
        return chat, remaining, dropped_history

    # -- examples -----------------------------------------------------------------------------

    def _example_sources(self) -> list[str]:
        """Example blocks: WI top, the card's (macros expanded), WI bottom; names substituted."""
        lore, user, char = self.inputs.lore, self.inputs.user, self.inputs.char
        blocks: list[str] = []
        for text in lore.examples_top:
            blocks += split_examples(substitute_names(text, char, user))
        blocks += split_examples(self.ctx.mes_examples_raw)
        for text in lore.examples_bottom:
            blocks += split_examples(substitute_names(text, char, user))
        return blocks

    def _example_blocks(self) -> list[list[PromptPart]]:
        header_text = self.sub(self.preset.new_example_chat_prompt)
        out: list[list[PromptPart]] = []
        for block in self._example_sources():
            messages = parse_example_block(block, self.inputs.user, self.inputs.char)
            if not messages:
                continue
            parts = [PromptPart("system", header_text, "examples", "dialogueExamples")] if header_text.strip() else []
            parts += [PromptPart("system", text, "examples", "dialogueExamples", None, name) for name, text in messages]
            out.append(parts)
        return out

    def _fit_examples(self, blocks: list[list[PromptPart]], remaining: int) -> tuple[list[PromptPart], int]:
        """Whole blocks in order while they fit (ST `populateDialogueExamples` stops at the first
        block it cannot afford)."""
        kept: list[PromptPart] = []
        for index, block in enumerate(blocks):
            cost = sum(self.cost(p) for p in block)
            if cost > remaining:
                left = len(blocks) - index
                noun = "block" if left == 1 else "blocks"
                self.adjustments.append(f"examples left out: budget ({left} of {len(blocks)} example {noun}; "
                                        f"the budget of {self.budget} tokens is full)")
                break
            kept += block
            remaining -= cost
        return kept, remaining


def _squash(parts: list[PromptPart]) -> list[PromptPart]:
    """ST `squashSystemMessages`: consecutive unnamed system parts merged with "\\n"; the new-chat
    and example-header lines stay apart; empty system parts dropped."""
    out: list[PromptPart] = []
    last_squashable = False
    for part in parts:
        if part.role == "system" and not part.content:
            continue
        squashable = part.role == "system" and not part.name and part.source not in ("new_chat", "examples")
        if squashable and out and last_squashable:
            out[-1] = replace(out[-1], content=out[-1].content + "\n" + part.content)
        else:
            out.append(part)
            last_squashable = squashable
    return out
