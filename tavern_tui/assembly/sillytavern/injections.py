"""Provides `InChatInjector`: the in-chat injections of a SillyTavern prompt (prompts at a depth,
the card's depth prompt, world info @depth) and the placing of the Author's Note.

Rule: SillyTavern 1.18 `openai.js` `populationInjectionPrompts` and
`preparePromptsForChatCompletion`, `script.js` `getExtensionPrompt`, `authors-note.js`
`setFloatingPrompt`, `world-info.js` `checkWorldInfo` (format-digest §c.4; step 5 of
`builder`):

In-chat injections per depth: orders {100} ∪ the prompts' orders; chronologically lower order
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

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tavern_tui.assembly.macros import MacroContext
from tavern_tui.assembly.sillytavern.budget import ChatItem
from tavern_tui.assembly.sillytavern.inputs import (
    NOTE_IN_CHAT,
    NOTE_IN_PROMPT,
    ROLES,
    AuthorsNote,
    PromptInputs,
    PromptPart,
)
from tavern_tui.assembly.sillytavern.spans import injection_spans
from tavern_tui.formats.presets import ABSOLUTE, PresetPrompt

__all__ = ["NOTE_ID", "AbsolutePrompt", "InChatInjector", "depth_prompt"]

_DEPTH_PROMPT_ID = "charDepthPrompt"
_WI_DEPTH_ID = "worldInfoDepth"
NOTE_ID = "authorsNote"
# SillyTavern's extension-prompt keys: prompts of one depth + role are joined in the JS default
# sort of these keys (`getExtensionPrompt`): "2_floating_prompt" < "DEPTH_PROMPT" < "customDepthWI-…".
_NOTE_KEY = "2_floating_prompt"  # authors-note.js MODULE_NAME ("deliberate, for sorting lower than memory")
_DEPTH_PROMPT_KEY = "DEPTH_PROMPT"  # script.js inject_ids.DEPTH_PROMPT
_WI_DEPTH_KEY = "customDepthWI-{depth}-{role}"  # script.js inject_ids.CUSTOM_WI_DEPTH_ROLE


@dataclass
class AbsolutePrompt:
    """A preset prompt sent in the chat at a depth (injection_position 1, "absolute").

    Attributes:
        identifier: the preset prompt identifier ("authorsNote" for the Author's Note).
        role: "system", "user" or "assistant".
        content: the text, macros expanded.
        depth: messages counted from the end of the chat (0 = after the last message).
        order: `injection_order`; lower orders come first in the chat at one depth.
    """

    identifier: str
    role: str
    content: str
    depth: int
    order: int


def depth_prompt(card: dict[str, Any]) -> tuple[str, int, str]:
    """The card's depth prompt (`extensions.depth_prompt`) as (text, depth, role).

    A missing or malformed depth prompt gives ("", 4, "system"); a depth that is not a
    non-negative integer (or a string of digits) is 4 and a role other than system / user /
    assistant is system (SillyTavern's defaults for `depth_prompt`).
    """
    ext = card.get("extensions")
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


class InChatInjector:
    """The in-chat steps of one prompt build: the Author's Note and the injections at a depth.

    Args:
        inputs: the build's inputs (card, world info, Author's Note, history).
        ctx: the build's macro context (card fields already expanded).
        sub: the builder's macro expansion, `sub(text, original=None) -> str`.
        active: the builder's lookup of a prompt the preset's order enables for this
            generation type, `active(identifier) -> PresetPrompt | None`.
        adjustments: the build's list of adjustment sentences; the steps append to it in order.
    """

    def __init__(self, inputs: PromptInputs, ctx: MacroContext, sub: Callable[..., str],
                 active: Callable[[str], PresetPrompt | None], adjustments: list[str]) -> None:
        self.inputs = inputs
        self.ctx = ctx
        self.sub = sub
        self.active = active
        self.adjustments = adjustments
        self.note_in_chat: tuple[AuthorsNote, str] | None = None  # the IN_CHAT Author's Note and its text

    def note_text(self) -> tuple[AuthorsNote | None, str]:
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

    def place_note(self, slots: list[PromptPart | str], absolute: list[AbsolutePrompt], main_at: int | None) -> None:
        """Place the Author's Note (ST `preparePromptsForChatCompletion` / `populateChatCompletion`).

        BEFORE_PROMPT / IN_PROMPT: its own message right before / after `main` (ST inserts it
        at the start / end of main's collection; an empty or disabled main still anchors it).
        IN_CHAT: an extension prompt at its depth and role (`_extensions`). An enabled
        `authorsNote` entry in the preset's order overrides the role of a before/after note and,
        when it is In-Chat (injection_position 1), also sends the note as an in-chat prompt at
        its depth and order — for an IN_CHAT note that is a second copy, as in SillyTavern.
        """
        note, text = self.note_text()
        if note is None or not text.strip():
            return
        entry = self.active(NOTE_ID)
        role = entry.role if entry is not None and entry.role in ROLES else ROLES[note.role]
        if note.position == NOTE_IN_CHAT:
            self.note_in_chat = (note, text)
        if entry is not None and entry.injection_position == ABSOLUTE:
            absolute.append(AbsolutePrompt(NOTE_ID, role, text, entry.injection_depth, entry.injection_order))
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
        slots.insert(at, PromptPart(role, text, "authors_note", NOTE_ID))

    def extensions(self) -> dict[tuple[int, str], list[tuple[str, str]]]:
        """In-chat extension prompts by (depth, role) as (identifier, text), in ST's key order
        (`getExtensionPrompt` sorts the keys: 2_floating_prompt < DEPTH_PROMPT < customDepthWI-…)."""
        keyed: dict[tuple[int, str], list[tuple[str, str, str]]] = {}
        if self.note_in_chat is not None:
            note, text = self.note_in_chat
            keyed.setdefault((note.depth, ROLES[note.role]), []).append((_NOTE_KEY, NOTE_ID, text.strip()))
        _, depth, role = depth_prompt(self.inputs.card)
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

    def inject(self, items: list[ChatItem], absolute: list[AbsolutePrompt]) -> list[ChatItem]:
        """Insert the in-chat prompts into the chat (ST `populationInjectionPrompts`)."""
        extensions = self.extensions()
        depths = sorted({a.depth for a in absolute} | {depth for depth, _ in extensions})
        newest_first = list(reversed(items))
        inserted = 0
        for depth in depths:
            here = [a for a in absolute if a.depth == depth]
            group: list[ChatItem] = []
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
                    spans = injection_spans(content, prompts, ext, depth, role, self.inputs.lore)
                    group.append(ChatItem(PromptPart(role, content, source, "+".join(idents), spans=spans),
                                          "injection"))
            index = depth + inserted
            newest_first[index:index] = group
            inserted += len(group)
        return list(reversed(newest_first))
