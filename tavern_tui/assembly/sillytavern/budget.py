"""Provides `ChatBudget`: the chat history and the example dialogue of a SillyTavern prompt,
fitted into the token budget.

Rule: SillyTavern 1.18 `openai.js` `populateChatHistory`, `populateDialogueExamples`,
`parseExampleIntoIndividual` and `sanitizeName` (format-digest §c.4; steps 4, 6 and 9 of
`builder`):

- Budget = openai_max_context − openai_max_tokens, or the request's resolved context limit
  (`PromptInputs.context_limit`, issue 16). Summary nodes are paid for with the mandatory
  prompts and never dropped. What the mandatory prompts and the reply
  priming (`REPLY_PRIMING`) leave is filled with the chat (with its injections) newest→oldest
  while it fits, stopping at the first message that does not (the input is kept whatever
  happens); when the mandatory prompts alone do not fit, the builder raises `PromptTooLarge`.
- Example dialogue: blocks = WI top + card blocks + WI bottom; each becomes the
  `new_example_chat_prompt` line plus its messages (system role, name example_user /
  example_assistant). Whole blocks, in order, while they fit; after the chat unless the preset
  sets `pin_examples`.
- `names_behavior`: CONTENT prefixes "Name: " to user/assistant chat messages (not twice);
  COMPLETION sets the OpenAI `name` (sanitised like ST `sanitizeName`); NONE and DEFAULT (solo)
  change nothing. Continue/prefill parts are left as they are.

Chat messages also go through the macro engine (ST `preparePrompt` runs on every history
message). Token cost of a part = count(content) + count(name) + `MESSAGE_OVERHEAD`. Pure: no I/O.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from tavern_tui.assembly.basic import split_examples
from tavern_tui.assembly.macros import MacroContext, history_expander
from tavern_tui.assembly.sillytavern.inputs import ROLES, PromptInputs, PromptPart
from tavern_tui.errors import TavernError
from tavern_tui.text.names import substitute_names

__all__ = [
    "MESSAGE_OVERHEAD", "REPLY_PRIMING", "ChatBudget", "ChatItem", "PromptTooLarge", "parse_example_block",
    "sanitize_name",
]

MESSAGE_OVERHEAD = 3  # framing tokens of one chat message (OpenAI's ~3 per message)
REPLY_PRIMING = 3  # ST reserves 3 tokens: "every reply is primed with <|start|>assistant<|message|>"

_NAMES_NONE, _NAMES_DEFAULT, _NAMES_COMPLETION, _NAMES_CONTENT = -1, 0, 1, 2
_VALID_NAME = re.compile(r"[a-zA-Z0-9_]{1,64}")


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


@dataclass
class ChatItem:
    """A chat-area message during budgeting.

    Attributes:
        part: the message.
        kind: "history" | "input" | "summary" (a summary node, never dropped) | "injection" |
            "anchor" (the continued reply, which anchors the injection depths and is taken out
            again before the chat is fitted).
    """

    part: PromptPart
    kind: str


class ChatBudget:
    """The chat and example steps of one prompt build, and the budget they are fitted into.

    Args:
        inputs: the build's inputs (preset, history, world info, names, token counter).
        ctx: the build's macro context (card fields already expanded).
        sub: the builder's macro expansion, `sub(text, original=None) -> str`.
        adjustments: the build's list of adjustment sentences; the steps append to it in order.

    Attributes:
        budget: openai_max_context − openai_max_tokens, in tokens.
    """

    def __init__(self, inputs: PromptInputs, ctx: MacroContext, sub: Callable[..., str],
                 adjustments: list[str]) -> None:
        self.inputs = inputs
        self.preset = inputs.preset
        self.ctx = ctx
        self.sub = sub
        self.count = inputs.count
        limit = inputs.context_limit
        self.budget = limit if limit is not None else self.preset.max_context - self.preset.max_tokens
        self.adjustments = adjustments

    def cost(self, part: PromptPart) -> int:
        """Tokens of one part: count(content) + count(name) + `MESSAGE_OVERHEAD`."""
        return self.count(part.content) + (self.count(part.name) if part.name else 0) + MESSAGE_OVERHEAD

    # -- chat ---------------------------------------------------------------------------------

    def history_items(self) -> list[ChatItem]:
        """The chat as items, oldest first: macros expanded, empty messages dropped, unknown roles
        sent as user, and names applied as the preset's `names_behavior` says."""
        behaviour = self.preset.names_behavior
        items: list[ChatItem] = []
        expand = history_expander(self.ctx)
        for message in self.inputs.history:
            role = message.role if message.role in ROLES else "user"
            text = message.content.replace("\r", "")
            # SillyTavern expands the person's input once, when it is sent (the assemblers do that first),
            # and never the stored chat again: expanded here without re-running any variable write
            # (`history_expander`: macro-free text as it is; a state-free expansion from its cache).
            content = expand(text)
            if not content.strip():
                continue
            name = None
            if role in ("user", "assistant") and message.name:
                # DEFAULT names a group chat's messages, all but the person's (openai.js setOpenAIMessages).
                named = behaviour == _NAMES_CONTENT or (behaviour == _NAMES_DEFAULT and self.inputs.group
                                                        and message.name != self.inputs.user)
                if named and not content.startswith(f"{message.name}: "):
                    content = f"{message.name}: {content}"
                elif behaviour == _NAMES_COMPLETION:
                    name = sanitize_name(message.name) or None
            source = "input" if message.is_input else "summary" if message.pinned else "history"
            items.append(ChatItem(PromptPart(role, content, source, "", message.ref, name),
                               "input" if message.is_input else "summary" if message.pinned else "history"))
        return items

    def fit_history(self, items: list[ChatItem], remaining: int,
                     inputs_kept: list[ChatItem]) -> tuple[list[PromptPart], int, int]:
        """Fill the chat newest→oldest while it fits; the input is already paid for."""
        preset = self.preset
        kept: list[ChatItem] = []
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
        dropped_history, dropped_injections = self.inputs.history_offset, 0  # the offset: cut before the build
        for item in reversed(items):
            if item.kind in ("input", "summary"):  # paid for with the mandatory prompts
                kept.append(item)
                continue
            if not full and (cost := self.cost(item.part)) <= remaining:
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

    def example_sources(self) -> list[str]:
        """Example blocks: WI top, the card's (macros expanded), WI bottom; names substituted."""
        lore, user, char = self.inputs.lore, self.inputs.user, self.inputs.char
        blocks: list[str] = []
        for text in lore.examples_top:
            blocks += split_examples(substitute_names(text, char, user))
        blocks += split_examples(self.ctx.mes_examples_raw)
        for text in lore.examples_bottom:
            blocks += split_examples(substitute_names(text, char, user))
        return blocks

    def example_blocks(self) -> list[list[PromptPart]]:
        """Each example block as its parts: the `new_example_chat_prompt` line (when not blank)
        and its messages (system role, named example_user / example_assistant)."""
        header_text = self.sub(self.preset.new_example_chat_prompt)
        out: list[list[PromptPart]] = []
        for block in self.example_sources():
            messages = parse_example_block(block, self.inputs.user, self.inputs.char)
            if not messages:
                continue
            parts = [PromptPart("system", header_text, "examples", "dialogueExamples")] if header_text.strip() else []
            parts += [PromptPart("system", text, "examples", "dialogueExamples", None, name) for name, text in messages]
            out.append(parts)
        return out

    def fit_examples(self, blocks: list[list[PromptPart]], remaining: int) -> tuple[list[PromptPart], int]:
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
