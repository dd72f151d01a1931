"""Builds the chat-completion request SillyTavern would send for a preset (issue 5 §3).

Rules: format-digest §c.4 (SillyTavern 1.18 `openai.js` `prepareOpenAIMessages` →
`preparePromptsForChatCompletion` → `populateChatCompletion`,
`ChatCompletion.squashSystemMessages`; `PromptManager.js` `preparePrompt`), in ST's order. This
module holds the prompt order, its markers and the fixed prompts; the in-chat injections and the
Author's Note are in `injections`, the chat, the examples and the budget they are fitted into
in `budget`:

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
5. In-chat injections per depth, the card's depth prompt, world info @depth and the Author's
   Note: `injections`.
6. Example dialogue (whole blocks while they fit, after the chat unless `pin_examples`):
   `budget`.
7. Continue: without `continue_prefill` the continued reply and the nudge go last (ST adds them
   at the very end, after post-history instructions); with it the reply + `continue_postfix`
   (not when it already ends with a space, as ST) is the final assistant message. Impersonate:
   the impersonation prompt is the final system message. `send_if_empty` fills in a user turn
   when the chat (after injections) ends with the assistant and there is no input.
   `assistant_prefill` (`assistant_impersonation` for impersonate) is a final assistant message
   — ST's client sends it only to Claude; we send it for every source when it is set, merged in
   front of a continue prefill ("\\n\\n") instead of a second assistant message.
8. `squash_system_messages`: consecutive system parts without a name are merged with "\\n",
   except the new-chat and example-header lines (`squash`).
9. `names_behavior` (CONTENT, COMPLETION, NONE, DEFAULT): `budget`.

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_tui.assembly.basic import expand_lore, split_examples
from tavern_tui.assembly.macros import MacroContext, substitute, substitute_in
from tavern_tui.assembly.policy import POLICY_KIND, RP_POLICY
from tavern_tui.assembly.sillytavern.budget import (
    REPLY_PRIMING,
    ChatBudget,
    ChatItem,
    PromptTooLarge,
)
from tavern_tui.assembly.sillytavern.injections import (
    NOTE_ID,
    AbsolutePrompt,
    InChatInjector,
    depth_prompt,
)
from tavern_tui.assembly.sillytavern.inputs import (
    CHAT_OVERRIDE_KEYS,
    PromptInputs,
    PromptPart,
)
from tavern_tui.assembly.sillytavern.spans import attach_all
from tavern_tui.assembly.sillytavern.squash import squash_system_messages
from tavern_tui.formats.presets import ABSOLUTE, PresetPrompt

__all__ = ["BuiltPrompt", "build_prompt", "to_messages"]

_FILLED_MARKERS = ("worldInfoBefore", "worldInfoAfter", "charDescription", "charPersonality", "scenario",
                   "personaDescription")
_INSTRUCTION_IDS = frozenset({"main", "charDescription", "charPersonality", "scenario"})
"""The character/system instructions the persona follows when a preset has no persona marker."""
_BUILTIN_SENT = frozenset({"main", "nsfw", "jailbreak", "enhanceDefinitions"})
# Identifiers ST uses for its own purposes; never placed from the order (control/extension prompts).
_ENGINE_PROMPTS = frozenset({"impersonate", "quietPrompt", "groupNudge", "bias", "summary", "authorsNote",
                             "vectorsMemory", "vectorsDataBank", "smartContext"})
_LAST_CHAT_MESSAGE = re.compile(r"\{\{\s*lastChatMessage\s*\}\}", re.IGNORECASE)


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


@dataclass
class _Order:
    """The preset's order walked once (steps 1–3), before the chat is fitted around it."""

    slots: list[PromptPart | str] = field(default_factory=list)  # parts, or chatHistory / dialogueExamples
    absolute: list[AbsolutePrompt] = field(default_factory=list)  # in-chat prompts, placed by depth
    seen_ids: set[str] = field(default_factory=set)
    main_at: int | None = None  # where `main` is (or would be, when empty) among the slots


def to_messages(parts: list[PromptPart]) -> list[dict[str, Any]]:
    """The OpenAI `messages` array: one `{"role", "content"}` per part (+ "name" when set)."""
    out: list[dict[str, Any]] = []
    for part in parts:
        message: dict[str, Any] = {"role": part.role, "content": part.content}
        if part.name:
            message["name"] = part.name
        out.append(message)
    return out


# --- building --------------------------------------------------------------------------------


