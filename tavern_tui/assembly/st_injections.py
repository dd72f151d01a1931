"""Provides the in-chat injections of a SillyTavern prompt: prompts at a depth, the card's depth
prompt, world info @depth and the Author's Note.

Rule: SillyTavern 1.18 `openai.js` `populationInjectionPrompts` and
`preparePromptsForChatCompletion`, `script.js` `getExtensionPrompt`, `authors-note.js`
`setFloatingPrompt`, `world-info.js` `checkWorldInfo` (format-digest §c.4; step 5 of
`st_prompt`):

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

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tavern_tui.assembly.st_budget import ROLES, PromptPart, _Item
from tavern_tui.formats.presets import ABSOLUTE

if TYPE_CHECKING:
    from tavern_tui.assembly.macros import MacroContext
    from tavern_tui.assembly.st_prompt import PromptInputs
    from tavern_tui.formats.presets import PresetPrompt

__all__ = ["NOTE_BEFORE_PROMPT", "NOTE_IN_CHAT", "NOTE_IN_PROMPT", "AuthorsNote"]

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


@dataclass
class _Absolute:
    identifier: str
    role: str
    content: str
    depth: int
    order: int


class _InChatSteps:
    """The in-chat steps of `st_prompt._Builder`, which inherits them: they read the builder's
    state declared here, expand macros with its `sub` and look prompts up with its `_active`."""

    inputs: PromptInputs
    ctx: MacroContext
    adjustments: list[str]
    note_in_chat: tuple[AuthorsNote, str] | None

    if TYPE_CHECKING:
        def sub(self, text: str, original: str | None = None) -> str: ...

        def _active(self, identifier: str) -> PresetPrompt | None: ...

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