def build_prompt(inputs: PromptInputs) -> BuiltPrompt:
    """Build the request SillyTavern would send for `inputs` (rules: the module docstrings of
    `builder`, `injections` and `budget`).

    Raises:
        PromptTooLarge: the mandatory prompts need more tokens than the budget.
    """
    return _Builder(inputs).build()


class _Builder:
    """One build: the order, markers and fixed prompts here; it owns the in-chat steps
    (`InChatInjector`) and the chat, examples and budget (`ChatBudget`)."""

    def __init__(self, inputs: PromptInputs) -> None:
        self.inputs = inputs
        self.preset = inputs.preset
        self.generation = (inputs.generation or "normal").strip().lower()
        self.adjustments: list[str] = []
        self.ctx = MacroContext()
        self.ctx = self._context()
        # ST substitutes world info when it activates: after the card fields, before the prompts (issue 17).
        inputs = self.inputs = replace(inputs, lore=expand_lore(inputs.lore, self.ctx))
        self.ctx = replace(self.ctx, outlets=dict(inputs.lore.outlets) or self.ctx.outlets)
        self.chat = ChatBudget(inputs, self.ctx, self.sub, self.adjustments)
        self.in_chat = InChatInjector(inputs, self.ctx, self.sub, self._active, self.adjustments)

    # -- helpers ------------------------------------------------------------------------------

    def sub(self, text: str, original: str | None = None, where: str = "") -> str:
        """`text` with its macros expanded against the build's context (`original` = what
        `{{original}}` stands for; `where` names it in the build's evaluation budget's refusals);
        "" for empty text. The helpers expand macros through it."""
        if not text:
            return ""
        ctx = self.ctx if original is None else replace(self.ctx, original=original)
        return substitute_in(text, ctx, where) if where else substitute(text, ctx)

    def _overridden(self, key: str) -> bool:
        """The chat overrides the card's `key` (ST: `chat_metadata[key] || card[key]`)."""
        value = self.inputs.chat_overrides.get(key) if key in CHAT_OVERRIDE_KEYS else None
        return isinstance(value, str) and bool(value)

    def _card_text(self, key: str) -> str:
        """The card's field `key`, or the chat's override of it."""
        value = self.inputs.chat_overrides[key] if self._overridden(key) else self.inputs.card.get(key)
        return value if isinstance(value, str) else ""

    def _context(self) -> MacroContext:
        """The macro context: base + names, card fields (macros expanded once, in ST's field
        order), persona, examples and chat state."""
        inputs = self.inputs
        base = inputs.macros or MacroContext()
        history = inputs.history
        depth_text, _, _ = depth_prompt(inputs.card)
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
            last_char_message=last_char,
            last_message_id=inputs.history_offset + len(history) - 1 if history else None,
            outlets=dict(inputs.lore.outlets) or base.outlets,
        )
        self.ctx = ctx  # `sub` reads it: the card fields are expanded against the raw ones
        fields = {name: self.sub(getattr(ctx, name), where=name)
                  for name in ("description", "personality", "scenario", "persona", "char_depth_prompt",
                               "first_message")}
        examples_raw = self.sub(self._card_text("mes_example"), where="mes_example")
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
        content = self.sub(prompt.content, where=f"preset prompt '{prompt.identifier}'")
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
                content = self.sub(card_text, original=content, where=key)
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

    def build(self) -> BuiltPrompt:
        """The request for the inputs, in the steps of the module docstring; called once.

        Raises:
            PromptTooLarge: the mandatory prompts need more tokens than the budget and the
                inputs ask for a strict budget.
        """
        inputs = self.inputs
        order = self._walk_order()
        self._place_extras(order)
        slots = order.slots
        has_history = "chatHistory" in slots
        continue_text = self.sub(inputs.continue_text) if self.generation == "continue" else ""
        prefill_mode = bool(continue_text) and self.preset.continue_prefill
        items, anchor = self._chat_items(order.absolute, has_history, "" if prefill_mode else continue_text)
        tail = self._tail(anchor, continue_text if prefill_mode else "", has_history)
        new_chat, group_nudge = self._chat_frame(has_history)
        inputs_kept = [it for it in items if it.kind == "input"] if has_history else []
        mandatory = [p for p in slots if isinstance(p, PromptPart)] + tail
        mandatory += [new_chat] if new_chat else []
        mandatory += [group_nudge] if group_nudge else []
        mandatory += [it.part for it in inputs_kept]
        mandatory += [it.part for it in items if it.kind == "summary"] if has_history else []
        remaining = self._remaining(mandatory)
        examples, chat, dropped = self._fit(items, inputs_kept, remaining, has_history,
                                            "dialogueExamples" in slots)
        parts: list[PromptPart] = []
        for slot in slots:
            if isinstance(slot, PromptPart):
                parts.append(slot)
            elif slot == "chatHistory":
                parts += ([new_chat] if new_chat else []) + chat + ([group_nudge] if group_nudge else [])
            else:
                parts += examples
        parts += tail
        return self._finish(parts, dropped)

    def _walk_order(self) -> _Order:
        """Steps 1–3: the enabled prompts in order, as parts, placeholders and absolute prompts."""
        order = _Order()
        for prompt in self.preset.enabled_prompts(self.generation):
            ident = prompt.identifier
            if ident in ("chatHistory", "dialogueExamples"):
                if ident not in order.seen_ids:
                    order.slots.append(ident)
                order.seen_ids.add(ident)
                continue
            if ident == "main" and order.main_at is None and prompt.injection_position != ABSOLUTE:
                order.main_at = len(order.slots)
            order.seen_ids.add(ident)
            placed = self._order_content(prompt)
            if placed is None:
                continue
            content, source = placed
            if prompt.injection_position == ABSOLUTE:
                order.absolute.append(AbsolutePrompt(ident, prompt.role, content, prompt.injection_depth,
                                                     prompt.injection_order))
            else:
                order.slots.append(PromptPart(prompt.role, content, source, ident))
        return order

    def _order_content(self, prompt: PresetPrompt) -> tuple[str, str] | None:
        """An ordered prompt's (content, part source), or None when ST does not place it (the
        adjustment says why, except for blank markers and the note's own settings)."""
        ident = prompt.identifier
        if ident in _FILLED_MARKERS:
            content = self._marker(ident)
            source = ("world_info" if ident.startswith("worldInfo")
                      else "persona" if ident == "personaDescription" else "marker")
            return (content, source) if content.strip() else None
        if prompt.marker:
            self.adjustments.append(f"marker '{ident}' skipped: SillyTavern fills no marker of that name")
            return None
        if ident == NOTE_ID and self.inputs.authors_note is not None:
            return None  # its settings apply to the Author's Note (`place_note`)
        if ident in _ENGINE_PROMPTS:
            self.adjustments.append(f"prompt '{ident}' skipped: SillyTavern uses it only for its own purpose")
            return None
        if prompt.system_prompt and ident not in _BUILTIN_SENT and prompt.injection_position != ABSOLUTE:
            self.adjustments.append(f"prompt '{ident}' skipped: SillyTavern places only its own built-in "
                                    "system prompts (main, nsfw, jailbreak, enhanceDefinitions)")
            return None
        content = self._prompt_content(prompt)
        if not content.strip():
            if ident == "main" and self._active("main") is None:
                self.adjustments.append("prompt 'main' skipped: disabled in the preset")
            else:
                self.adjustments.append(f"prompt '{ident}' skipped: empty")
            return None
        return content, "preset"

    def _place_extras(self, order: _Order) -> None:
        """The parts not placed by the order: the Author's Note, the persona without a marker,
        the policy; and the notes on card / chat overrides the order leaves unused."""
        slots, seen_ids = order.slots, order.seen_ids
        self.in_chat.place_note(slots, order.absolute, order.main_at)
        if "personaDescription" not in seen_ids and self.ctx.persona.strip():
            self._place_persona(slots)
        policy = self.sub(self.inputs.policy) if self.inputs.policy.strip() else ""
        if policy.strip():  # its own system part, the last before the chat (`assembly.policy`)
            at = slots.index("chatHistory") if "chatHistory" in slots else len(slots)
            slots.insert(at, PromptPart("system", policy.strip(), POLICY_KIND, RP_POLICY))
        for ident, key in (("main", "system_prompt"), ("jailbreak", "post_history_instructions")):
            if self._card_text(key).strip() and ident not in seen_ids:
                label = f"chat {key} override" if self._overridden(key) else f"card {key}"
                self.adjustments.append(f"{label} not used: the preset's order has no enabled '{ident}'")
        for key in ("scenario", "mes_example"):
            if self._overridden(key):
                self.adjustments.append(f"chat {key} override used instead of the card's {key}")

    def _chat_items(self, absolute: list[AbsolutePrompt], has_history: bool,
                    anchor_text: str) -> tuple[list[ChatItem], ChatItem | None]:
        """The chat (macros, names) with its in-chat injections, and the continued reply that
        anchors their depths (`anchor_text`; "" = none) but is not one of the items."""
        items = self.chat.history_items()
        if not has_history and items:
            self.adjustments.append("chat history not sent: the preset's order has no enabled 'chatHistory'")
        anchor = None
        if anchor_text:
            anchor = ChatItem(PromptPart("assistant", anchor_text, "continue", "continueMessage"), "anchor")
            items.append(anchor)
        items = self.in_chat.inject(items, absolute)
        if anchor is not None:
            items.remove(anchor)
        return items, anchor

    def _tail(self, anchor: ChatItem | None, prefill_text: str, has_history: bool) -> list[PromptPart]:
        """Step 7, the parts after everything else: the continued reply and its nudge (`anchor`),
        the impersonation prompt, the assistant prefill (merged with `prefill_text`, the reply
        continued as a prefill)."""
        preset, gen = self.preset, self.generation
        tail: list[PromptPart] = []
        if anchor is not None:
            if has_history:
                text = anchor.part.content
                nudge = _LAST_CHAT_MESSAGE.sub(lambda _m: text.strip(), self.sub(preset.continue_nudge_prompt))
                tail.append(anchor.part)
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
        if prefill_text:
            text = prefill_text if prefill_text.endswith(" ") else prefill_text + preset.continue_postfix
            if prefill.strip():
                text = prefill + "\n\n" + text
            tail.append(PromptPart("assistant", text, "prefill", "continuePrefill"))
        elif prefill.strip():
            ident = "assistantImpersonation" if gen == "impersonate" else "assistantPrefill"
            tail.append(PromptPart("assistant", prefill, "prefill", ident))
        return tail

    def _chat_frame(self, has_history: bool) -> tuple[PromptPart | None, PromptPart | None]:
        """The new-chat line above the chat and the group nudge below it (None = not sent)."""
        preset, group = self.preset, self.inputs.group
        new_chat: PromptPart | None = None
        group_nudge: PromptPart | None = None
        if has_history:
            text = self.sub(preset.new_group_chat_prompt if group else preset.new_chat_prompt)
            if text.strip():
                new_chat = PromptPart("system", text, "new_chat", "newMainChat")
            nudge = self.sub(preset.group_nudge_prompt) if group and self.generation != "impersonate" else ""
            if nudge.strip():  # populateChatHistory: the last message of the chat history
                group_nudge = PromptPart("system", nudge, "group_nudge", "groupNudge")
        return new_chat, group_nudge

    def _remaining(self, mandatory: list[PromptPart]) -> int:
        """Step 4: the budget left once the mandatory parts and the reply priming are counted."""
        preset, budget = self.preset, self.chat.budget
        needed = REPLY_PRIMING + sum(self.chat.cost(p) for p in mandatory)
        if needed > budget and self.inputs.strict_budget:
            raise PromptTooLarge(needed, budget, preset.max_context, preset.max_tokens)
        if needed > budget:
            self.adjustments.append(f"the prompts need {needed} tokens, over the preset's budget of "
                                    f"{budget}: sent whole (native delivery is not trimmed)")
        return max(0, budget - needed)

    def _fit(self, items: list[ChatItem], inputs_kept: list[ChatItem], remaining: int, has_history: bool,
             has_examples: bool) -> tuple[list[PromptPart], list[PromptPart], int]:
        """Steps 4 and 6: (examples, chat, messages dropped) fitted into `remaining`; pinned
        examples first, then the chat, then unpinned examples."""
        blocks = self.chat.example_blocks() if has_examples else []
        if not has_examples and self.chat.example_sources():
            self.adjustments.append("examples not sent: the preset's order has no enabled 'dialogueExamples'")
        pinned = self.preset.settings.get("pin_examples") is True
        examples: list[PromptPart] = []
        if pinned:
            examples, remaining = self.chat.fit_examples(blocks, remaining)
        chat: list[PromptPart] = []
        dropped = 0
        if has_history:
            chat, remaining, dropped = self.chat.fit_history(items, remaining, inputs_kept)
        if not pinned:
            examples, remaining = self.chat.fit_examples(blocks, remaining)
        return examples, chat, dropped

    def _finish(self, parts: list[PromptPart], dropped: int) -> BuiltPrompt:
        """Attribution, the token count per source (before squashing), then step 8."""
        parts = attach_all(parts, self.preset, self.inputs.lore)  # attribution (metadata only)
        tokens: dict[str, int] = {}
        for part in parts:
            tokens[part.source] = tokens.get(part.source, 0) + self.chat.cost(part)
        if self.preset.squash_system_messages:
            parts = squash_system_messages(parts)
        return BuiltPrompt(parts=parts, adjustments=self.adjustments, tokens=tokens, budget=self.chat.budget,
                           history_dropped=dropped, token_counter=str(getattr(self.inputs.count, "name", "custom")))

